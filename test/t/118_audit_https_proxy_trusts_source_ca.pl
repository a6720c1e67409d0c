# Audit 0.7.0 (second pass), finding P2 (test/audit/FINDINGS-0.7.0-second.md):
# an https:// proxy's own certificate is to be checked against the system's
# bundle (README, TLS and proxies: "a source's tls_ca is for its
# upstream").  But the worker installs a source's parsed CAs from libcurl's
# SSL_CTX callback, which libcurl calls for every handshake of a transfer,
# the proxy's included: the proxy was checked against the source's tls_ca,
# so a source admin's CA decided whom the worker took for the superuser's
# egress proxy (and a source with a private CA could not use a proxy with a
# public certificate).  Worse, libcurl 7.88 loads the CAs it was given after
# that callback, into the store the callback left: the system's bundle,
# meant for the proxy, went into the source's shared store, which every
# later connection of the source then trusted (test/audit/ca_store_taken_in.c
# shows it: 1 certificate in the store before, 144 after; not testable here,
# as the system's bundle cannot hold the test CA).
# Here the proxy (test/proxy.py --tls) has a certificate from the test CA,
# which the system's bundle does not hold; the sources trust the test CA
# (after the whole system bundle, so their CAs must be installed from the
# parsed store to verify nginx at all).  Expected: no fetch through that
# proxy gets past its handshake (the job ends dead with a certificate error,
# the proxy never sees a CONNECT); through a plain http:// proxy the same
# source's fetches are done (the upstream still gets the source's CAs).
use strict;
use warnings;
use Cwd qw(getcwd);
use IO::Socket::INET;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use lib 'test/t';
use TlsUpstream;

my $top = getcwd();
my $bundle = '/etc/ssl/certs/ca-certificates.crt';
plan skip_all => "no $bundle" unless -r $bundle;
my $base = $ENV{WI_AUDIT118_TLS_PORT_BASE} // 18931;
my %port = (TlsUpstream::ports($base), tls_proxy => $base + 9, plain_proxy => $base + 10);
my $tls = PostgreSQL::Test::Utils::tempdir('tls');
my $nginx_up = 0;
my @children;
sub nginx { return TlsUpstream::nginx($tls, \%port, @_); }
END
{
	kill 'TERM', $_ for @children;
	waitpid($_, 0) for @children;
	nginx('stop') if $nginx_up;
}
nginx('start') or BAIL_OUT('nginx did not start (test/tls/nginx.sh)');
$nginx_up = 1;

sub spawn
{
	my ($out, @cmd) = @_;
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		open STDOUT, '>', $out or die;
		open STDERR, '>&', \*STDOUT or die;
		exec @cmd or die "exec @cmd: $!";
	}
	push @children, $pid;
	return $pid;
}

sub wait_port
{
	my ($p) = @_;
	for (1 .. 100)
	{
		my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $p, Proto => 'tcp');
		if ($s) { close $s; return 1; }
		usleep(100_000);
	}
	return 0;
}
my $tls_log = "$tls/tls_proxy.log";
my $plain_log = "$tls/plain_proxy.log";
spawn("$tls/tls_proxy.out", 'python3', "$top/test/proxy.py", '--tls', "$tls/server.pem", "$tls/server.key",
	"127.0.0.1:$port{tls_proxy}", $tls_log);
spawn("$tls/plain_proxy.out", 'python3', "$top/test/proxy.py", "127.0.0.1:$port{plain_proxy}", $plain_log);
wait_port($port{tls_proxy}) && wait_port($port{plain_proxy}) or die 'a proxy did not start';

sub lit { my $s = shift; $s =~ s/'/''/g; return "'$s'"; }
my $big = lit(slurp_file($bundle) . slurp_file("$tls/ca.pem"));

my $node = PostgreSQL::Test::Cluster->new('https_proxy_ca');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.proxy = 'https://127.0.0.1:$port{tls_proxy}'
log_statement = 'none'
});
$node->start;
my $url = "https://127.0.0.1:$port{good}/posts/{external_id}";
$node->safe_psql('postgres', qq{
	CREATE EXTENSION webhook_ingest;
	SELECT webhook_ingest.add_source('via_tls_proxy', '$url', tls_ca => $big, max_attempts => 1);
	SELECT webhook_ingest.add_source('via_plain_proxy', '$url', tls_ca => $big, max_attempts => 1,
	                                 proxy => 'http://127.0.0.1:$port{plain_proxy}');
});
my $plain = $node->safe_psql('postgres', q{SELECT job_id FROM webhook_ingest.enqueue('via_plain_proxy', 'p1')});
ok($node->poll_query_until('postgres', qq{SELECT state = 'done' FROM webhook_ingest.jobs WHERE id = $plain}),
	'through a plain proxy, the upstream is verified with the source\'s CAs (done)');
like(slurp_file($plain_log), qr/^CONNECT 127\.0\.0\.1:$port{good}$/m, '  (that proxy saw the CONNECT)');

my $job = $node->safe_psql('postgres', q{SELECT job_id FROM webhook_ingest.enqueue('via_tls_proxy', 't1')});
ok($node->poll_query_until('postgres', qq{SELECT state IN ('done', 'dead') FROM webhook_ingest.jobs WHERE id = $job}),
	'the fetch through the https proxy is over');
my ($state, $error) = split /\|/, $node->safe_psql('postgres', qq{SELECT state, last_error FROM webhook_ingest.jobs WHERE id = $job});
note("via the https proxy: $state, " . ($error // ''));
is($state, 'dead', 'the https proxy, whose certificate only the source\'s tls_ca vouches for, is not trusted');
like($error // '', qr/certificate/i, '  the job says the certificate did not verify');
my $seen = -e $tls_log ? slurp_file($tls_log) : '';
unlike($seen, qr/CONNECT/, '  and the proxy never got a CONNECT');

$node->stop;
done_testing();
