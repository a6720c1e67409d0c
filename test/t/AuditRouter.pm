# Shared set-up of the router audit's TAP tests (test/t/15x_audit_router_*.pl): one shard cluster
# holding two shard databases, s0 and s1 (each with webhook_ingest and its own worker), and a router
# cluster with webhook_ingest_router (no webhook_ingest preloaded there, as in production) whose
# server webhook_ingest_shards has p0 = s0, p1 = s1.  Roles app (enqueue), adm (admin), mon (monitor)
# on both clusters.  Each test failed on router 0.1.0 as first written and guards the fix of a
# weakness the audit found (test/audit/FINDINGS-router-0.1.0.md).
package AuditRouter;
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Digest::SHA qw(hmac_sha256_hex);

# The router needs PL/Proxy (postgresql-NN-plproxy), as in TAP 140.
{
	my $pg_config = $ENV{PG_CONFIG} // 'pg_config';
	chomp(my $share = `$pg_config --sharedir`);
	plan skip_all => "PL/Proxy is not installed in $share" unless -f "$share/extension/plproxy.control";
}

# (router, shard cluster); %opt: router_conf (postgresql.conf lines), parts (the server's options
# after connection_lifetime, default p0/p1 on the shard cluster).
sub start
{
	my (%opt) = @_;
	my $shard = PostgreSQL::Test::Cluster->new('shards');
	$shard->init;
	$shard->append_conf('postgresql.conf', q{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
});
	$shard->start;
	$shard->safe_psql('postgres', 'CREATE DATABASE s0');
	$shard->safe_psql('postgres', 'CREATE DATABASE s1');
	$shard->safe_psql('postgres', q{
		CREATE ROLE app LOGIN; CREATE ROLE adm LOGIN; CREATE ROLE mon LOGIN;});
	for my $db (qw(s0 s1))
	{
		$shard->safe_psql($db, q{
			CREATE EXTENSION webhook_ingest;
			GRANT webhook_ingest_enqueue TO app;
			GRANT webhook_ingest_admin TO adm;
			GRANT webhook_ingest_monitor TO mon;
		});
	}
	my $router = PostgreSQL::Test::Cluster->new('router');
	$router->init;
	$router->append_conf('postgresql.conf', $opt{router_conf} // '');
	$router->start;
	my $parts = $opt{parts} // sprintf("p0 'host=%s port=%d dbname=s0', p1 'host=%s port=%d dbname=s1'",
		$shard->host, $shard->port, $shard->host, $shard->port);
	$router->safe_psql('postgres', qq{
		CREATE EXTENSION webhook_ingest_router CASCADE;
		CREATE ROLE app LOGIN IN ROLE webhook_ingest_enqueue;
		CREATE ROLE adm LOGIN IN ROLE webhook_ingest_admin;
		CREATE ROLE mon LOGIN IN ROLE webhook_ingest_monitor;
		CREATE SERVER webhook_ingest_shards FOREIGN DATA WRAPPER plproxy OPTIONS (connection_lifetime '1800', $parts);
		CREATE USER MAPPING FOR PUBLIC SERVER webhook_ingest_shards;
		GRANT USAGE ON FOREIGN SERVER webhook_ingest_shards TO webhook_ingest_enqueue, webhook_ingest_admin, webhook_ingest_monitor;
	});
	return ($router, $shard);
}

# psql on NODE's DB as ROLE: (rc, stdout, stderr), errors verbose (SQLSTATE shown); %opt: timeout
# (seconds: psql is killed then, and stderr is "timed out").
sub rq
{
	my ($node, $db, $role, $sql, %opt) = @_;
	my ($out, $err, $timed_out) = ('', '', 0);
	my $rc = $node->psql($db, "\\set VERBOSITY verbose\n$sql", stdout => \$out, stderr => \$err,
		extra_params => [ '-U', $role ],
		($opt{timeout} ? (timeout => $opt{timeout}, timed_out => \$timed_out) : ()));
	return (1, $out, 'timed out') if $timed_out;
	return ($rc, $out, $err);
}

sub q_ok
{
	my ($node, $db, $role, $sql) = @_;
	my ($rc, $out, $err) = rq($node, $db, $role, $sql);
	die "as $role on $db: $sql: $err" if $rc;
	return $out;
}

# An object id of SOURCE whose partition (of two) is PART.
sub id_on
{
	my ($router, $source, $part) = @_;
	return q_ok($router, 'postgres', 'app', qq{SELECT min('o' || k) FROM generate_series(1, 100) k
		WHERE webhook_ingest.shard_of('$source', 'o' || k) = $part});
}

# receive() (or FN, default receive) on the router as app with a GitHub signature over BODY with
# SECRET: (rc, out, err).
sub receive_github
{
	my ($router, $source, $secret, $delivery, $body, $fn) = @_;
	$fn //= 'receive';
	my $sig = 'sha256=' . hmac_sha256_hex($body, $secret);
	(my $lit = $body) =~ s/'/''/g;
	return rq($router, 'postgres', 'app', qq{SELECT job_id || ' ' || outcome FROM webhook_ingest.$fn('$source',
		jsonb_build_object('X-Hub-Signature-256', '$sig', 'X-GitHub-Delivery', '$delivery'), '$lit')});
}

# The shard databases holding a job of (SOURCE, ID): "s0", "s1", "s0 s1" or "".
sub holders
{
	my ($shard, $source, $id) = @_;
	return join ' ', grep {
		$shard->safe_psql($_, "SELECT count(*) FROM webhook_ingest.jobs WHERE source = '$source' AND external_id = '$id'") > 0
	} qw(s0 s1);
}

1;
