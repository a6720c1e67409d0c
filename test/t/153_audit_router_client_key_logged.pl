# Router audit F4: a source's client key passed to the router's add_source or alter_source was written
# to the ROUTER's server log with the statement of any error (log_min_error_statement = error, the
# default): a shard refusing the change, a shard down, a typo.  On a shard webhook_ingest's log hook
# drops such statements (TAP 062, 115); the router has no C and nothing preloaded, so nothing did.
# Fixed: the two functions set log_min_error_statement = panic for the rest of the caller's transaction
# first (_hide_statement_on_error, SECURITY DEFINER, as receive does), so an error they raise is logged
# without its statement.
use strict;
use warnings;
use lib 'test/t';
use AuditRouter;
use PostgreSQL::Test::Utils;
use Test::More;

my ($router, $shard) = AuditRouter::start(router_conf => "log_statement = none\n");
my $up = 'https://127.0.0.1:18080/posts/{external_id}';
AuditRouter::q_ok($router, 'postgres', 'adm', qq{SELECT webhook_ingest.add_source('mtls', '$up')});
my $key = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDrouterauditsecret\n-----END PRIVATE KEY-----";
my $log_from = -s $router->logfile;
my ($rc, $out, $err) = AuditRouter::rq($router, 'postgres', 'adm', qq{SELECT webhook_ingest.alter_source('mtls',
	tls_client_cert => 'not a certificate', tls_client_key => E'@{[ $key =~ s/\n/\\n/gr ]}')});
like($err, qr/ERROR:  /, 'alter_source through the router with a certificate the shards refuse: an error') or diag($out);
($rc, $out, $err) = AuditRouter::rq($router, 'postgres', 'adm', qq{SELECT webhook_ingest.add_source('mtls2', 'ftp://nowhere/{external_id}',
	tls_client_cert => 'not a certificate', tls_client_key => E'@{[ $key =~ s/\n/\\n/gr ]}')});
like($err, qr/ERROR:  /, 'add_source through the router that the shards refuse: an error');
my $log = substr(slurp_file($router->logfile), $log_from);
like($log, qr/ERROR: /, 'the router logged the errors');
unlike($log, qr/routerauditsecret/, 'but not the key (no statement with it in the router\'s log)');
unlike(substr(slurp_file($shard->logfile), 0), qr/routerauditsecret/, 'nor did the shards');
# An admin's other statements are still logged with their errors.
AuditRouter::rq($router, 'postgres', 'adm', q{SELECT webhook_ingest.pause_source('no such source')});
like(substr(slurp_file($router->logfile), $log_from), qr/STATEMENT:  .*pause_source\('no such source'\)/,
	'an admin\'s other failing statements are still logged with their statement');

$router->stop;
$shard->stop;
done_testing();
