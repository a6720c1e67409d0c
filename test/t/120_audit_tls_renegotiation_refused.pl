# Audit 0.7.0 (second pass), finding L2 (test/audit/FINDINGS-0.7.0-second.md):
# over TLS 1.2 the worker's connections accepted server-initiated
# renegotiation: a hostile upstream could ask for a new full handshake as
# often as it liked while a fetch was open, each one work for the worker's
# single thread (every other source waits meanwhile).
# Here openssl s_server (TLS 1.2 only, the test CA's certificate) takes the
# worker's connection and never answers the request; once the handshake is
# done, it is told to renegotiate 30 times.  Expected: no renegotiation
# completes (the worker refuses them); before the fix all 30 did (31
# handshakes).
use strict;
use warnings;
use Cwd qw(getcwd);
use IO::Handle;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $top = getcwd();
my $port = $ENV{WI_AUDIT120_PORT} // 18971;
my $dir = PostgreSQL::Test::Utils::tempdir('reneg');
system("$top/test/tls/make_certs.sh", $dir) == 0 or BAIL_OUT('test/tls/make_certs.sh failed');
my $out = "$dir/s_server.out";
# (stdbuf: s_server's log unbuffered, read while it runs; -naccept 1: it exits after the worker's connection)
my $server_pid = open(my $server, '|-', "exec stdbuf -o0 -e0 openssl s_server -naccept 1 -accept 127.0.0.1:$port"
	. " -cert $dir/server.pem -key $dir/server.key -tls1_2 -state > $out 2>&1")
  or BAIL_OUT("openssl s_server: $!");
$server->autoflush(1);
END
{
	local $?;    # (the test's exit status, not close's)
	if ($server_pid)
	{
		kill 'KILL', $server_pid;
		close $server;
	}
}

# Handshakes s_server completed: one "read finished" for the first, one more per renegotiation.
sub handshakes { return () = ((-e $out ? slurp_file($out) : '') =~ /SSL_accept:SSLv3\/TLS read finished/g); }

my $ca = slurp_file("$dir/ca.pem");
$ca =~ s/'/''/g;
my $node = PostgreSQL::Test::Cluster->new('reneg');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
log_statement = 'none'
});
$node->start;
$node->safe_psql('postgres', qq{
	CREATE EXTENSION webhook_ingest;
	SELECT webhook_ingest.add_source('reneg', 'https://127.0.0.1:$port/posts/{external_id}', tls_ca => '$ca',
	                                 timeout_ms => 8000, max_attempts => 1);
	SELECT webhook_ingest.enqueue('reneg', 'r1');
});
ok($node->poll_query_until('postgres', q{SELECT state = 'running' FROM webhook_ingest.jobs}), 'the fetch has started');
sleep 2;    # its handshake is done, its request sent (s_server never answers it)
for (1 .. 30)
{
	print $server "r\n";
	usleep(50_000);
}
# s_server exits once the connection is gone (the worker gives up at timeout_ms, or on a refused renegotiation).
ok($node->poll_query_until('postgres', q{SELECT state = 'dead' FROM webhook_ingest.jobs}),
	'the fetch ends (the upstream never answered)');
for (1 .. 100) { last if waitpid($server_pid, 1) == $server_pid; usleep(100_000); }
my $n = handshakes();
note("handshakes s_server completed: $n");
is($n, 1, 'the first handshake only: no renegotiation the upstream asked for was done');
$node->stop;
done_testing();
