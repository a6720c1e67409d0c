# One tenant's handler slows only that tenant (issue 26), with the default two
# apply workers:
#  1. a handler that ignores its cancel: at its hard deadline its apply worker
#     is ended and restarted at once; the job is dead (not retried) with a
#     last_error that says so, in recent_failures; the fetcher and the other
#     apply worker keep running; another source's webhooks, one every 150 ms
#     meanwhile, are done within 1 s each;
#  2. a handler that takes 1.9 s (under handler_timeout): another source's
#     fetches with timeout_ms 1000 lose no attempt to a timeout;
#  3. a handler that enqueues two more jobs of its own source and sleeps: 200
#     jobs of another source are done as fast as their upstream answers.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('apply_isolation');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.backoff_base = 50ms
webhook_ingest.backoff_max = 200ms
});
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION webhook_ingest;
	CREATE ROLE dev NOLOGIN;
	CREATE ROLE mon LOGIN IN ROLE webhook_ingest_monitor;
	CREATE SCHEMA devs AUTHORIZATION dev;
	GRANT USAGE ON SCHEMA webhook_ingest TO dev;
	GRANT webhook_ingest_enqueue TO dev;
	SET ROLE dev;
	CREATE FUNCTION devs.stubborn(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE plpgsql AS $$
	BEGIN
		LOOP
			BEGIN
				PERFORM pg_sleep(30);
			EXCEPTION WHEN query_canceled THEN
				NULL;			-- handler_timeout: ignored
			END;
		END LOOP;
	END $$;
	CREATE FUNCTION devs.slowish(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE sql AS $$ SELECT pg_sleep(1.9) $$;
	CREATE TABLE devs.spawned (n int);
	CREATE FUNCTION devs.spawner(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE plpgsql AS $$
	BEGIN
		IF (SELECT count(*) FROM devs.spawned) < 12 THEN
			INSERT INTO devs.spawned SELECT 1 FROM generate_series(1, 2);
			PERFORM webhook_ingest.enqueue('spawn', external_id || '.' || g) FROM generate_series(1, 2) g;
		END IF;
		PERFORM pg_sleep(1.9);
	END $$;
	RESET ROLE;
	SELECT webhook_ingest.add_source('hostile', 'http://127.0.0.1:18080/posts/{external_id}',
	                                 'devs.stubborn(text,jsonb,jsonb)');
	SELECT webhook_ingest.add_source('slow', 'http://127.0.0.1:18080/posts/{external_id}',
	                                 'devs.slowish(text,jsonb,jsonb)');
	SELECT webhook_ingest.add_source('spawn', 'http://127.0.0.1:18080/posts/{external_id}',
	                                 'devs.spawner(text,jsonb,jsonb)');
	SELECT webhook_ingest.add_source('victim', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=200',
	                                 timeout_ms => 1000, max_attempts => 1);
	SELECT webhook_ingest.add_source('other', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=20');
});
$node->poll_query_until('postgres', q{
	SELECT count(*) = 2 FROM webhook_ingest.worker_status WHERE role = 'applier' AND state = 'idle'})
  or die 'the apply workers did not start';

sub q1 { return $node->safe_psql('postgres', shift); }

sub pids
{
	return q1(q{SELECT string_agg(backend_type || '=' || pid, ' ' ORDER BY backend_type, pid)
	              FROM pg_stat_activity WHERE backend_type LIKE 'webhook_ingest %'});
}

# 1. The hostile handler (handler_timeout 2 s: its hard deadline is 3 s in).
my $fetcher = q1(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'});
my $offset = -s $node->logfile;
q1(q{SELECT webhook_ingest.enqueue('hostile', 'h1')});
$node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest applier' AND wait_event = 'PgSleep'})
  or die 'the hostile handler did not start';
my $hostile_applier = q1(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'webhook_ingest applier' AND wait_event = 'PgSleep'});
# one webhook of another source every 150 ms for 4.5 s, through the deadline and the restart
for my $i (1 .. 30)
{
	q1("SELECT webhook_ingest.enqueue('other', 'o$i')");
	usleep(150_000);
}
$node->poll_query_until('postgres', q{SELECT state = 'dead' FROM webhook_ingest.jobs WHERE external_id = 'h1'})
  or diag(q1(q{SELECT state || ': ' || coalesce(last_error, '') FROM webhook_ingest.jobs WHERE external_id = 'h1'}));
$node->poll_query_until('postgres', q{SELECT count(*) = 30 FROM webhook_ingest.jobs WHERE source = 'other' AND state = 'done'})
  or diag('not every webhook of the other source is done');
my ($max_ms, $p99_ms) = split /\|/, q1(q{
	SELECT round(max(ms)), round(percentile_disc(0.99) WITHIN GROUP (ORDER BY ms))
	  FROM (SELECT extract(epoch FROM finished_at - created_at) * 1000 AS ms
	          FROM webhook_ingest.jobs WHERE source = 'other') x});
cmp_ok($p99_ms, '<=', 1000, "another source's webhooks: enqueue to done p99 $p99_ms ms (max $max_ms) while the hostile handler ran");
like(q1(q{SELECT last_error FROM webhook_ingest.jobs WHERE external_id = 'h1'}), qr/hard deadline.*not retried/,
	'the hostile job is dead, and its last_error names the hard deadline');
is(q1(q{SELECT attempts FROM webhook_ingest.jobs WHERE external_id = 'h1'}), '1', 'it was tried once (max_attempts does not apply)');
like($node->safe_psql('postgres', q{SELECT outcome || ': ' || error FROM webhook_ingest.recent_failures WHERE source = 'hostile'},
		extra_params => [ '-U', 'mon' ]),
	qr/^dead: .*hard deadline/, 'recent_failures shows it');
is(q1(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'}), $fetcher, 'the fetcher kept running');
$node->poll_query_until('postgres', q{SELECT count(*) = 2 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest applier'});
is(q1("SELECT count(*) FROM pg_stat_activity WHERE pid = $hostile_applier"), '0', 'the hostile apply worker was ended');
my $log = slurp_file($node->logfile, $offset);
like($log, qr/ended at a handler's hard deadline, restarting it now/, 'and restarted at once');
unlike($log, qr/restarting it in \d+ ms/, 'no back-off, for no process');

# 2. A handler of 1.9 s; another source's fetches time out after 1 s.
q1(q{SELECT count(*) FROM (SELECT webhook_ingest.enqueue('slow', 's' || g) FROM generate_series(1, 4) g
                           UNION ALL
                           SELECT webhook_ingest.enqueue('victim', 'v' || g) FROM generate_series(1, 30) g) e});
$node->poll_query_until('postgres', q{
	SELECT count(*) = 34 FROM webhook_ingest.jobs WHERE source IN ('slow', 'victim') AND state IN ('done', 'dead')})
  or diag('jobs did not finish');
is(q1(q{SELECT count(*) FILTER (WHERE state = 'done' AND attempts = 1) || '/' || count(*)
          FROM webhook_ingest.jobs WHERE source = 'victim'}),
	'30/30', 'no fetch of another source lost an attempt to a timeout while 1.9 s handlers ran');

# 3. A handler that enqueues two more of its own and sleeps 1.9 s: another source's 200 jobs.
q1(q{SELECT webhook_ingest.enqueue('spawn', 'x')});
$node->poll_query_until('postgres', q{SELECT count(*) >= 3 FROM webhook_ingest.jobs WHERE source = 'spawn'});
my $t0 = time();
q1(q{SELECT count(*) FROM generate_series(1, 200) g, webhook_ingest.enqueue('other', 'p' || g) e});
$node->poll_query_until('postgres', q{SELECT count(*) = 200 FROM webhook_ingest.jobs
                                       WHERE source = 'other' AND external_id LIKE 'p%' AND state = 'done'})
  or diag('the other source did not drain');
my $drain_ms = (time() - $t0) * 1000;
my $p50 = q1(q{SELECT round(percentile_disc(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - created_at) * 1000))
                 FROM webhook_ingest.jobs WHERE source = 'other' AND external_id LIKE 'p%'});
cmp_ok($drain_ms, '<', 5000, sprintf('200 jobs of another source drained in %.0f ms (done p50 %s ms) beside the spawning handler', $drain_ms, $p50));
cmp_ok(q1(q{SELECT count(*) FROM webhook_ingest.jobs WHERE source = 'spawn' AND state IN ('pending', 'running')}), '>', 0,
	'while the spawning source still had work');

$node->stop;
done_testing();
