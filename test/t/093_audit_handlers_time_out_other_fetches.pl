# audit-8 finding: no cap on handler time per batch.  handler_timeout caps one
# call (default 2 s), but a batch runs up to 256 handlers one after another
# while libcurl is not driven; curl notices the other transfers' timeouts only
# afterwards and fails them.  So a handler owner whose handler sleeps just
# under handler_timeout makes every other source's fetches that are in flight
# fail as "Timeout was reached" - a failed attempt each (dead at
# max_attempts), though their upstream answered in 500 ms.  Here: 6 jobs of
# 0.9 s (5.4 s without HTTP), another source with timeout_ms 1500 whose
# upstream answers in 500 ms.
use strict;
use warnings;
use lib 'test/t';
use AuditNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = AuditNode::start('audit_batch_stall');
$node->safe_psql('postgres', q{
	SET ROLE dev;
	CREATE FUNCTION devs.slowish(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE sql AS $$ SELECT pg_sleep(0.9) $$;	-- well under handler_timeout (2 s)
	RESET ROLE;
	SELECT webhook_ingest.add_source('dev', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=200',
	                                 'devs.slowish(text,jsonb,jsonb)');
	SELECT webhook_ingest.add_source('victim', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=500',
	                                 timeout_ms => 1500, max_attempts => 1);
});
# One claim: the dev fetches answer together at 200 ms and are completed in one
# batch (6 x 0.9 s) while the victims' answers (500 ms) wait in the socket buffers.
$node->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT webhook_ingest.enqueue('dev', 'd' || g) FROM generate_series(1, 6) g
	                      UNION ALL
	                      SELECT webhook_ingest.enqueue('victim', 'v' || g) FROM generate_series(1, 10) g) e});
$node->poll_query_until('postgres', q{
	SELECT count(*) = 16 FROM webhook_ingest.jobs WHERE state IN ('done', 'dead')})
  or diag('jobs did not finish');
diag($node->safe_psql('postgres', q{SELECT state || ': ' || count(*) || ' e.g. ' || coalesce(min(last_error), '')
                                     FROM webhook_ingest.jobs WHERE source = 'victim' GROUP BY state}));
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.jobs WHERE source = 'victim' AND state = 'dead'}),
	'0', 'no job of another source dies of a timeout its upstream never caused');
$node->stop;
done_testing();
