# audit-11: enqueue() needs USAGE on schema webhook_ingest since lock_jobs()
# looks jobs up through RangeVarGetRelid (it checks the caller's USAGE).
# A role admitted by enqueue_roles and given EXECUTE on an SQL-standard
# (BEGIN ATOMIC) wrapper, whose body was bound when it was created, never
# names the schema: 0.4.0 let it enqueue, the 0.5.0 snapshot raises
# "permission denied for schema webhook_ingest" from inside enqueue().
use strict;
use warnings;
use lib 'test/t';
use AuditNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = AuditNode::start('audit_usage');
$node->safe_psql('postgres', q{
	CREATE ROLE svc LOGIN;
	GRANT EXECUTE ON FUNCTION webhook_ingest.enqueue(text, text, jsonb, text) TO svc;
	SELECT webhook_ingest.add_source('s', 'http://127.0.0.1:18080/posts/{external_id}');
	UPDATE webhook_ingest.sources SET enqueue_roles = ARRAY['svc']::regrole[] WHERE name = 's';
	CREATE FUNCTION public.submit(id text) RETURNS bigint LANGUAGE sql
	BEGIN ATOMIC SELECT job_id FROM webhook_ingest.enqueue('s', id); END;
	GRANT EXECUTE ON FUNCTION public.submit(text) TO svc;
});
my ($rc, $out, $err) = $node->psql('postgres', q{SELECT public.submit('x1') IS NOT NULL},
	extra_params => ['-U', 'svc']);
is($rc, 0, 'a wrapper bound at creation enqueues without naming the schema')
  or diag $err;
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.jobs WHERE external_id = 'x1'}), '1',
	'and the job is queued');
$node->stop;
done_testing();
