# Apply workers (issue 26): the fetcher (backend type "webhook_ingest worker")
# runs no handler; webhook_ingest.apply_workers apply workers ("webhook_ingest
# applier") do, as the handler's owner.  worker_status shows each process.
# Every kind of death costs nothing but refetches and commits each handler's
# effect exactly once: kill -9 of an apply worker, kill -9 of the fetcher,
# an immediate shutdown (the postmaster), and pg_terminate_backend of an
# apply worker (restarted at once, no back-off, no handler suspected).  A
# reload lowers and raises apply_workers.  A body larger than the hand-off
# queue gets through.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('apply');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.backoff_base = 50ms
webhook_ingest.backoff_max = 200ms
webhook_ingest.max_concurrent_requests = 100
webhook_ingest.apply_queue_size = 64kB
restart_after_crash = on
});
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION webhook_ingest;
	CREATE ROLE dev NOLOGIN;
	CREATE SCHEMA devs AUTHORIZATION dev;
	SET ROLE dev;
	CREATE TABLE devs.effects (external_id text, ran_in int, ran_as name, body_bytes int,
	                           at timestamptz DEFAULT clock_timestamp());
	CREATE FUNCTION devs.record_effect(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE sql AS $$
		INSERT INTO devs.effects (external_id, ran_in, ran_as, body_bytes)
		VALUES (external_id, pg_backend_pid(), current_user, length(details::text))
	$$;
	RESET ROLE;
	SELECT webhook_ingest.add_source('slow', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=300',
	                                 'devs.record_effect(text,jsonb,jsonb)');
	SELECT webhook_ingest.add_source('big', 'http://127.0.0.1:18080/big/{external_id}',
	                                 'devs.record_effect(text,jsonb,jsonb)');
});

sub q1 { return $node->safe_psql('postgres', shift); }

sub pids_of
{
	my $type = shift;
	return q1("SELECT string_agg(pid::text, ' ' ORDER BY pid) FROM pg_stat_activity WHERE backend_type = '$type'");
}

sub wait_for_processes
{
	my $appliers = shift // 2;
	my $query = qq{
		SELECT (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker') = 1
		   AND (SELECT count(*) FROM webhook_ingest.worker_status
		         WHERE role = 'applier' AND state = 'idle') = $appliers};
	# While the postmaster restarts after a kill -9, psql can exit before it
	# reads its query (IPC::Run then dies of the broken pipe): try again.
	for my $try (1 .. 5)
	{
		my $up = eval { $node->poll_query_until('postgres', $query) };
		return if $up;
		die 'the worker and its apply workers did not start' if defined $up;
		usleep(200_000);
	}
	die 'the worker and its apply workers did not start';
}

sub run_batch
{
	my ($prefix, $n) = @_;
	q1(qq{SELECT count(*) FROM generate_series(1, $n) i,
	             webhook_ingest.enqueue('slow', '$prefix-' || i, NULL, '$prefix-ev-' || i) e});
	$node->poll_query_until('postgres', qq{
		SELECT count(*) >= 20 FROM webhook_ingest.jobs WHERE external_id LIKE '$prefix-%' AND state = 'done'})
	  or die 'no progress';
}

sub check_exactly_once
{
	my ($prefix, $n, $what) = @_;
	$node->poll_query_until('postgres', qq{
		SELECT count(*) = $n FROM webhook_ingest.jobs WHERE external_id LIKE '$prefix-%' AND state = 'done'})
	  or diag(q1(qq{SELECT state, count(*), max(last_error)
		FROM webhook_ingest.jobs WHERE external_id LIKE '$prefix-%' GROUP BY state}));
	is(q1(qq{SELECT count(*) FROM webhook_ingest.jobs WHERE external_id LIKE '$prefix-%' AND state = 'done'}),
		$n, "$what: every job done");
	is(q1(qq{SELECT count(DISTINCT external_id) || '/' || count(*) FROM devs.effects WHERE external_id LIKE '$prefix-%'}),
		"$n/$n", "$what: each handler effect committed exactly once");
}

wait_for_processes();

# 1. The process model.
is(q1(q{SELECT string_agg(role || coalesce(':' || applier, '') || ':' || (pid IS NOT NULL), ' ' ORDER BY applier NULLS FIRST)
          FROM webhook_ingest.worker_status WHERE database = 'postgres'}),
	'fetcher:true applier:0:true applier:1:true', 'worker_status: the fetcher and two apply workers (the default)');
run_batch('m', 60);
check_exactly_once('m', 60, 'a first batch');
is(q1(q{SELECT string_agg(DISTINCT coalesce(a.backend_type, 'gone') || '/' || e.ran_as, ',')
          FROM devs.effects e LEFT JOIN pg_stat_activity a ON a.pid = e.ran_in WHERE e.external_id LIKE 'm-%'}),
	'webhook_ingest applier/dev', 'every handler ran in an apply worker, as its owner');
is(q1(q{SELECT sum(applied) = (SELECT applied FROM webhook_ingest.worker_status WHERE role = 'fetcher')
              AND sum(handler_ms) > 0
          FROM webhook_ingest.worker_status WHERE role = 'applier'}),
	't', "worker_status: the apply workers' jobs add up to the fetcher's total, with their handler time");

# 1b. Two apply workers never run two handlers of one object at once: a storm of
# webhooks about 20 objects (4 senders, 1 200 deliveries), a handler that takes
# 5 ms and records when it ran.
q1(q{CREATE TABLE devs.spans (external_id text, t0 timestamptz, t1 timestamptz, pid int);
     ALTER TABLE devs.spans OWNER TO dev;
     CREATE FUNCTION devs.span(external_id text, details jsonb, payload jsonb) RETURNS void
     LANGUAGE plpgsql AS $$
     DECLARE t0 timestamptz := clock_timestamp();
     BEGIN
         PERFORM pg_sleep(0.005);
         INSERT INTO devs.spans VALUES (external_id, t0, clock_timestamp(), pg_backend_pid());
     END $$;
     ALTER FUNCTION devs.span(text, jsonb, jsonb) OWNER TO dev;
     SELECT webhook_ingest.add_source('storm', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=2',
                                      'devs.span(text,jsonb,jsonb)')});
my $storm = PostgreSQL::Test::Utils::tempdir() . '/storm.sql';
open(my $sfh, '>', $storm) or die;
print $sfh "\\set o random(1, 20)\nSELECT webhook_ingest.enqueue('storm', 'o' || :o);\n";
close $sfh;
$node->command_ok([ 'pgbench', '-n', '-c', '4', '-j', '2', '-t', '300', '-f', $storm, '-h', $node->host,
	'-p', $node->port, 'postgres' ], 'the storm of webhooks');
$node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM webhook_ingest.queue WHERE source = 'storm'})
  or diag('the storm did not drain');
is(q1(q{SELECT count(*) FROM devs.spans a JOIN devs.spans b
         ON a.external_id = b.external_id AND a.ctid <> b.ctid AND a.t0 < b.t1 AND b.t0 < a.t1}), '0',
	'no two handlers of one object ran at once (' . q1(q{SELECT count(*) FROM devs.spans}) . ' handler runs)');
is(q1(q{SELECT count(DISTINCT pid) FROM devs.spans}), '2', 'and both apply workers ran them');

# 2. A body four times the hand-off queue (64 kB) gets through.
q1(q{SELECT webhook_ingest.enqueue('big', 'b1')});
$node->poll_query_until('postgres', q{SELECT state = 'done' FROM webhook_ingest.jobs WHERE external_id = 'b1'})
  or diag(q1(q{SELECT state || ' ' || coalesce(last_error, '') FROM webhook_ingest.jobs WHERE external_id = 'b1'}));
cmp_ok(q1(q{SELECT coalesce(max(body_bytes), 0) FROM devs.effects WHERE external_id = 'b1'}), '>', 256 * 1024,
	'a 256 kB body streams through a 64 kB queue to the handler');

# 3. kill -9 of an apply worker: the postmaster restarts everything.
run_batch('ka', 300);
my ($applier) = split / /, pids_of('webhook_ingest applier');
kill 'KILL', $applier;
wait_for_processes();
check_exactly_once('ka', 300, 'kill -9 of an apply worker');

# 4. kill -9 of the fetcher.
run_batch('kf', 300);
kill 'KILL', pids_of('webhook_ingest worker');
wait_for_processes();
check_exactly_once('kf', 300, 'kill -9 of the fetcher');

# 5. An immediate shutdown (what the postmaster's death leaves), then a start.
run_batch('ki', 300);
$node->stop('immediate');
$node->start;
wait_for_processes();
check_exactly_once('ki', 300, 'an immediate shutdown');

# 6. pg_terminate_backend of an apply worker mid-run: restarted at once, without
# the crash loop's back-off, and no handler completed alone for it.
run_batch('kt', 300);
my $offset = -s $node->logfile;
($applier) = split / /, pids_of('webhook_ingest applier');
my $fetcher = pids_of('webhook_ingest worker');
my $t0 = time();
q1("SELECT pg_terminate_backend($applier)");
$node->poll_query_until('postgres', q{SELECT count(*) = 2 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest applier'})
  or die 'no apply worker again';
my $back_ms = (time() - $t0) * 1000;
cmp_ok($back_ms, '<', 900, sprintf('a terminated apply worker is back at once (%.0f ms; the crash back-off starts at 1 s)', $back_ms));
check_exactly_once('kt', 300, 'pg_terminate_backend of an apply worker');
is(pids_of('webhook_ingest worker'), $fetcher, 'the fetcher kept running');
like(slurp_file($node->logfile, $offset), qr/apply worker \d+ of database "postgres" was terminated, restarting it now/,
	'the launcher says it restarts it now');
is(q1(q{SELECT coalesce(alone_handlers, '') FROM webhook_ingest.worker_status WHERE role = 'fetcher'}), '',
	'no handler is completed alone after an administrator ended an apply worker');

# 7. apply_workers by reload: lowered, an apply worker leaves; raised, it is back.
$node->append_conf('postgresql.conf', "webhook_ingest.apply_workers = 1\n");
$node->reload;
$node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest applier'})
  or diag('apply_workers = 1 did not stop the second apply worker');
is(q1(q{SELECT count(*) FROM webhook_ingest.worker_status WHERE role = 'applier'}), '1', 'apply_workers = 1: one apply worker');
run_batch('r1', 40);
check_exactly_once('r1', 40, 'with one apply worker');
$node->append_conf('postgresql.conf', "webhook_ingest.apply_workers = 3\n");
$node->reload;
ok($node->poll_query_until('postgres', q{SELECT count(*) = 3 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest applier'}),
	'apply_workers = 3 by reload: three apply workers');

unlike(slurp_file($node->logfile), qr/could not start apply worker/, 'max_worker_processes (8) had room for them');
$node->stop;
done_testing();
