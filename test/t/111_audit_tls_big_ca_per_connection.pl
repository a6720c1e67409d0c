# Audit 15: a source's tls_ca is copied and parsed again for every TLS
# connection (libcurl 7.88 clones CAINFO_BLOB into each connection's config
# and loads it into a new SSL_CTX per handshake; CURL_BLOB_NOCOPY saves only
# the easy handle's copy).  With the README's own recipe, the system bundle
# plus a private CA (about 220 kB), and a burst of 1000 fetches to an
# HTTP/1.1 upstream (one connection each), the worker spends its time
# parsing PEM: handshakes time out (connect_timeout), jobs are fetched again
# and again, and its memory grows by about 0.5 MB per connection.
# Expected: every job done at its first attempt, and the worker's peak RSS
# under 250 MB (with ca.pem alone: about 110 MB).
use strict;
use warnings;
use Cwd qw(getcwd);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 'test/t';
use TlsUpstream;

my $top = getcwd();
my $base = $ENV{WI_AUDIT15_TLS_PORT_BASE2} // 18491;
my %port = TlsUpstream::ports($base);
my $tls = PostgreSQL::Test::Utils::tempdir('tls');
my $nginx_up = 0;
sub nginx { return TlsUpstream::nginx($tls, \%port, @_); }
END { nginx('stop') if $nginx_up; }
# 2 s per answer: the 1000 fetches are in flight together, one connection each.
nginx('start', '--delay-ms', '2000', '--workers', '2') or BAIL_OUT('nginx did not start (test/tls/nginx.sh)');
$nginx_up = 1;
my $bundle = '/etc/ssl/certs/ca-certificates.crt';
plan skip_all => "no $bundle" unless -r $bundle;
my $ca = slurp_file($bundle) . slurp_file("$tls/ca.pem");
note(sprintf('tls_ca: %d bytes', length $ca));
$ca =~ s/'/''/g;

my $node = PostgreSQL::Test::Cluster->new('big_ca');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.backoff_base = 50ms
webhook_ingest.backoff_max = 200ms
});
$node->start;
$node->safe_psql('postgres', qq{
	CREATE EXTENSION webhook_ingest;
	SELECT webhook_ingest.add_source('bundle', 'https://127.0.0.1:$port{h1}/posts/{external_id}',
	                                 tls_ca => '$ca', timeout_ms => 30000);
});
$node->poll_query_until('postgres',
	q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'})
  or die 'the worker did not start';
my $pid = $node->safe_psql('postgres', q{SELECT pid FROM webhook_ingest.worker_status WHERE role = 'fetcher'});
$node->safe_psql('postgres', q{SELECT count(*) FROM generate_series(1, 1000) i, webhook_ingest.enqueue('bundle', 'b-' || i)});
my $t0 = time;
$node->poll_query_until('postgres', q{SELECT count(*) = 1000 FROM webhook_ingest.jobs WHERE state IN ('done', 'dead')})
  or die 'jobs did not finish';
my ($hwm) = slurp_file("/proc/$pid/status") =~ /VmHWM:\s+(\d+) kB/;
my ($fetched, $conns) = split /\|/, $node->safe_psql('postgres',
	q{SELECT fetched, tls_connections_opened FROM webhook_ingest.worker_status WHERE role = 'fetcher'});
note(sprintf('1000 jobs in %d s; %d fetches, %d TLS connections; worker peak RSS %d MB', time - $t0, $fetched, $conns, $hwm / 1024));
is($fetched, 1000, 'each job fetched once (no handshake timed out)');
cmp_ok($hwm / 1024, '<', 250, 'the worker\'s peak RSS stays under 250 MB');
$node->stop;
done_testing();
