# The worker against the loopback upstream (test/upstream.py on 127.0.0.1:18080,
# started by test/run): a kill -9 of the worker and an immediate shutdown
# mid-run lose no job and commit each handler's effect exactly once; SIGTERM
# with transfers in flight ends the worker at once.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('worker');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.backoff_base = 50ms
webhook_ingest.backoff_max = 200ms
# fewer in flight than a batch, so a kill finds jobs both done and running
webhook_ingest.max_concurrent_requests = 100
restart_after_crash = on
});
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION webhook_ingest;
	CREATE TABLE effects (external_id text, at timestamptz DEFAULT clock_timestamp());
	CREATE FUNCTION record_effect(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE sql AS $$ INSERT INTO effects (external_id) VALUES (external_id) $$;
	SELECT webhook_ingest.add_source('slow', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=300',
	                                 'record_effect(text,jsonb,jsonb)');
	SELECT webhook_ingest.add_source('stuck', 'http://127.0.0.1:18080/slow/{external_id}');
});

sub worker_pid
{
	return $node->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'});
}

sub wait_for_worker
{
	$node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'})
	  or die 'the worker did not start';
}

sub run_batch
{
	my ($prefix, $n) = @_;
	$node->safe_psql('postgres', qq{
		SELECT count(*) FROM generate_series(1, $n) i,
		       webhook_ingest.enqueue('slow', '$prefix-' || i, NULL, '$prefix-ev-' || i) e});
	# mid-run: some jobs done, others in flight
	$node->poll_query_until('postgres', qq{
		SELECT count(*) >= 20 FROM webhook_ingest.jobs WHERE external_id LIKE '$prefix-%' AND state = 'done'})
	  or die 'no progress';
}

sub check_exactly_once
{
	my ($prefix, $n, $what) = @_;
	$node->poll_query_until('postgres', qq{
		SELECT count(*) = $n FROM webhook_ingest.jobs WHERE external_id LIKE '$prefix-%' AND state = 'done'}, 't')
	  or diag($node->safe_psql('postgres', qq{SELECT state, count(*), max(last_error)
		FROM webhook_ingest.jobs WHERE external_id LIKE '$prefix-%' GROUP BY state}));
	is($node->safe_psql('postgres', qq{
		SELECT count(*) FROM webhook_ingest.jobs WHERE external_id LIKE '$prefix-%' AND state = 'done'}),
		$n, "$what: every job done");
	is($node->safe_psql('postgres', qq{
		SELECT count(DISTINCT external_id) || '/' || count(*) FROM effects WHERE external_id LIKE '$prefix-%'}),
		"$n/$n", "$what: each handler effect committed exactly once");
}

wait_for_worker();

# kill -9 of the worker: the postmaster restarts everything; the new worker
# reclaims what the dead one left running.
run_batch('k', 300);
my $pid = worker_pid();
kill 'KILL', $pid;
ok(1, "killed the worker (pid $pid) with SIGKILL mid-run");
$node->poll_query_until('postgres', "SELECT pid <> $pid FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'")
  or die 'no new worker';
check_exactly_once('k', 300, 'after kill -9');
ok($node->log_contains('reclaimed \d+ jobs left running by a previous worker'), 'the new worker reclaimed the running jobs');

# immediate shutdown mid-run, then restart
run_batch('i', 300);
$node->stop('immediate');
$node->start;
wait_for_worker();
check_exactly_once('i', 300, 'after an immediate shutdown');

# SIGTERM with transfers in flight (the upstream holds them 5 s): the worker goes at once
$node->safe_psql('postgres', q{
	SELECT count(*) FROM generate_series(1, 50) i, webhook_ingest.enqueue('stuck', 's-' || i) e});
$node->poll_query_until('postgres', q{SELECT count(*) = 50 FROM webhook_ingest.jobs WHERE source = 'stuck' AND state = 'running'})
  or die 'transfers did not start';
$pid = worker_pid();
my $t0 = time();
kill 'TERM', $pid;
usleep(2000) while kill(0, $pid) && time() - $t0 < 10;
my $ms = (time() - $t0) * 1000;
ok(!kill(0, $pid), sprintf('SIGTERM with 50 transfers in flight: the worker exited in %.1f ms', $ms));
cmp_ok($ms, '<', 1000, 'within a second (target 100 ms)');
diag(sprintf('worker exit after SIGTERM: %.1f ms', $ms));

$node->stop;
done_testing();
