# audit-8 finding: the crash guard cannot tell a shutdown from a crash.  The
# guard file says "completing <id>" for as long as a batch is completed; a
# fast shutdown (pg_ctl stop's default, every restart, every failover) or a
# smart one (the worker gets SIGTERM once clients are gone) that lands while
# a single job is completed leaves it there, and the next start counts an
# attempt against that job: "the worker died while handling it".  With
# max_attempts = 1 a routine restart kills a healthy job; with several jobs
# in the batch they all become suspects, completed one per transaction.
use strict;
use warnings;
use lib 'test/t';
use AuditNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = AuditNode::start('audit_shutdown');
$node->safe_psql('postgres', q{
	SET ROLE dev;
	CREATE FUNCTION devs.ok_but_slow(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE sql AS $$ SELECT pg_sleep(1.5) $$;	-- a healthy handler, under handler_timeout
	RESET ROLE;
	SELECT webhook_ingest.add_source('dev', 'http://127.0.0.1:18080/posts/{external_id}',
	                                 'devs.ok_but_slow(text,jsonb,jsonb)', max_attempts => 1);
});
$node->safe_psql('postgres', q{SELECT webhook_ingest.enqueue('dev', 'healthy')});
$node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity
	 WHERE backend_type = 'webhook_ingest applier' AND wait_event = 'PgSleep'})
  or die 'the handler did not start';
$node->stop('fast');
$node->start;
AuditNode::wait_for_worker($node);
$node->poll_query_until('postgres', q{SELECT state IN ('done', 'dead') FROM webhook_ingest.jobs WHERE external_id = 'healthy'});
my $r = $node->safe_psql('postgres', q{SELECT state || ' | ' || coalesce(last_error, '') FROM webhook_ingest.jobs WHERE external_id = 'healthy'});
diag($r);
unlike($r, qr/worker died while handling it/, 'a fast shutdown is not recorded as a crash of the job it interrupted');
like($r, qr/^done/, 'the interrupted job is fetched again and done, not dead');
$node->stop;
done_testing();
