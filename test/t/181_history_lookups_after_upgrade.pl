# Issue 28, the upgrade: a 0.9.0 database with its history packed the 0.8.0
# way (no object keys, no spans), the 0.10.0 library loaded.  Before ALTER
# EXTENSION UPDATE the jobs view works as 0.9.0's (a lookup by id still
# reads one block, through 0.8.0's _packed_jobs(job_id)) and enqueue() with
# 0.9.0's ledger; after it, an object's jobs and a time window give the same
# answers at once (the rows packed before are found under the index's key
# 0), while the worker's storage round keys those rows a batch at a time,
# and after it has.  Event ids accepted before the update name no job:
# history() counts their webhooks but lists none.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = PostgreSQL::Test::Cluster->new('after_upgrade');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.database = 'postgres'
webhook_ingest.poll_interval = 50ms
});
$node->start;
# 20 000 done jobs of 1 000 objects over the last two days, packed by 0.9.0's _pack_history.
$node->safe_psql('postgres', q{
	CREATE EXTENSION webhook_ingest VERSION '0.9.0';
	SELECT webhook_ingest.add_source('s' || s, 'http://127.0.0.1:9/{external_id}') FROM generate_series(1, 2) s;
	SELECT webhook_ingest.pause_source('s1'), webhook_ingest.pause_source('s2');
	SELECT webhook_ingest._ensure_partitions('webhook_ingest.job_history', now() - interval '3 days', now());
	INSERT INTO webhook_ingest.jobs (id, source, external_id, state, attempts, last_status, created_at, started_at,
	                                 finished_at)
	SELECT i, 's' || (1 + i % 1000 % 2), 'obj-' || i % 1000, 'done', 1, 200, f - interval '2 s', f - interval '1 s', f
	  FROM generate_series(1, 20000) i, LATERAL (SELECT now() - interval '2 days' + i * interval '8 s' AS f) t;
	SELECT setval('webhook_ingest.jobs_id_seq', 30000);
});
my $packed = 0;
for (1 .. 100)
{
	$node->safe_psql('postgres', q{SELECT webhook_ingest._pack_history(now() + interval '1 hour', '1 s')});
	last if $node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.job_history}) eq '0';
}
is($node->safe_psql('postgres', q{SELECT sum(cardinality(ids)) FROM webhook_ingest.job_history_packed}), '20000',
	'0.9.0 packed the 20 000 done jobs');

# The 0.10.0 library with 0.9.0's schema: a lookup by id is still narrowed to one block, enqueue works.
like($node->safe_psql('postgres', q{EXPLAIN (VERBOSE, COSTS OFF) SELECT state FROM webhook_ingest.jobs WHERE id = 777}),
	qr/Function Call: webhook_ingest\._packed_jobs\('777'::bigint\)/,
	'before the update, a lookup by id reads one block through 0.8.0\'s _packed_jobs(job_id)');
is($node->safe_psql('postgres', q{SELECT external_id, state FROM webhook_ingest.jobs WHERE id = 777}), 'obj-777|done',
	'  and finds the job');
is($node->safe_psql('postgres', q{
	SELECT string_agg(outcome, ',' ORDER BY n) FROM (
	    SELECT 1 AS n, outcome FROM webhook_ingest.enqueue('s1', 'obj-1', NULL, 'pre-1')
	    UNION ALL SELECT 2, outcome FROM webhook_ingest.enqueue('s1', 'obj-1', NULL, 'pre-1')) x}),
	'queued,duplicate', 'enqueue() with 0.9.0\'s ledger');
# An id still in 0.5.0's ledger (events_legacy: a 0.9.0 database updated from 0.5.0 within dedup_window).
$node->safe_psql('postgres', q{
	INSERT INTO webhook_ingest.events_legacy (source, event_id, received_at) VALUES ('s2', 'legacy-1', now())});
is($node->safe_psql('postgres', q{SELECT outcome FROM webhook_ingest.enqueue('s2', 'obj-l', NULL, 'legacy-1')}),
	'duplicate', '  and with an id in 0.5.0\'s ledger beside it (events_legacy): a duplicate');
$node->safe_psql('postgres', q{
	CREATE TABLE truth AS SELECT * FROM webhook_ingest.jobs;
	CREATE FUNCTION wrong_answers() RETURNS bigint LANGUAGE plpgsql AS $$
	DECLARE
	    bad bigint := 0;
	    at timestamptz;
	BEGIN
	    FOR o IN 0..999 BY 7 LOOP
	        IF (SELECT array_agg(j.* ORDER BY j.id)::text FROM webhook_ingest.jobs j
	             WHERE j.source = 's' || (1 + o % 2) AND j.external_id = 'obj-' || o)
	           IS DISTINCT FROM (SELECT array_agg(t.* ORDER BY t.id)::text FROM truth t
	                              WHERE t.source = 's' || (1 + o % 2) AND t.external_id = 'obj-' || o) THEN
	            bad := bad + 1;
	        END IF;
	        at := now() - interval '2 days' + o * interval '2 minutes';
	        IF (SELECT array_agg(id ORDER BY id) FROM webhook_ingest.jobs WHERE finished_at BETWEEN at AND at + interval '5 min')
	           IS DISTINCT FROM (SELECT array_agg(id ORDER BY id) FROM truth WHERE finished_at BETWEEN at AND at + interval '5 min') THEN
	            bad := bad + 1;
	        END IF;
	    END LOOP;
	    RETURN bad;
	END
	$$;
});

my $started = time;
$node->safe_psql('postgres', q{SET lock_timeout = '5s'; ALTER EXTENSION webhook_ingest UPDATE});
note sprintf('ALTER EXTENSION UPDATE took %.2f s with 20 000 packed jobs', time - $started);
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest'}), '0.10.0',
	'updated to 0.10.0');
is($node->safe_psql('postgres', q{
	SELECT to_regclass('webhook_ingest.events_legacy') IS NULL
	       AND (SELECT count(*) FROM webhook_ingest.event_ledger e JOIN webhook_ingest.sources s ON s.id = e.source_id
	             WHERE s.name = 's2' AND e.event_id = 'legacy-1') = 1}),
	't', 'events_legacy is gone, its id in the ledger');
is($node->safe_psql('postgres', q{SELECT outcome FROM webhook_ingest.enqueue('s2', 'obj-l', NULL, 'legacy-1')}),
	'duplicate', '  still a duplicate');
my $unkeyed = $node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.job_history_packed WHERE object_bits IS NULL});
is($node->safe_psql('postgres', q{SELECT wrong_answers()}), '0',
	"right after it, the answers by object and time window are 0.9.0's ($unkeyed rows not keyed yet)");

# The worker keys them (a batch a storage round); answers checked meanwhile and after.
my $wrong_meanwhile = 0;
my $rounds = 0;
for (1 .. 600)
{
	$wrong_meanwhile += $node->safe_psql('postgres', q{SELECT wrong_answers()});
	$rounds++;
	last if $node->safe_psql('postgres',
		q{SELECT count(*) FROM webhook_ingest.job_history_packed WHERE object_bits IS NULL}) eq '0';
	sleep 0.2;
}
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.job_history_packed WHERE object_bits IS NULL}),
	'0', 'the storage round keyed every row packed before the update');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM webhook_ingest.job_history_packed
	 WHERE object_checks IS NULL OR last_finished IS DISTINCT FROM (SELECT max(f) FROM unnest(finished) f)}),
	'0', '  its checks and its last finished_at');
is($wrong_meanwhile, 0, "  and every answer was right while it did ($rounds rounds of lookups)");
is($node->safe_psql('postgres', q{SELECT wrong_answers()}), '0', '  and after');

# history(): the job of the event accepted before the update counts its webhook; an event id
# accepted after names its job.
$node->safe_psql('postgres', q{SELECT webhook_ingest.enqueue('s1', 'obj-1', NULL, 'post-1')});
is($node->safe_psql('postgres', q{
	SELECT string_agg(state || ':' || webhooks || ':' || coalesce(array_to_string(event_ids, ','), '-'), ' ' ORDER BY job_id)
	  FROM webhook_ingest.history('s1', 'obj-1') WHERE state <> 'done'}),
	'pending:2:post-1', 'history(): the pending job\'s two webhooks, the event id accepted since the update');
unlike(slurp_file($node->logfile), qr/ERROR|FATAL|PANIC/, 'no error in the server log');
$node->stop;
done_testing();
