# An administrator's pg_terminate_backend is not a crash (issue 27 item 7).
# Under a steady flow of webhooks (pgbench at 250/s), every webhook_ingest
# process of the database - the worker and its apply workers - is terminated
# twice a second for 8 s, as tools that end a database's sessions do: the
# launcher restarts each at once (0.9.0 backed off 1, 2, 4 s as for a crash
# loop: completions fell to a tenth), so completions stay at half the rate
# before or more, and return to 90 % of it after; no handler is left
# completed alone (0.9.0's crash guard made the batch's handlers suspects for
# good); every webhook is done, each handler's effect committed exactly once.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('terminate_loop');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.backoff_base = 50ms
webhook_ingest.backoff_max = 200ms
# each restarted worker opens its connections anew: 64 at once, not 1024, so that
# the test's one-threaded upstream is not what stalls (a listen backlog overflowing
# costs the SYN's retransmission, 1 s and then 3 s)
webhook_ingest.max_concurrent_requests = 64
});
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION webhook_ingest;
	CREATE SEQUENCE ids;
	CREATE TABLE effects (external_id text);
	CREATE FUNCTION record_effect(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE sql AS $$ INSERT INTO effects VALUES (external_id) $$;
	SELECT webhook_ingest.add_source('flow', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=5',
	                                 'record_effect(text,jsonb,jsonb)');
});
$node->poll_query_until('postgres', q{
	SELECT count(*) = 2 FROM webhook_ingest.worker_status WHERE role = 'applier' AND state = 'idle'})
  or die 'the apply workers did not start';

sub q1 { return $node->safe_psql('postgres', shift); }

my $script = PostgreSQL::Test::Utils::tempdir() . '/enqueue.sql';
open(my $fh, '>', $script) or die;
print $fh "SELECT webhook_ingest.enqueue('flow', nextval('ids')::text);\n";
close $fh;

my ($base_s, $chaos_s, $after_s) = (5, 8, 5);
my $t_start = time();
my ($out, $err) = ('', '');
my $pgbench = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '4', '-j', '2', '-R', '250', '-T', $base_s + $chaos_s + $after_s + 1,
	  '-f', $script, '-h', $node->host, '-p', $node->port, 'postgres' ],
	'>', \$out, '2>', \$err);

# Completions per second in [from, to) seconds after the start.
sub rate
{
	my ($from, $to) = @_;
	return q1(sprintf(q{SELECT round(count(*) / %f, 1) FROM webhook_ingest.jobs
	                     WHERE state = 'done' AND finished_at >= to_timestamp(%f) AND finished_at < to_timestamp(%f)},
		$to - $from, $t_start + $from, $t_start + $to));
}

usleep(($base_s + 0.5) * 1_000_000);
my $offset = -s $node->logfile;
my $kills = 0;
while (time() < $t_start + $base_s + 0.5 + $chaos_s)
{
	$kills += q1(q{SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	                WHERE datname = 'postgres' AND backend_type IN ('webhook_ingest worker', 'webhook_ingest applier')) t});
	usleep(500_000);
}
IPC::Run::finish($pgbench);
my $end = time() - $t_start;
$node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM webhook_ingest.jobs WHERE state IN ('pending', 'running')})
  or diag(q1(q{SELECT state || ' ' || count(*) FROM webhook_ingest.jobs GROUP BY state}));

my $before = rate(1, $base_s);
my $during = rate($base_s + 1, $base_s + $chaos_s);
my $after = rate($base_s + $chaos_s + 1.5, $end - 0.5);
diag("completions per second: before $before, during $kills terminations $during, after $after");
cmp_ok($kills, '>=', 20, "the processes were terminated again and again ($kills terminations)");
cmp_ok($during, '>=', 0.5 * $before, 'during the terminations completions stay at half the rate before or more');
cmp_ok($after, '>=', 0.9 * $before, 'after them they return to 90 % of it');
my $log = slurp_file($node->logfile, $offset);
unlike($log, qr/restarting it in \d+ ms/, 'no process was restarted with a back-off');
like($log, qr/was terminated, restarting it now/, 'each was restarted at once');
is(q1(q{SELECT coalesce(alone_handlers, '') FROM webhook_ingest.worker_status WHERE role = 'fetcher'}), '',
	'no handler is completed alone after it');
my $n = q1(q{SELECT last_value FROM ids});
is(q1(q{SELECT count(*) FROM webhook_ingest.jobs WHERE state = 'done'}), $n, "every one of the $n webhooks is done");
is(q1(q{SELECT count(DISTINCT external_id) || '/' || count(*) FROM effects}), "$n/$n",
	'each handler effect committed exactly once');


# One termination in the middle of a batch of several jobs (0.9.0 made the batch's
# handler a suspect for good: one job per transaction from then on).
q1(q{CREATE FUNCTION sleepy(external_id text, details jsonb, payload jsonb) RETURNS void
     LANGUAGE sql AS $$ SELECT pg_sleep(0.2); INSERT INTO effects VALUES (external_id) $$;
     SELECT webhook_ingest.add_source('batch', 'http://127.0.0.1:18080/posts/{external_id}', 'sleepy(text,jsonb,jsonb)')});
q1(q{SELECT count(*) FROM generate_series(1, 6) g, webhook_ingest.enqueue('batch', 'first-' || g) e});
$node->poll_query_until('postgres', q{SELECT count(*) = 6 FROM webhook_ingest.jobs WHERE source = 'batch' AND state = 'done'});
q1(q{SELECT count(*) FROM generate_series(1, 6) g, webhook_ingest.enqueue('batch', 'second-' || g) e});
# (both apply workers may have a part of it: one of them is terminated)
$node->poll_query_until('postgres', q{
	SELECT count(*) >= 1 FROM pg_stat_activity WHERE backend_type IN ('webhook_ingest worker', 'webhook_ingest applier')
	   AND wait_event = 'PgSleep'})
  or die 'the batch did not start';
q1(q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity
      WHERE backend_type IN ('webhook_ingest worker', 'webhook_ingest applier') AND wait_event = 'PgSleep' LIMIT 1});
$node->poll_query_until('postgres', q{SELECT count(*) = 6 FROM webhook_ingest.jobs WHERE external_id LIKE 'second-%' AND state = 'done'})
  or diag('the interrupted batch was not completed');
is(q1(q{SELECT count(DISTINCT external_id) || '/' || count(*) FROM effects WHERE external_id LIKE 'second-%'}), '6/6',
	'a batch interrupted by an administrator: each job done once');
my $alone = q1(q{SELECT coalesce(alone_handlers, '') FROM webhook_ingest.worker_status WHERE role = 'fetcher'});
is($alone, '', 'and its handler is not completed alone for it');

$node->stop;
done_testing();
