# No application or handler can stall or poison the worker (issue 8):
# - an application transaction that holds a running job's row lock (its
#   enqueue requeued the job) delays only that job: every other source's
#   jobs complete meanwhile, and the held job completes after the commit;
# - a handler that kills the worker (pg_terminate_backend of itself) and one
#   that segfaults (a test-only C function: a postmaster crash-restart) end
#   dead after max_attempts, with last_error saying why, while the jobs
#   that shared their batches are done exactly once, within a minute;
# - an ERROR in the worker's own statements is recovered without a restart,
#   the fetches in flight complete, and the job that kept failing is given
#   up after 3 errors and taken back by the lease check.
# Against the loopback upstream (test/upstream.py on 127.0.0.1:18080).
use strict;
use warnings;
use Cwd qw(abs_path);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $crash_module = abs_path('test/modules/wi_test_crash.so');
die "build $crash_module first (make tap-suite does)" unless -f $crash_module;

my $node = PostgreSQL::Test::Cluster->new('isolation');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.backoff_base = 50ms
webhook_ingest.backoff_max = 200ms
restart_after_crash = on
});
$node->start;
$node->safe_psql('postgres', qq{
	CREATE EXTENSION webhook_ingest;
	CREATE TABLE effects (external_id text, at timestamptz DEFAULT clock_timestamp());
	CREATE FUNCTION wi_test_crash() RETURNS void AS '$crash_module', 'wi_test_crash' LANGUAGE C;
	CREATE FUNCTION record_effect(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE plpgsql AS \$\$
	BEGIN
		INSERT INTO effects (external_id) VALUES (external_id);
		IF external_id = 'poison-term' THEN
			PERFORM pg_terminate_backend(pg_backend_pid());
			PERFORM pg_sleep(5);
		ELSIF external_id = 'poison-segv' THEN
			PERFORM wi_test_crash();
		END IF;
	END \$\$;
	SELECT webhook_ingest.add_source('held', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=800',
	                                 'record_effect(text,jsonb,jsonb)');
	SELECT webhook_ingest.add_source('other', 'http://127.0.0.1:18080/posts/{external_id}',
	                                 'record_effect(text,jsonb,jsonb)');
	SELECT webhook_ingest.add_source('batch', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=300',
	                                 'record_effect(text,jsonb,jsonb)', max_attempts => 2);
});

sub wait_for_worker
{
	$node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'})
	  or die 'the worker did not start';
}

sub scalar_sql { return $node->safe_psql('postgres', $_[0]); }

wait_for_worker();

# --- An application's row lock delays only its own job -------------------
scalar_sql(q{SELECT webhook_ingest.enqueue('held', 'h1')});
$node->poll_query_until('postgres', q{SELECT state = 'running' FROM webhook_ingest.jobs WHERE external_id = 'h1'})
  or die 'h1 did not start';
my $app = $node->background_psql('postgres', on_error_stop => 1);
$app->query_safe('BEGIN');
is($app->query_safe(q{SELECT outcome FROM webhook_ingest.enqueue('held', 'h1')}), 'requeued',
	'the application requeued the running job and holds its row lock');
usleep(1_200_000);		# h1's fetch (800 ms) has finished; its row is still locked

my $t0 = time();
scalar_sql(q{SELECT count(*) FROM generate_series(1, 50) i, webhook_ingest.enqueue('other', 'o-' || i) e});
$node->poll_query_until('postgres', q{
	SELECT count(*) = 50 FROM webhook_ingest.jobs WHERE source = 'other' AND state = 'done'})
  or diag('other jobs stuck');
my $other_ms = (time() - $t0) * 1000;
is(scalar_sql(q{SELECT count(*) FROM webhook_ingest.jobs WHERE source = 'other' AND state = 'done'}), '50',
	'while the application holds the lock, 50 jobs of another source are done');
cmp_ok($other_ms, '<', 3000, sprintf('... within %.0f ms (the application holds its lock 5 s)', $other_ms));
is(scalar_sql(q{SELECT state FROM webhook_ingest.jobs WHERE external_id = 'h1'}), 'running',
	'the held job waits for the lock, still running');
is(scalar_sql(q{SELECT count(*) FROM effects WHERE external_id = 'h1'}), '0', 'its handler has not run yet');
usleep(5_000_000 - ($other_ms + 1200) * 1000) if $other_ms + 1200 < 5000;
$app->query_safe('COMMIT');
$node->poll_query_until('postgres', q{
	SELECT state = 'done' FROM webhook_ingest.jobs WHERE external_id = 'h1' ORDER BY id DESC LIMIT 1})
  or diag('h1 not done');
is(scalar_sql(q{SELECT state || ' ' || events FROM webhook_ingest.jobs WHERE external_id = 'h1'}), 'done 2',
	'after the commit the held job completes, then runs once more for the requeue');
is(scalar_sql(q{SELECT count(*) FROM effects WHERE external_id = 'h1'}), '2',
	'its handler ran for the kept result and for the refetch: twice, not more');
$app->quit;

# Under steady traffic of other jobs (completions every ~20 ms, less than
# lock_timeout apart), a job whose row was held is still completed soon after
# the lock goes: its retry is not postponed by every other completion.
scalar_sql(q{SELECT webhook_ingest.enqueue('held', 'h2')});
$node->poll_query_until('postgres', q{SELECT state = 'running' FROM webhook_ingest.jobs WHERE external_id = 'h2'})
  or die 'h2 did not start';
$app = $node->background_psql('postgres', on_error_stop => 1);
$app->query_safe('BEGIN');
$app->query_safe(q{SELECT outcome FROM webhook_ingest.enqueue('held', 'h2')});
usleep(1_200_000);		# h2's fetch has finished; its row is locked
my $traffic = $node->background_psql('postgres', on_error_stop => 1);
$traffic->query_until(qr/started/, q{
	\echo started
	DO $$ BEGIN
		FOR i IN 1 .. 250 LOOP		-- about 5 s
			PERFORM webhook_ingest.enqueue('other', 'steady-' || i);
			COMMIT;
			PERFORM pg_sleep(0.02);
		END LOOP;
	END $$;
});
usleep(500_000);
$app->query_safe('COMMIT');
my $t_commit = time();
$node->poll_query_until('postgres', q{
	SELECT count(*) > 0 FROM effects WHERE external_id = 'h2'})
  or diag('h2 never handled');
my $h2_ms = (time() - $t_commit) * 1000;
my $traffic_left = scalar_sql(q{SELECT 250 - count(*) FROM webhook_ingest.jobs WHERE external_id LIKE 'steady-%'});
cmp_ok($h2_ms, '<', 1500, sprintf('under steady traffic, the held job is handled %.0f ms after the lock goes', $h2_ms));
cmp_ok($traffic_left, '>', 0, 'while the traffic still runs');
$app->quit;
$traffic->quit;

# --- Poison jobs ----------------------------------------------------------
sub poison_round
{
	my ($poison, $what) = @_;
	my $before = $node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity});
	my $t0 = time();
	scalar_sql(qq{
		SELECT count(*) FROM (SELECT webhook_ingest.enqueue('batch', '$poison')
		                      UNION ALL
		                      SELECT webhook_ingest.enqueue('batch', '$poison-mate-' || i)
		                        FROM generate_series(1, 20) i) e});
	$node->poll_query_until('postgres', qq{
		SELECT count(*) = 20 FROM webhook_ingest.jobs
		 WHERE external_id LIKE '$poison-mate-%' AND state = 'done'}, 't')
	  or diag(scalar_sql(qq{SELECT state, count(*), max(last_error) FROM webhook_ingest.jobs
	                        WHERE external_id LIKE '$poison%' GROUP BY state}));
	my $mates_s = time() - $t0;
	$node->poll_query_until('postgres', qq{
		SELECT state = 'dead' FROM webhook_ingest.jobs WHERE external_id = '$poison'}, 't')
	  or diag(scalar_sql(qq{SELECT state, attempts, last_error FROM webhook_ingest.jobs WHERE external_id = '$poison'}));
	is(scalar_sql(qq{SELECT state || ' ' || attempts FROM webhook_ingest.jobs WHERE external_id = '$poison'}),
		'dead 2', "$what: the poison job is dead after max_attempts (2)");
	like(scalar_sql(qq{SELECT last_error FROM webhook_ingest.jobs WHERE external_id = '$poison'}),
		qr/attempt 2\/2: the apply worker died while handling it/, "$what: last_error says the apply worker died while handling it");
	is(scalar_sql(qq{SELECT count(DISTINCT external_id) || '/' || count(*) FROM effects
	                 WHERE external_id LIKE '$poison-mate-%'}),
		'20/20', "$what: the 20 jobs that shared its batch are done, each handler effect committed once");
	cmp_ok($mates_s, '<', 60, sprintf('%s: they were held back %.1f s (under a minute)', $what, $mates_s));
	wait_for_worker();
}

poison_round('poison-term', 'a handler that terminates its own backend');
ok($node->log_contains('each is completed alone until the culprit is known')
	  || $node->log_contains('died while handling job'), 'the worker recognised the culprit after a restart');
poison_round('poison-segv', 'a handler that segfaults (postmaster crash-restart)');
ok($node->log_contains('was terminated by signal 11'), 'the segfault took the postmaster through a crash-restart');

# The worker goes on normally afterwards.
scalar_sql(q{SELECT webhook_ingest.enqueue('other', 'after-poison')});
$node->poll_query_until('postgres', q{SELECT state = 'done' FROM webhook_ingest.jobs WHERE external_id = 'after-poison'})
  or diag('after-poison not done');
is(scalar_sql(q{SELECT state FROM webhook_ingest.jobs WHERE external_id = 'after-poison'}), 'done',
	'a new job after the poison jobs is done');

# --- An ERROR in the worker's own statements does not restart it ---------
# A trigger an admin put on jobs makes the worker's record of one failed
# attempt raise an error outside any handler's subtransaction.
scalar_sql(q{
	CREATE FUNCTION refuse_failure() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN RAISE EXCEPTION 'refusing to record %', NEW.external_id; END $$;
	CREATE TRIGGER refuse_failure BEFORE UPDATE ON webhook_ingest.queue FOR EACH ROW
	    WHEN (NEW.external_id = 'boom' AND NEW.last_error LIKE '%HTTP 500%') EXECUTE FUNCTION refuse_failure();
	SELECT webhook_ingest.add_source('erroring', 'http://127.0.0.1:18080/error/{external_id}', timeout_ms => 1000,
	                                 max_attempts => 2);
	SELECT webhook_ingest.add_source('slowpoke', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=2500',
	                                 'record_effect(text,jsonb,jsonb)');
});
my $pid_before = scalar_sql(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'});
scalar_sql(q{SELECT count(*) FROM generate_series(1, 20) i, webhook_ingest.enqueue('slowpoke', 'slow-' || i) e});
$node->poll_query_until('postgres', q{SELECT count(*) = 20 FROM webhook_ingest.jobs WHERE source = 'slowpoke' AND state = 'running'})
  or die 'slow jobs did not start';
scalar_sql(q{SELECT webhook_ingest.enqueue('erroring', 'boom')});
$node->poll_query_until('postgres', q{SELECT count(*) = 20 FROM webhook_ingest.jobs WHERE source = 'slowpoke' AND state = 'done'})
  or diag('slow jobs not done');
ok($node->log_contains('refusing to record boom'), 'the error was raised in the worker');
is(scalar_sql(q{SELECT count(*) FROM webhook_ingest.jobs WHERE source = 'slowpoke' AND state = 'done'}), '20',
	'the 20 fetches in flight when the error came were completed');
is(scalar_sql(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'}), $pid_before,
	'the worker recovered from the error without a restart');
$node->wait_for_log(qr/giving up completing job \d+ after 3 errors/);
ok(1, 'after 3 errors the worker gave the job up');
scalar_sql(q{DROP TRIGGER refuse_failure ON webhook_ingest.queue});
$node->poll_query_until('postgres', q{SELECT state = 'dead' FROM webhook_ingest.jobs WHERE external_id = 'boom'})
  or diag(scalar_sql(q{SELECT state, attempts, last_error FROM webhook_ingest.jobs WHERE external_id = 'boom'}));
like(scalar_sql(q{SELECT state || ': ' || last_error FROM webhook_ingest.jobs WHERE external_id = 'boom'}),
	qr/^dead: .*HTTP 500/, 'the lease check took the given-up job back; it ran again and ended dead');

$node->stop;
done_testing();
