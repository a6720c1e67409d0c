# Issue 28 (audit of the packing fix, test/audit/FINDINGS-0.10.0-packing.md, finding 2): a reader's transaction that
# read the jobs view before the move of 0.5.0's rows had to make a past
# partition of job_history, and reads it again (PL/pgSQL's cached plans)
# after more steps of the move, finds every job each time: a step makes
# partitions only with job_history locked (ACCESS EXCLUSIVE, NOWAIT), so
# while the reader's transaction holds its lock the move waits, and it goes
# on once the reader is done.  Before, the steps made the partition and
# filled it, and the reader's second look found none of the jobs (100, 0,
# 100).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('legacy_reader');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.database = 'postgres'
webhook_ingest.enabled = off
});
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION webhook_ingest VERSION '0.5.0';
	SELECT webhook_ingest.add_source('src', 'http://127.0.0.1:9/posts/{external_id}');
	INSERT INTO webhook_ingest.jobs (id, source, external_id, state, payload, events, attempts, last_status,
	       created_at, updated_at, next_attempt_at, started_at, finished_at, done_lsn)
	SELECT i, 'src', 'obj-' || i % 10, 'done', '{}', 1, 1, 200, f - interval '1 s', f, f, f - interval '0.5 s', f,
	       ('0/' || to_hex(16777216 + i * 8192))::pg_lsn
	  FROM generate_series(1, 100) i, LATERAL (SELECT now() - interval '5 days' + i * interval '1 min' AS f) t;
	SELECT setval(pg_get_serial_sequence('webhook_ingest.jobs', 'id'), 100);
	ALTER EXTENSION webhook_ingest UPDATE;
});
my $truth = $node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.jobs});
$node->safe_psql('postgres', q{CREATE TABLE looks (look int, n bigint, h bigint)});
my $packer = $node->background_psql('postgres');
$packer->query_safe('SELECT pg_advisory_lock(184)');
my $reader = $node->background_psql('postgres');
$reader->query_until(qr/reading/, q{\echo reading
DO $$
BEGIN
    FOR look IN 1..3 LOOP
        IF look = 2 THEN
            PERFORM pg_advisory_lock(184);
        END IF;
        INSERT INTO looks SELECT look, (SELECT count(*) FROM webhook_ingest.jobs),
               (SELECT count(*) FROM webhook_ingest.history('src', 'obj-3'));
    END LOOP;
END
$$;
\echo read
});
$node->poll_query_until('postgres', q{SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted})
  or die 'the reader never waited';
my $r1 = $packer->query_safe('SELECT webhook_ingest._move_legacy_jobs(5000)');
my $r2 = $packer->query_safe('SELECT webhook_ingest._move_legacy_jobs(5000)');
is($node->safe_psql('postgres', q{SELECT moved_upto FROM webhook_ingest.legacy_migration}), '0',
	"the move's steps while the reader's transaction holds its lock moved nothing (returned $r1, $r2)");
$packer->query_safe('SELECT pg_advisory_unlock(184)');
$reader->query_until(qr/read/, '');
my @l = split /\n/, $node->safe_psql('postgres', q{SELECT n || ' ' || h FROM looks ORDER BY look});
is($l[0], "$truth 10", "the reader's first look: every job, obj-3's ten in history() ($l[0])");
is($l[1], "$truth 10", '  its second look, in the same transaction, after two steps of the move');
is($l[2], "$truth 10", '  and its third');
is($node->safe_psql('postgres', q{SELECT webhook_ingest._move_legacy_jobs(5000) > 1;
	SELECT moved_upto = last_id FROM webhook_ingest.legacy_migration}), "t\nt", 'then the next step moves every job');
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.jobs}), $truth, '  and they are all there');
$_->quit for $reader, $packer;
$node->stop;
done_testing();
