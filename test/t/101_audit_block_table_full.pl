# audit-9 finding 2: an unprivileged role fills the shared block table
# (WI_MAX_BLOCKS = 64, 8 per backend) with failed ALTER DATABASE ... RENAME
# attempts in 8 idle transactions; block() then silently does nothing, so the
# owner's DROP DATABASE no longer keeps the launcher off: a worker is
# restarted into the database being dropped ("FATAL: database ... does not
# exist", the very race 55977ca meant to close).
use strict;
use warnings;
use lib 'test/t';
use AuditNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = AuditNode::start('audit_blocks_full');
$node->safe_psql('postgres', q{CREATE ROLE alice LOGIN CREATEDB; CREATE ROLE mallory LOGIN});
$node->safe_psql('postgres', q{CREATE DATABASE victim OWNER alice});
$node->safe_psql('victim', q{CREATE EXTENSION webhook_ingest});
$node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
	WHERE backend_type = 'webhook_ingest worker' AND datname = 'victim'})
  or die 'no worker in victim';

my @m;
for (1 .. 8)
{
	my $s = $node->background_psql('postgres', on_error_stop => 1, extra_params => ['-U', 'mallory']);
	$s->query_safe('BEGIN');
	$s->query_safe(q{DO $$ BEGIN FOR i IN 1 .. 8 LOOP
		BEGIN EXECUTE 'ALTER DATABASE template1 RENAME TO x';
		EXCEPTION WHEN insufficient_privilege THEN NULL; END;
	END LOOP; END $$});
	push @m, $s;
}
my $log_start = -s $node->logfile;
$node->safe_psql('postgres', 'DROP DATABASE victim', extra_params => ['-U', 'alice']);
sleep 2;
my $log = slurp_file($node->logfile, $log_start);
unlike($log, qr/FATAL:  database \d+ does not exist/,
	'no worker is started into a database while it is being dropped');
$_->query_safe('COMMIT') for @m;
$_->quit for @m;
$node->stop;
done_testing();
