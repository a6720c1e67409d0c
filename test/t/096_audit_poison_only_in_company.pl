# audit-8 finding: a job that kills the worker only when it shares a batch
# is never counted.  The crash guard learns the culprit by completing each
# suspect alone; a handler whose crash depends on what ran before it in the
# same transaction (here: a transaction-level advisory lock an earlier job of
# its source took; in real life any state a C function keeps, or rows an
# earlier handler wrote) never crashes alone, so every suspect is cleared
# and every later batch with two of its jobs kills the worker again.
# max_attempts = 1: three crashes, and no job dead, no attempt counted.
use strict;
use warnings;
use lib 'test/t';
use AuditNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = AuditNode::start('audit_company');
$node->safe_psql('postgres', q{
	CREATE FUNCTION public.dies_in_company(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE plpgsql AS $$
	BEGIN
		IF EXISTS (SELECT 1 FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'
		                                    AND objid = 778 AND granted) THEN
			PERFORM pg_terminate_backend(pg_backend_pid());
			PERFORM pg_sleep(5);
		END IF;
		PERFORM pg_advisory_xact_lock(778);
	END $$;
	SELECT webhook_ingest.add_source('pc', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=300',
	                                 'public.dies_in_company(text,jsonb,jsonb)', max_attempts => 1);
});
for my $round (1 .. 3)
{
	$node->safe_psql('postgres', qq{SELECT count(*) FROM generate_series(1, 4) g, webhook_ingest.enqueue('pc', 'r${round}-' || g)});
	$node->poll_query_until('postgres', qq{
		SELECT count(*) = 4 FROM webhook_ingest.jobs WHERE external_id LIKE 'r${round}-%' AND state IN ('done', 'dead')})
	  or diag("round $round did not finish");
	AuditNode::wait_for_worker($node);
}
my $crashes = () = slurp_file($node->logfile) =~ /exited with exit code 1/g;
my $states = $node->safe_psql('postgres', q{SELECT string_agg(state || ':' || n, ' ') FROM
	(SELECT state::text, count(*) n FROM webhook_ingest.jobs GROUP BY 1) s});
diag("worker deaths: $crashes; jobs: $states");
cmp_ok($crashes, '<=', 1, 'a job that crashes the worker is identified after one crash, not crash after crash');
$node->stop;
done_testing();
