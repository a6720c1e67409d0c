# A client key passed to add_source or alter_source as a literal never
# reaches the server log: with log_statement = 'all' (every statement
# logged) and log_min_error_statement = error (a failing statement logged
# beside its error), neither a call that is refused nor one that succeeds
# leaves a line of the key in the log, while the other statements of the
# session are logged as usual.
# No traffic: the worker is off.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $data = "$ENV{PG_ABS_SRCDIR}/data/tls";
$data = 'test/data/tls' unless -d $data;
my $ca = slurp_file("$data/ca.pem");
my $cert = slurp_file("$data/client.pem");
my $key = slurp_file("$data/client.key");
my $other = slurp_file("$data/other.key");
my ($key_line) = grep { $_ ne '' && $_ !~ /-----/ } split /\n/, $key;
my ($other_line) = grep { $_ ne '' && $_ !~ /-----/ } split /\n/, $other;

my $node = PostgreSQL::Test::Cluster->new('tls_key_log');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.enabled = off
log_statement = 'all'
log_min_error_statement = error
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION webhook_ingest');

my $offset = -s $node->logfile;
my ($ret, $out, $err) = $node->psql('postgres', qq{
SELECT 'a statement with no key' AS marker_one;
SELECT webhook_ingest.add_source('k1', 'https://127.0.0.1:9/x/{external_id}',
       tls_client_cert => '$cert', tls_client_key => '$other');
});
like($err, qr/tls_client_key is not the key of tls_client_cert/, 'a key that is not the certificate\'s is refused');
$node->safe_psql('postgres', qq{
SELECT webhook_ingest.add_source('k1', 'https://127.0.0.1:9/x/{external_id}', tls_ca => '$ca',
       tls_client_cert => '$cert', tls_client_key => '$key');
SELECT webhook_ingest.alter_source('k1', tls_client_cert => '$cert', tls_client_key => '$key');
SELECT 'another statement with no key' AS marker_two;
});
($ret, $out, $err) = $node->psql('postgres', qq{SELECT webhook_ingest.add_source('k2', 'https://127.0.0.1:9/x/{external_id}',
       tls_client_cert => 'not a certificate', tls_client_key => '$key') /* a refused certificate */});
like($err, qr/tls_client_cert holds no PEM certificate/, 'a certificate that does not parse is refused');
($ret, $out, $err) = $node->psql('postgres', qq{SELECT syntax error '$key'});
isnt($ret, 0, 'a syntax error near a key is an error');
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.source_tls_keys}), '1',
	'the good key is stored');

my $log = slurp_file($node->logfile, $offset);
like($log, qr/marker_one/, 'the statements without a key are logged (log_statement works here)');
like($log, qr/marker_two/, 'and so is the one after the keys');
unlike($log, qr/\Q$key_line\E/, 'no line of the key is in the server log');
unlike($log, qr/\Q$other_line\E/, 'nor of the refused key');
unlike($log, qr/PRIVATE KEY-----\n/, 'nor any PEM private key block');
like($log, qr/tls_client_key is not the key of tls_client_cert/, 'the refusal itself is logged');

$node->stop;
done_testing();
