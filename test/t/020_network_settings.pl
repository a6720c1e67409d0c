# webhook_ingest.denied_networks and allowed_networks in postgresql.conf: a
# list that is not CIDRs keeps the server from starting (it would otherwise
# run with the default, which for allowed_networks means "anywhere"); on a
# reload a bad list is refused and the previous one stays in force.
# No traffic: the worker is off.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('net_settings');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.enabled = off
webhook_ingest.allowed_networks = '10.0.0.0/33'
});
my $started = $node->start(fail_ok => 1);
ok(!$started, 'the server does not start with an allowed_networks that is not a list of CIDRs');
my $log = slurp_file($node->logfile);
like($log, qr/DETAIL:  "10\.0\.0\.0\/33" is not a network in CIDR notation/, 'the log names the bad entry');
like($log, qr/FATAL:  invalid value for parameter "webhook_ingest\.allowed_networks": "10\.0\.0\.0\/33"/,
	'and the setting');

$node->append_conf('postgresql.conf', qq{
webhook_ingest.allowed_networks = '127.0.0.1/32, ::1'
webhook_ingest.denied_networks = '127.0.0.3/32'
});
$node->start;
is($node->safe_psql('postgres', 'SHOW webhook_ingest.allowed_networks'), '127.0.0.1/32, ::1',
	'a good list is taken at start');

my $offset = -s $node->logfile;
$node->append_conf('postgresql.conf', qq{
webhook_ingest.denied_networks = '127.0.0.3/32, 127.0.0.4/40'
});
$node->reload;
$node->wait_for_log(qr/invalid value for parameter "webhook_ingest\.denied_networks"/, $offset);
like(slurp_file($node->logfile, $offset), qr/DETAIL:  "127\.0\.0\.4\/40" is not a network in CIDR notation/,
	'a bad list on reload is refused, naming the bad entry');
is($node->safe_psql('postgres', 'SHOW webhook_ingest.denied_networks'), '127.0.0.3/32',
	'and the previous list stays in force');

# webhook_ingest.proxy: a proxy the worker cannot use would leave the server
# fetching directly, past the proxy the operator meant as the egress barrier:
# the server does not start; on a reload the previous proxy stays.
$node->stop;
$node->append_conf('postgresql.conf', qq{
webhook_ingest.denied_networks = '127.0.0.3/32'
webhook_ingest.proxy = 'ftp://127.0.0.1:3128'
});
$offset = -s $node->logfile;
$started = $node->start(fail_ok => 1);
ok(!$started, 'the server does not start with a proxy it cannot use');
like(slurp_file($node->logfile, $offset), qr/FATAL:  invalid value for parameter "webhook_ingest\.proxy"/,
	'the log names the setting');
$node->append_conf('postgresql.conf', qq{
webhook_ingest.proxy = 'http://127.0.0.1:3128'
});
$node->start;
is($node->safe_psql('postgres', 'SHOW webhook_ingest.proxy'), 'http://127.0.0.1:3128', 'a good proxy is taken at start');
$offset = -s $node->logfile;
$node->append_conf('postgresql.conf', qq{
webhook_ingest.proxy = 'http://user:pw\@127.0.0.1:3128'
});
$node->reload;
$node->wait_for_log(qr/invalid value for parameter "webhook_ingest\.proxy"/, $offset);
is($node->safe_psql('postgres', 'SHOW webhook_ingest.proxy'), 'http://127.0.0.1:3128',
	'a bad proxy on reload is refused and the previous one stays in force');

$node->stop;
done_testing();
