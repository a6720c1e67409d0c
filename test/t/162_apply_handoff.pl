# The hand-off to the apply workers keeps every guarantee (issue 26):
#  1. a burst of jobs with a 20 ms handler, more than max_concurrent_requests:
#     no result is given up (0.9.0 gave up those past its batch budget and
#     max_concurrent_requests, "whose rows other sessions hold locked", and
#     they waited for their leases); all done in a few seconds;
#  2. with one apply worker busy, a fetched result waits for it (queue_stats
#     waiting_for_applier): a webhook for that object then gets exactly one
#     more fetch, after it; cancel() of a waiting job ends it cancelled, its
#     handler never run; retry() of one is refused (it is running); a pause of
#     its source lets the fetched result complete, and starts no new fetch;
#  3. a row an application holds locked: its result waits, and completes once
#     the lock is gone, without waiting for the lease.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('apply_handoff');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.backoff_base = 50ms
webhook_ingest.backoff_max = 200ms
webhook_ingest.max_concurrent_requests = 100
webhook_ingest.handler_timeout = 5s
});
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION webhook_ingest;
	CREATE TABLE calls (external_id text, fetched_at float8, at timestamptz DEFAULT clock_timestamp());
	CREATE FUNCTION twenty_ms(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE sql AS $$ SELECT pg_sleep(0.02); INSERT INTO calls (external_id) VALUES (external_id) $$;
	CREATE FUNCTION blocker(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE sql AS $$ SELECT pg_sleep(2.5) $$;
	CREATE FUNCTION stamp(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE sql AS $$ INSERT INTO calls (external_id, fetched_at) VALUES (external_id, (details->>'at')::float8) $$;
	SELECT webhook_ingest.add_source('burst', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=1',
	                                 'twenty_ms(text,jsonb,jsonb)');
	SELECT webhook_ingest.add_source('block', 'http://127.0.0.1:18080/posts/{external_id}', 'blocker(text,jsonb,jsonb)');
	SELECT webhook_ingest.add_source('obj', 'http://127.0.0.1:18080/stamp/{external_id}', 'stamp(text,jsonb,jsonb)');
	SELECT webhook_ingest.add_source('held', 'http://127.0.0.1:18080/stamp/{external_id}?delay_ms=400',
	                                 'stamp(text,jsonb,jsonb)');
});
$node->poll_query_until('postgres', q{
	SELECT count(*) = 2 FROM webhook_ingest.worker_status WHERE role = 'applier' AND state = 'idle'})
  or die 'the apply workers did not start';

sub q1 { return $node->safe_psql('postgres', shift); }

# 1. The burst.
my $offset = -s $node->logfile;
my $t0 = time();
q1(q{SELECT count(*) FROM generate_series(1, 400) g, webhook_ingest.enqueue('burst', 'b' || g) e});
$node->poll_query_until('postgres', q{SELECT count(*) = 400 FROM webhook_ingest.jobs WHERE source = 'burst' AND state = 'done'})
  or diag(q1(q{SELECT state || ' ' || count(*) FROM webhook_ingest.jobs WHERE source = 'burst' GROUP BY state}));
my $burst_s = time() - $t0;
cmp_ok($burst_s, '<', 20, sprintf('400 jobs of a 20 ms handler, 100 in flight, done in %.1f s (a lease is 60 s)', $burst_s));
unlike(slurp_file($node->logfile, $offset), qr/gave up the results/, 'no fetched result was given up');
is(q1(q{SELECT count(DISTINCT external_id) || '/' || count(*) FROM calls WHERE external_id LIKE 'b%'}), '400/400',
	'each handler ran once');

# 2. One apply worker, held by a 2.5 s handler: results wait for it.
$node->append_conf('postgresql.conf', "webhook_ingest.apply_workers = 1\n");
$node->reload;
$node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest applier'})
  or die 'apply_workers = 1 did not take';

sub hold_the_applier
{
	my $key = shift;
	q1("SELECT webhook_ingest.enqueue('block', '$key')");
	$node->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest applier' AND wait_event = 'PgSleep'})
	  or die 'the blocking handler did not start';
}

sub wait_until_waiting
{
	my $n = shift;
	$node->poll_query_until('postgres', qq{
		SELECT waiting_for_applier = $n FROM webhook_ingest.queue_stats WHERE source = 'obj'})
	  or die "queue_stats did not show $n results of obj waiting for an apply worker";
}

hold_the_applier('k1');
q1(q{SELECT webhook_ingest.enqueue('obj', 'x1')});
wait_until_waiting(1);
pass('queue_stats shows a fetched result waiting for an apply worker');
my $second = q1(q{SELECT extract(epoch FROM clock_timestamp())});
is(q1(q{SELECT outcome FROM webhook_ingest.enqueue('obj', 'x1')}), 'requeued',
	'a webhook for an object whose result waits: requeued');
$node->poll_query_until('postgres', q{SELECT count(*) = 2 FROM calls WHERE external_id = 'x1'})
  or diag(q1(q{SELECT count(*) FROM calls WHERE external_id = 'x1'}));
$node->poll_query_until('postgres', q{SELECT state = 'done' FROM webhook_ingest.jobs WHERE external_id = 'x1'});
is(q1(q{SELECT count(*) FROM calls WHERE external_id = 'x1'}), '2', 'the object was fetched exactly once more');
cmp_ok(q1(q{SELECT max(fetched_at) FROM calls WHERE external_id = 'x1'}), '>', $second,
	'and that fetch came after the webhook');

hold_the_applier('k2');
my $cancel_id = q1(q{SELECT job_id FROM webhook_ingest.enqueue('obj', 'c1')});
my $retry_id = q1(q{SELECT job_id FROM webhook_ingest.enqueue('obj', 'r1')});
wait_until_waiting(2);
is(q1("SELECT webhook_ingest.retry($retry_id)"), 'f', 'retry() of a job whose result waits: refused (it is running)');
is(q1("SELECT webhook_ingest.cancel($cancel_id)"), 't', 'cancel() of a job whose result waits');
$node->poll_query_until('postgres', qq{SELECT state = 'done' FROM webhook_ingest.jobs WHERE id = $retry_id});
is(q1("SELECT state FROM webhook_ingest.jobs WHERE id = $cancel_id"), 'cancelled', 'the cancelled job stays cancelled');
is(q1(q{SELECT count(*) FROM calls WHERE external_id = 'c1'}), '0', 'its handler never ran');
is(q1(q{SELECT count(*) FROM calls WHERE external_id = 'r1'}), '1', 'the other ran once');

hold_the_applier('k3');
q1(q{SELECT webhook_ingest.enqueue('obj', 'p1')});
wait_until_waiting(1);
q1(q{SELECT webhook_ingest.pause_source('obj')});
q1(q{SELECT webhook_ingest.enqueue('obj', 'p2')});
$node->poll_query_until('postgres', q{SELECT state = 'done' FROM webhook_ingest.jobs WHERE external_id = 'p1'})
  or diag('the fetched result of a paused source did not complete');
usleep(300_000);
is(q1(q{SELECT state FROM webhook_ingest.jobs WHERE external_id = 'p1'}) . '/'
   . q1(q{SELECT state FROM webhook_ingest.jobs WHERE external_id = 'p2'}),
	'done/pending', 'pause: the result fetched before it completes, no new fetch starts');
q1(q{SELECT webhook_ingest.resume_source('obj')});

# 3. An application holds the row: the result waits for the lock, not for the lease.
$node->append_conf('postgresql.conf', "webhook_ingest.apply_workers = 2\n");
$node->reload;
my $holder = $node->background_psql('postgres');
my $held_id = q1(q{SELECT job_id FROM webhook_ingest.enqueue('held', 'l1')});
$node->poll_query_until('postgres', qq{SELECT state = 'running' FROM webhook_ingest.queue WHERE id = $held_id});
$holder->query_safe("BEGIN; SELECT id FROM webhook_ingest.queue WHERE id = $held_id FOR UPDATE;");
usleep(1_000_000);			# the fetch (400 ms) is over, its result waits for the row
is(q1("SELECT state FROM webhook_ingest.jobs WHERE id = $held_id"), 'running', 'a row held by an application: its job waits');
$holder->query_safe('COMMIT');
$t0 = time();
$node->poll_query_until('postgres', qq{SELECT state = 'done' FROM webhook_ingest.jobs WHERE id = $held_id});
cmp_ok(time() - $t0, '<', 5, 'and completes soon after the lock is gone');
$holder->quit;

$node->stop;
done_testing();
