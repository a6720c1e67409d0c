# audit-8 finding: an application role (only webhook_ingest_enqueue) stops the
# worker for every source by keeping one transaction open.  Each job whose
# row it holds (its enqueue requeued the running job) is "completed on a
# later turn, its fetched result kept ... it keeps its in-flight slot"; the
# worker then claims only max_concurrent_requests - in_flight - deferred
# jobs.  Requeue as many running jobs as there are slots (256 by default,
# one statement) and idle in transaction: nothing else is ever claimed.
# Issue 8 #3: "a job whose row is locked is completed on a later turn ...
# every other job goes on".  Slots are 4 here to keep the test fast; the
# same was observed with the default 256 (victim stalled until the commit).
use strict;
use warnings;
use lib 'test/t';
use AuditNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = AuditNode::start('audit_slots', "webhook_ingest.max_concurrent_requests = 4\n");
$node->safe_psql('postgres', q{
	SELECT webhook_ingest.add_source('slow', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=600');
	SELECT webhook_ingest.add_source('other', 'http://127.0.0.1:18080/posts/{external_id}');
});

my $app = $node->background_psql('postgres', on_error_stop => 1, extra_params => ['-U', 'app']);
$app->query_safe(q{SELECT count(*) FROM generate_series(1, 4) g, webhook_ingest.enqueue('slow', 'h' || g)});
$node->poll_query_until('postgres', q{
	SELECT count(*) = 4 FROM webhook_ingest.jobs WHERE source = 'slow' AND state = 'running'})
  or die 'the slow jobs did not start';
$app->query_safe('BEGIN');
is($app->query_safe(q{SELECT string_agg(DISTINCT e.outcome, ',') FROM generate_series(1, 4) g,
                      webhook_ingest.enqueue('slow', 'h' || g) e}), 'requeued',
	'the application requeued the 4 running jobs and holds their rows');

my $t0 = time();
$node->safe_psql('postgres', q{SELECT webhook_ingest.enqueue('other', 'victim')});
my $done = $node->safe_psql('postgres', q{
	DO $$ BEGIN
		FOR i IN 1 .. 100 LOOP		-- at most 10 s
			EXIT WHEN (SELECT state = 'done' FROM webhook_ingest.jobs WHERE external_id = 'victim');
			PERFORM pg_sleep(0.1);
		END LOOP;
	END $$;
	SELECT state FROM webhook_ingest.jobs WHERE external_id = 'victim'});
my $victim_ms = (time() - $t0) * 1000;
is($done, 'done', sprintf('while the application idles in transaction, another source\'s job is done (state %s after %.0f ms)',
	$done, $victim_ms));
diag($node->safe_psql('postgres', q{SELECT 'in_flight=' || in_flight || ' claimed=' || claimed FROM webhook_ingest.worker_status WHERE role = 'fetcher'}));
$app->query_safe('COMMIT');
$app->quit;
$node->poll_query_until('postgres', q{SELECT state = 'done' FROM webhook_ingest.jobs WHERE external_id = 'victim'});
$node->stop;
done_testing();
