# Audit 15: HTTP/2 multiplexing holds only for the first
# max_streams_per_connection fetches of a burst.  With PIPEWAIT, libcurl 7.88
# waits for a connection only while it does not know whether the host
# multiplexes; once the first connection is known to and is full, every
# further fetch finds no usable connection (the next one is still in its
# handshake, not yet "multiplex") and opens its own: a burst of 400 slow
# fetches to nginx over h2 opens about 300 TLS connections, one request each,
# where the README promises "thousands in flight need tens of sockets".
# Expected: at most a few connections per 100 fetches in flight (here <= 20).
use strict;
use warnings;
use Cwd qw(getcwd);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 'test/t';
use TlsUpstream;

my $top = getcwd();
my $base = $ENV{WI_AUDIT15_TLS_PORT_BASE3} // 18501;
my %port = TlsUpstream::ports($base);
my $tls = PostgreSQL::Test::Utils::tempdir('tls');
my $nginx_up = 0;
sub nginx { return TlsUpstream::nginx($tls, \%port, @_); }
END { nginx('stop') if $nginx_up; }
# 2 s per answer: the 400 fetches are in flight together.
nginx('start', '--delay-ms', '2000') or BAIL_OUT('nginx did not start (test/tls/nginx.sh)');
$nginx_up = 1;
my $ca = slurp_file("$tls/ca.pem");
$ca =~ s/'/''/g;

my $node = PostgreSQL::Test::Cluster->new('h2_burst');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
});
$node->start;
$node->safe_psql('postgres', qq{
	CREATE EXTENSION webhook_ingest;
	SELECT webhook_ingest.add_source('h2', 'https://127.0.0.1:$port{good}/posts/{external_id}', tls_ca => '$ca',
	                                 timeout_ms => 30000);
});
$node->poll_query_until('postgres',
	q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'})
  or die 'the worker did not start';
$node->safe_psql('postgres', q{SELECT count(*) FROM generate_series(1, 400) i, webhook_ingest.enqueue('h2', 'b-' || i)});
$node->poll_query_until('postgres', q{SELECT count(*) = 400 FROM webhook_ingest.jobs WHERE state IN ('done', 'dead')})
  or die 'jobs did not finish';
my %conn;
my $h2 = 0;
open my $fh, '<', "$tls/access.log" or die "access.log: $!";
while (<$fh>)
{
	my @f = split ' ';
	next unless $f[2] == $port{good} && $f[6] =~ m{^/posts/b-};
	$conn{ $f[0] }++;
	$h2++ if $f[3] eq 'HTTP/2.0';
}
close $fh;
is($h2, 400, 'the 400 fetches went over HTTP/2');
my $n = scalar keys %conn;
my $single = grep { $conn{$_} == 1 } keys %conn;
note("$n connections, $single of them with a single request");
cmp_ok($n, '<=', 20, 'they shared a few connections');
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.jobs WHERE state = 'done'}), '400', 'all done');
$node->stop;
done_testing();
