# Audit of 0.10.0's apply workers (test/audit/FINDINGS-0.10.0-apply.md): the
# worker (fetcher) restarts while an apply worker is completing its batch - an
# administrator's pg_terminate_backend of the fetcher alone:
#  A5. the new fetcher took the apply worker's guard file for a dead
#      predecessor's and settled it under the running apply worker: the jobs
#      of the batch became suspects and their handler was completed alone
#      ("its job crashed an apply worker", worker_status.alone_handlers), a
#      job whose row was not locked yet had the "crash" counted as an attempt,
#      and the file was truncated under the apply worker;
#  A6. an apply worker that outlived its fetcher and was then ended in that
#      fetcher's batch left the batch's jobs running until their leases
#      expired (60 s): the new fetcher never took them back.
# Each job's effect is committed exactly once.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('audit_fetcher_restart');
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
	CREATE TABLE effects (external_id text);
	CREATE FUNCTION sleepy(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE sql AS $$ SELECT pg_sleep(1.5); INSERT INTO effects VALUES (external_id) $$;
	SELECT webhook_ingest.add_source('sleepy', 'http://127.0.0.1:18080/posts/{external_id}', 'sleepy(text,jsonb,jsonb)',
	                                 max_attempts => 1);
});
$node->poll_query_until('postgres', q{
	SELECT count(*) = 2 FROM webhook_ingest.worker_status WHERE role = 'applier' AND state = 'idle'})
  or die 'the apply workers did not start';

sub q1 { return $node->safe_psql('postgres', shift); }

sub fetcher { return q1(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'}); }

# Enqueue, wait for its handler to sleep in an apply worker, terminate the fetcher; the apply worker's pid.
sub terminate_fetcher_mid_batch
{
	my $id = shift;
	my $old = fetcher();
	q1("SELECT webhook_ingest.enqueue('sleepy', '$id')");
	$node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
	                                       WHERE backend_type = 'webhook_ingest applier' AND wait_event = 'PgSleep'})
	  or die "the handler of $id did not start";
	my $applier = q1(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'webhook_ingest applier' AND wait_event = 'PgSleep'});
	q1("SELECT pg_terminate_backend($old)");
	$node->poll_query_until('postgres', qq{SELECT count(*) = 1 FROM webhook_ingest.worker_status
	                                        WHERE role = 'fetcher' AND pid <> $old AND state = 'running'})
	  or die 'no new fetcher';
	return $applier;
}

# A5. The fetcher alone restarts while the apply worker sleeps in the handler.
my $offset = -s $node->logfile;
terminate_fetcher_mid_batch('s1');
$node->poll_query_until('postgres', q{SELECT state = 'done' FROM webhook_ingest.jobs WHERE external_id = 's1'})
  or diag(q1(q{SELECT state || ': ' || coalesce(last_error, '') FROM webhook_ingest.jobs WHERE external_id = 's1'}));
usleep(300_000);
is(q1(q{SELECT count(*) FROM webhook_ingest.worker_status WHERE coalesce(alone_handlers, '') <> ''}), '0',
	"an administrator's restart of the fetcher leaves no handler completed alone (worker_status.alone_handlers)");
my $log = slurp_file($node->logfile, $offset);
unlike($log, qr/died while (handling|completing)/, 'and blames no job in the log');
is(q1(q{SELECT state || ' ' || attempts FROM webhook_ingest.jobs WHERE external_id = 's1'}), 'done 1',
	'the job is done at its first attempt');

# A6. The same, then the apply worker is terminated too, still in that fetcher's batch.
my $applier = terminate_fetcher_mid_batch('s2');
usleep(500_000);				# the new fetcher has taken back what nobody held (not this batch)
q1("SELECT pg_terminate_backend($applier)");
my $t0 = time();
$node->poll_query_until('postgres', q{SELECT state = 'done' FROM webhook_ingest.jobs WHERE external_id = 's2'})
  or diag(q1(q{SELECT state || ': ' || coalesce(last_error, '') FROM webhook_ingest.jobs WHERE external_id = 's2'}));
my $took = time() - $t0;
cmp_ok($took, '<', 15, sprintf('its job is taken back and done in %.1f s, not at the end of its 60 s lease', $took));
is(q1(q{SELECT count(*) || '/' || count(DISTINCT external_id) FROM effects}), '2/2', 'each effect exactly once');
is(q1(q{SELECT count(*) FROM webhook_ingest.worker_status WHERE coalesce(alone_handlers, '') <> ''}), '0',
	'still no handler completed alone');

$node->stop;
done_testing();
