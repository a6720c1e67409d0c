# audit-9 finding 1: any login role (no CREATEDB, not the owner) stops another
# database's worker and keeps it stopped for as long as it keeps a transaction
# open.  utility.c's ProcessUtility hook blocks the database and stops its
# worker BEFORE standard_ProcessUtility checks privileges; the permission
# error is caught in a PL/pgSQL sub-transaction, but the block lives until the
# top-level transaction ends (XactCallback only).
use strict;
use warnings;
use lib 'test/t';
use AuditNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = AuditNode::start('audit_stop_other');
$node->safe_psql('postgres', q{CREATE DATABASE victim; CREATE ROLE mallory LOGIN});
$node->safe_psql('victim', q{CREATE EXTENSION webhook_ingest});
$node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
	WHERE backend_type = 'webhook_ingest worker' AND datname = 'victim'})
  or die 'no worker in victim';

my $m = $node->background_psql('postgres', on_error_stop => 1, extra_params => ['-U', 'mallory']);
$m->query_safe('BEGIN');
$m->query_safe(q{DO $$ BEGIN
	BEGIN EXECUTE 'ALTER DATABASE victim RENAME TO victim2';
	EXCEPTION WHEN insufficient_privilege THEN NULL; END;
END $$});
sleep 3;
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity
	WHERE backend_type = 'webhook_ingest worker' AND datname = 'victim'}), '1',
	'a role that may not rename victim does not stop victim\'s worker');
$m->query_safe('COMMIT');
$m->quit;
$node->stop;
done_testing();
