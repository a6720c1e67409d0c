# Shared set-up of the audit-8 TAP tests (test/t/09x_audit_*.pl): a throwaway
# node with the worker, against the loopback upstream test/run starts on
# 127.0.0.1:18080, with a non-superuser handler owner "dev" and an
# application role "app".  Each test failed on the audited snapshot and
# guards the fix of a weakness the audit found (see test/audit/FINDINGS.md).
package AuditNode;
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

sub start
{
	my ($name, $extra_conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.backoff_base = 50ms
webhook_ingest.backoff_max = 200ms
restart_after_crash = on
} . ($extra_conf // ''));
	$node->start;
	$node->safe_psql('postgres', q{
		CREATE EXTENSION webhook_ingest;
		CREATE ROLE dev NOLOGIN;
		CREATE ROLE app LOGIN;
		GRANT webhook_ingest_enqueue TO app;
		CREATE SCHEMA devs AUTHORIZATION dev;
	});
	wait_for_worker($node);
	return $node;
}

sub wait_for_worker
{
	my $node = shift;
	$node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'})
	  or die 'the worker did not start';
}

1;
