# Issue 28: a reader's transaction that looked the history up before the
# packing made a partition of job_history_packed, and looks it up again with
# the same statements (PL/pgSQL's cached generic plans) after the rows moved
# into that partition, finds every job in both looks.  The packing makes a
# partition in one round and moves rows into it from the next (a reader's
# transaction that already holds its lock on job_history_packed reads no
# invalidation on its own), and _packed_jobs reads the invalidations before
# it plans.  Seen failing before both: the first round moved every job, and
# the second look found none of them (TAP 180 found the same, now and then,
# as missing jobs).  The worker is off: nothing else moves.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('attach');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.database = 'postgres'
webhook_ingest.enabled = off
});
$node->start;
# 2 000 done jobs of 100 objects (twenty each, one every 100 ids) over the
# last two days, in job_history as the worker leaves them; no packed
# partition yet.
$node->safe_psql('postgres', q{
	CREATE EXTENSION webhook_ingest;
	SELECT webhook_ingest.add_source('s1', 'http://127.0.0.1:9/{external_id}');
	SELECT webhook_ingest._ensure_partitions('webhook_ingest.job_history', now() - interval '3 days', now());
	INSERT INTO webhook_ingest.job_history (id, finished_at, created_at, started_at, source_id, events, attempts,
	                                        last_status, external_id)
	SELECT i, f, f - interval '2 s', f - interval '1 s', 1, 1, 1, 200, 'obj-' || i % 100
	  FROM generate_series(1, 2000) i, LATERAL (SELECT now() - interval '2 days' + i * interval '80 s' AS f) t;
	INSERT INTO webhook_ingest.event_ledger (source_id, received, event_id, job_id)
	SELECT h.source_id, webhook_ingest._seconds(h.created_at), 'evt-' || h.id, h.id FROM webhook_ingest.job_history h;
	SELECT setval('webhook_ingest.jobs_id_seq', 3000);
	ANALYZE;
	CREATE TABLE anchor AS SELECT now() AS t;
	CREATE TABLE looks (look int, jobs_of_obj7 bigint, days_jobs bigint, history_of_obj7 bigint, last_of_obj42 bigint);
});
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest._partitions('webhook_ingest.job_history_packed')}),
	'0', 'no packed partition yet');
my $truth = $node->safe_psql('postgres', q{
	SELECT (SELECT count(*) FROM webhook_ingest.jobs WHERE source = 's1' AND external_id = 'obj-7') || ' ' ||
	       (SELECT count(*) FROM webhook_ingest.jobs, anchor WHERE finished_at BETWEEN t - interval '30 hours' AND t - interval '6 hours') || ' ' ||
	       (SELECT count(*) FROM webhook_ingest.history('s1', 'obj-7')) || ' ' ||
	       (SELECT max(id) FROM webhook_ingest.jobs WHERE source = 's1' AND external_id = 'obj-42')});

# The packer holds advisory lock 182 while it packs: the reader looks, waits
# for the lock in the same transaction, and looks again.
my $packer = $node->background_psql('postgres');
$packer->query_safe('SELECT pg_advisory_lock(182)');
my $reader = $node->background_psql('postgres');
$reader->query_until(qr/reading/, q{\echo reading
SET plan_cache_mode = force_generic_plan;
DO $$
DECLARE
    at timestamptz := (SELECT t FROM anchor);
BEGIN
    FOR look IN 1..2 LOOP
        IF look = 2 THEN
            PERFORM pg_advisory_lock(182);
        END IF;
        INSERT INTO looks
        SELECT look,
               (SELECT count(*) FROM webhook_ingest.jobs WHERE source = 's1' AND external_id = 'obj-7'),
               (SELECT count(*) FROM webhook_ingest.jobs
                 WHERE finished_at BETWEEN at - interval '30 hours' AND at - interval '6 hours'),
               (SELECT count(*) FROM webhook_ingest.history('s1', 'obj-7')),
               (SELECT j.id FROM webhook_ingest.jobs j WHERE j.source = 's1' AND j.external_id = 'obj-42'
                 ORDER BY j.id DESC LIMIT 1);
    END LOOP;
END
$$;
\echo read
});
# (the reader's first look is made, and it waits for the lock)
$node->poll_query_until('postgres', q{SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted})
  or die 'the reader never waited';

my ($packed, $behind) = split /\|/, $packer->query_safe(
	q{SELECT packed, behind FROM webhook_ingest._pack_history(now() + interval '1 hour', '1 minute')});
is("$packed $behind", '0 t', "the round that made the packed partitions moved nothing into them (packed $packed)");
my ($made, $holding) = split /\|/, $node->safe_psql('postgres', q{
	SELECT (SELECT count(*) FROM webhook_ingest._partitions('webhook_ingest.job_history_packed')),
	       (SELECT count(DISTINCT tableoid) FROM webhook_ingest.job_history)});
ok($made > 0 && $made >= $holding, "  and made them ($made, one for each partition of job_history up to now, $holding of them holding jobs)");
($packed, $behind) = split /\|/, $packer->query_safe(
	q{SELECT packed, behind FROM webhook_ingest._pack_history(now() + interval '1 hour', '1 minute')});
is("$packed $behind", '2000 f', 'the next round packed every job');
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.job_history}), '0', '  none left in job_history');
$packer->query_safe('SELECT pg_advisory_unlock(182)');
$reader->query_until(qr/read/, '');

my ($first, $second) = split /\n/, $node->safe_psql('postgres', q{
	SELECT concat_ws(' ', jobs_of_obj7, days_jobs, history_of_obj7, last_of_obj42) FROM looks ORDER BY look});
is($first, $truth, "the reader's first look, before packing, found every job ($truth)");
is($second, $truth, '  and its second look, in the same transaction, after the rows moved into the new partition');
is($node->safe_psql('postgres', q{
	SELECT concat_ws(' ', (SELECT count(*) FROM webhook_ingest.jobs WHERE source = 's1' AND external_id = 'obj-7'),
	       (SELECT count(*) FROM webhook_ingest.jobs, anchor WHERE finished_at BETWEEN t - interval '30 hours' AND t - interval '6 hours'),
	       (SELECT count(*) FROM webhook_ingest.history('s1', 'obj-7')),
	       (SELECT max(id) FROM webhook_ingest.jobs WHERE source = 's1' AND external_id = 'obj-42'))}),
	$truth, 'a new transaction finds the same');

$_->quit for $reader, $packer;
unlike(slurp_file($node->logfile), qr/ERROR|FATAL|PANIC/, 'no error in the server log');
$node->stop;
done_testing();
