# audit-8 finding: a handler's error message goes into last_error, the
# worker's memory and the server log whole.  A handler owner's
# RAISE EXCEPTION of 20 MB: last_error is 20 MB, the server log grows by
# 20 MB per dead job (the LOG's DETAIL), and the worker holds about 8 copies
# at the peak (ErrorData, CopyErrorData, handler_failure, the attempt
# message, its text datum, t->why kept until the batch is freed...): 10 such
# jobs at 50 MB took the worker from 19 MB to 863 MB RSS and put 500 MB in
# the log; 256 in one batch would OOM it.  Issue 8 #9: no message echoes
# more than about 100 bytes of an input.
use strict;
use warnings;
use lib 'test/t';
use AuditNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = AuditNode::start('audit_bigerror');
$node->safe_psql('postgres', q{
	SET ROLE dev;
	CREATE FUNCTION devs.loud(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION '%', repeat('E', 20000000); END $$;
	RESET ROLE;
	SELECT webhook_ingest.add_source('dev', 'http://127.0.0.1:18080/posts/{external_id}',
	                                 'devs.loud(text,jsonb,jsonb)', max_attempts => 1);
});
my $log_before = -s $node->logfile;
$node->safe_psql('postgres', q{SELECT webhook_ingest.enqueue('dev', 'loud')});
$node->poll_query_until('postgres', q{SELECT state = 'dead' FROM webhook_ingest.jobs WHERE external_id = 'loud'})
  or diag('not dead');
my $len = $node->safe_psql('postgres', q{SELECT length(last_error) FROM webhook_ingest.jobs WHERE external_id = 'loud'});
my $log_growth = (-s $node->logfile) - $log_before;
diag("last_error: $len characters; server log grew by $log_growth bytes");
cmp_ok($len, '<', 10000, 'last_error holds a bounded part of the handler\'s message');
cmp_ok($log_growth, '<', 100000, 'the server log does not take the whole message');
$node->stop;
done_testing();
