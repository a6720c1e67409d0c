# audit-8 finding: any error in a completion transaction other than a lock
# timeout ends the worker (wi_in_tx re-throws it; a background worker has no
# outer handler: FATAL), and the crash guard then counts it as a crash of the
# job it was completing.  Any role can make that error permanent: LISTEN in
# a session that stays in a transaction (it never reads), and pg_notify until
# the 8 GB NOTIFY queue is full.  From then on every completion's commit
# fails with "too many notifications in the NOTIFY queue" (the worker's
# NOTIFY webhook_ingest_done), the worker restarts every 5 s, and each job
# completed alone is blamed: healthy jobs end dead with "the worker died
# while handling it" after max_attempts restarts.  Observed on a scratch
# cluster: a plain job (no handler), max_attempts 3, dead 15 s after the
# queue filled.
#
# HEAVY: fills 8 GB under the node's data directory (about 2 minutes on 2
# cores); runs only with WI_AUDIT_HEAVY=1.
use strict;
use warnings;
use lib 'test/t';
use AuditNode;
use PostgreSQL::Test::Utils;
use Test::More;

plan skip_all => 'fills the 8 GB NOTIFY queue; set WI_AUDIT_HEAVY=1' unless $ENV{WI_AUDIT_HEAVY};

my $node = AuditNode::start('audit_notify');
$node->safe_psql('postgres', q{
	SELECT webhook_ingest.add_source('plain', 'http://127.0.0.1:18080/posts/{external_id}', max_attempts => 3);
	CREATE PROCEDURE fill_notify_queue() LANGUAGE plpgsql AS $$
	BEGIN
		FOR i IN 1 .. 1100000 LOOP	-- 8 GB / 8 kB, and a little more
			PERFORM pg_notify('fill', repeat('x', 7900));
			COMMIT;
		END LOOP;	-- ends with "too many notifications in the NOTIFY queue"
	END $$;
	GRANT EXECUTE ON PROCEDURE fill_notify_queue() TO app;
});
# The listener that never reads: it LISTENs, then stays in a transaction.
my $listener = $node->background_psql('postgres', on_error_stop => 1, extra_params => ['-U', 'app']);
$listener->query_safe('LISTEN fill');
$listener->query_safe('BEGIN');
$listener->query_safe('SELECT txid_current()');
$node->psql('postgres', 'CALL fill_notify_queue()', extra_params => ['-U', 'app']);
diag('queue usage: ' . $node->safe_psql('postgres', 'SELECT pg_notification_queue_usage()'));

$node->safe_psql('postgres', q{SELECT webhook_ingest.enqueue('plain', 'healthy')});
$node->poll_query_until('postgres', q{SELECT state IN ('done', 'dead') FROM webhook_ingest.jobs WHERE external_id = 'healthy'});
my $r = $node->safe_psql('postgres', q{SELECT state || ' | ' || coalesce(last_error, '') FROM webhook_ingest.jobs WHERE external_id = 'healthy'});
diag($r);
unlike($r, qr/worker died while handling it/, 'an error at the batch commit is not blamed on the job');
ok(!$node->log_contains('exited with exit code 1'), 'the worker does not exit on an error at commit');
$listener->quit;
$node->stop('immediate');
done_testing();
