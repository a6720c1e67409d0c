# Router audit F1: a shard that accepts connections but never answers (a stopped or swamped
# postmaster: SIGSTOP, a kernel or storage hang; the kernel completes the TCP handshake) held every
# router call for its objects forever.  README promised "no wait beyond connect_timeout in its pN
# option", but PL/Proxy connects with PQconnectStart/PQconnectPoll, where libpq ignores
# connect_timeout, and PL/Proxy 2.10 has no connect timeout of its own: each app connection that
# reached that shard hung, so an app's pool soon held none for the other shards' webhooks either.  The
# only bound is the router session's statement_timeout, and it ended the call with 57014 "canceling
# statement due to statement timeout", which names no shard and which apps answer with 500.  Fixed:
# README's set-up sets statement_timeout for the app roles on the router, and a statement timeout in a
# routed call is the 08006 of an unreachable shard, naming it (503, the sender retries).
use strict;
use warnings;
use lib 'test/t';
use AuditRouter;
use IO::Socket::INET;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

# Partition 1: a listener that never accepts (the kernel completes the handshake, nobody answers).
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $hole = IO::Socket::INET->new(Listen => 64, LocalAddr => '127.0.0.1', LocalPort => $port, ReuseAddr => 1)
  or die "listen on $port: $!";
my $shard_conn;
my ($router, $shard) = AuditRouter::start(parts => 'p0 \'host=SHARDHOST port=SHARDPORT dbname=s0\', p1 \'host=127.0.0.1 port='
	  . $port . ' dbname=s1 connect_timeout=2\'');
# (the p0 placeholders: the shard cluster's socket, known only now)
$router->safe_psql('postgres', sprintf(q{ALTER SERVER webhook_ingest_shards OPTIONS (SET p0 'host=%s port=%d dbname=s0')},
	$shard->host, $shard->port));
$shard->safe_psql('s0', q{SELECT webhook_ingest.add_source('blog', 'http://127.0.0.1:18080/posts/{external_id}')});
my $stuck = AuditRouter::id_on($router, 'blog', 1);
my $fine = AuditRouter::id_on($router, 'blog', 0);

# As README set it up before (connect_timeout=2 in the pN option, nothing else): still waiting.
my $t = time();
my ($rc, $out, $err) = AuditRouter::rq($router, 'postgres', 'app',
	"SELECT * FROM webhook_ingest.enqueue('blog', '$stuck')", timeout => 6);
is($err, 'timed out', sprintf('connect_timeout=2 in p1 does not bound it: still waiting after %.0f s (PL/Proxy connects asynchronously)', time() - $t));

# With README's set-up now: statement_timeout for the app role on the router.
$router->safe_psql('postgres', q{ALTER ROLE app SET statement_timeout = '2s'});
$t = time();
($rc, $out, $err) = AuditRouter::rq($router, 'postgres', 'app', "SELECT * FROM webhook_ingest.enqueue('blog', '$stuck')", timeout => 20);
my $took = time() - $t;
like($err, qr/ERROR:  08006: shard 1 of webhook_ingest_shards is unreachable/,
	'an object of the stuck shard: 08006 naming shard 1 (503, the sender retries), not 57014') or diag($err);
like($err, qr/statement_timeout/, 'its DETAIL says the shard did not answer within statement_timeout');
ok($took < 8, sprintf('within the statement timeout (%.1f s)', $took));
($rc, $out, $err) = AuditRouter::rq($router, 'postgres', 'app', "SELECT outcome FROM webhook_ingest.enqueue('blog', '$fine')", timeout => 20);
is($out, 'queued', 'an object of the other shard meanwhile: queued') or diag($err);
($rc, $out, $err) = AuditRouter::rq($router, 'postgres', 'app',
	"SELECT * FROM webhook_ingest.wait_for_job((1::bigint << 48) | 1, '1 s')", timeout => 20);
like($err, qr/ERROR:  08006: shard 1 of webhook_ingest_shards is unreachable/, 'wait_for_job on the stuck shard: 08006 too');
($rc, $out, $err) = AuditRouter::rq($router, 'postgres', 'app', q{SELECT 1 FROM pg_sleep(3)}, timeout => 20);
like($err, qr/ERROR:  57014: canceling statement due to statement timeout/, 'a statement timeout outside a routed call stays 57014');

close $hole;
$router->stop;
$shard->stop;
done_testing();
