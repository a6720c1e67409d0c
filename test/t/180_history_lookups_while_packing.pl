# Issue 28: an object's jobs, its last job, a time window and history(),
# through the jobs view, give the answers the history had before it was
# packed, while a packer session packs it chunk by chunk (a small budget a
# call, so that every lookup meets a history partly packed) and readers look
# it up, literal and prepared statements alike.  The truth is the jobs view
# read before any packing (every done job a row of job_history then).  The
# worker is off: nothing else moves.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('lookups');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.database = 'postgres'
webhook_ingest.enabled = off
max_connections = 20
});
$node->start;
# 40 000 done jobs of 2 000 objects (twenty each, one every 2 000 ids) over
# the last two days, with their webhooks' event ids linked, in job_history
# as the worker leaves them; the newest job of 50 objects still queued.
$node->safe_psql('postgres', q{
	CREATE EXTENSION webhook_ingest;
	SELECT webhook_ingest.add_source('s' || s, 'http://127.0.0.1:9/{external_id}') FROM generate_series(1, 2) s;
	SELECT webhook_ingest._ensure_partitions('webhook_ingest.job_history', now() - interval '3 days', now());
	INSERT INTO webhook_ingest.job_history (id, finished_at, created_at, started_at, source_id, events, attempts,
	                                        last_status, external_id, last_error)
	SELECT i, f, f - interval '2 s', f - interval '1 s', 1 + i % 2000 % 2, 1, 1 + (i % 9 = 0)::int, 200,
	       'obj-' || i % 2000, CASE WHEN i % 9 = 0 THEN 'attempt 1/10 after 5 ms: HTTP 503' END
	  FROM generate_series(1, 40000) i, LATERAL (SELECT now() - interval '2 days' + i * interval '4 s' AS f) t;
	INSERT INTO webhook_ingest.event_ledger (source_id, received, event_id, job_id)
	SELECT h.source_id, webhook_ingest._seconds(h.created_at), 'evt-' || h.id, h.id FROM webhook_ingest.job_history h;
	INSERT INTO webhook_ingest.queue (id, source, external_id, state)
	SELECT 40000 + o, 's' || (1 + o % 2), 'obj-' || o, 'pending' FROM generate_series(1, 50) o;
	SELECT setval('webhook_ingest.jobs_id_seq', 50000);
	ANALYZE;
	CREATE TABLE truth AS SELECT * FROM webhook_ingest.jobs;
	CREATE TABLE truth_history AS
	SELECT o, h.* FROM generate_series(0, 199) o, webhook_ingest.history('s' || (1 + o % 2), 'obj-' || o) h;
	CREATE TABLE wrong (reader int, what text, detail text);
});
is($node->safe_psql('postgres', q{SELECT count(*), count(*) FILTER (WHERE state = 'done') FROM truth}), '40050|40000',
	'40 000 done jobs in job_history, 50 queued');
is($node->safe_psql('postgres', q{SELECT count(*) FROM truth_history WHERE cardinality(event_ids) = 1}), '4000',
	'  each done job with its event id in history() (200 objects)');

# The packer: a chunk (up to 4 096 jobs) a call, every 0.2 s, until nothing is left.
my $packer = $node->background_psql('postgres');
$packer->query_until(qr/packing/, q{\echo packing
DO $$
DECLARE
    r record;
    calls integer := 0;
BEGIN
    LOOP
        SELECT * INTO r FROM webhook_ingest._pack_history(now() + interval '1 hour', '1 ms');
        COMMIT;
        calls := calls + 1;
        EXIT WHEN NOT EXISTS (SELECT FROM webhook_ingest.job_history);
        PERFORM pg_sleep(0.2);
    END LOOP;
    RAISE NOTICE 'packed in % calls', calls;
END
$$;
\echo packed
});

# Readers, each until the packer is done and then once more: an object's
# jobs (a literal statement), its last one and a window (PL/pgSQL's
# prepared statements, their generic plans), history(); every answer
# compared with the truth.
my @readers = map {
	my $r = $node->background_psql('postgres');
	$r->query_until(qr/reading/, qq{\\echo reading
SET plan_cache_mode = force_generic_plan;
CREATE TEMP TABLE rounds (n int, unpacked bigint);
DO \$\$
DECLARE
    obj integer;
    src text;
    got text;
    want text;
    at timestamptz;
    last_round boolean := false;
BEGIN
    FOR i IN 1..100000 LOOP
        obj := (random() * 1999)::int;
        src := 's' || (1 + obj % 2);
        EXECUTE format('SELECT array_agg(j.* ORDER BY j.id)::text FROM webhook_ingest.jobs j
                         WHERE j.source = %L AND j.external_id = %L', src, 'obj-' || obj) INTO got;
        SELECT array_agg(t.* ORDER BY t.id)::text INTO want FROM truth t WHERE t.source = src AND t.external_id = 'obj-' || obj;
        IF got IS DISTINCT FROM want THEN
            INSERT INTO wrong VALUES ($_, 'jobs of obj-' || obj, left(got, 200));
        END IF;
        SELECT j.id::text INTO got FROM webhook_ingest.jobs j WHERE j.source = src AND j.external_id = 'obj-' || obj
         ORDER BY j.id DESC LIMIT 1;
        SELECT max(id)::text INTO want FROM truth WHERE source = src AND external_id = 'obj-' || obj;
        IF got IS DISTINCT FROM want THEN
            INSERT INTO wrong VALUES ($_, 'last job of obj-' || obj, got);
        END IF;
        at := now() - interval '2 days' + random() * interval '47 hours';
        SELECT array_agg(id ORDER BY id)::text INTO got FROM webhook_ingest.jobs
         WHERE finished_at BETWEEN at AND at + interval '20 minutes';
        SELECT array_agg(id ORDER BY id)::text INTO want FROM truth WHERE finished_at BETWEEN at AND at + interval '20 minutes';
        IF got IS DISTINCT FROM want THEN
            INSERT INTO wrong VALUES ($_, 'window at ' || at, got);
        END IF;
        obj := obj % 200;
        src := 's' || (1 + obj % 2);
        SELECT array_agg(h.* ORDER BY h.job_id)::text INTO got FROM webhook_ingest.history(src, 'obj-' || obj) h;
        SELECT array_agg((h.job_id, h.state, h.webhooks, h.event_ids, h.duplicates, h.attempts, h.last_status,
                          h.last_error, h.created_at, h.started_at, h.finished_at, h.done_lsn) ORDER BY h.job_id)::text
          INTO want FROM truth_history h WHERE h.o = obj;
        IF got IS DISTINCT FROM want THEN
            INSERT INTO wrong VALUES ($_, 'history of obj-' || obj, left(got, 200));
        END IF;
        INSERT INTO rounds SELECT i, count(*) FROM webhook_ingest.job_history;
        COMMIT;
        EXIT WHEN last_round;
        last_round := NOT EXISTS (SELECT FROM webhook_ingest.job_history);
    END LOOP;
END
\$\$;
\\echo read
});
	$r
} 1 .. 2;

$packer->query_until(qr/packed/, '');
$_->query_until(qr/read/, '') for @readers;
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.job_history}), '0', 'the history is packed');
ok($node->safe_psql('postgres', q{SELECT count(*) > 1 FROM webhook_ingest.job_history_packed}),
	'  into rows of job_history_packed');
for my $r (@readers)
{
	my ($rounds, $partly) = split /\|/, $r->query_safe(q{
		SELECT count(*), count(*) FILTER (WHERE unpacked > 0 AND unpacked < 40000) FROM rounds});
	ok($partly > 0, "a reader looked up $rounds objects, $partly of them with the history partly packed");
}
is($node->safe_psql('postgres', q{SELECT count(*) FROM wrong}), '0',
	'  and every answer was the one before packing (jobs, last job prepared, window, history())')
  or diag($node->safe_psql('postgres', q{SELECT reader || ': ' || what || ': ' || coalesce(detail, 'NULL') FROM wrong LIMIT 10}));
diag($node->safe_psql('postgres', q{SELECT string_agg(reader || ': ' || what || ' ' || coalesce(detail, 'NULL'), E'\n') FROM (SELECT * FROM wrong LIMIT 5) w}))
	if $node->safe_psql('postgres', q{SELECT count(*) FROM wrong}) ne '0';

$_->quit for @readers, $packer;
unlike(slurp_file($node->logfile), qr/ERROR|FATAL|PANIC/, 'no error in the server log');
$node->stop;
done_testing();
