# Fetches the worker holds back for an https origin (h2_pacing.c: one probe
# at a time while the origin's protocol is unknown) go on when the probe
# ends, even when nothing else happens in the worker: 20 jobs to a host whose
# certificate does not verify all end dead within seconds, not at their lease.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 'test/t';
use TlsUpstream;

my $base = $ENV{WI_TLS_TAP_PORT_BASE3} // 18531;
my %port = TlsUpstream::ports($base);
my $tls = PostgreSQL::Test::Utils::tempdir('tls');
my $nginx_up = 0;
sub nginx { return TlsUpstream::nginx($tls, \%port, @_); }
END { nginx('stop') if $nginx_up; }
nginx('start') or BAIL_OUT('nginx did not start (test/tls/nginx.sh)');
$nginx_up = 1;

my $node = PostgreSQL::Test::Cluster->new('paced');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 200ms
webhook_ingest.lease_timeout = 600s
});
$node->start;
$node->safe_psql('postgres', qq{
CREATE EXTENSION webhook_ingest;
SELECT webhook_ingest.add_source('expired', 'https://127.0.0.1:$port{expired}/posts/{external_id}',
                                 max_attempts => 1, timeout_ms => 20000);
SELECT count(*) FROM generate_series(1, 20) g, webhook_ingest.enqueue('expired', 'e' || g) e;
});
my $start = time();
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 20 FROM webhook_ingest.jobs WHERE source = 'expired' AND state = 'dead'}),
	'all 20 jobs end dead');
my $took = time() - $start;
cmp_ok($took, '<', 15, "within seconds ($took s), not at their timeout or lease");
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.jobs
	WHERE source = 'expired' AND last_error NOT LIKE '%certificate%'}), '0',
	'each with the certificate error');
$node->stop;
done_testing();
