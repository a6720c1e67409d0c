# Audit 15: through a proxy the worker refuses a URL that names a denied
# address literally (http.c literal_target_allowed), but not the same address
# written with a trailing dot ("127.0.0.3."), which is still that address:
# the request is sent to the proxy, which is asked to connect to the denied
# address.  Expected: refused before any byte goes to the proxy, as for
# "127.0.0.3".  (test/proxy.py itself refuses the odd host with 403; a
# proxy that resolves it would connect.)
use strict;
use warnings;
use Cwd qw(getcwd);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $top = getcwd();
my $pport = $ENV{WI_AUDIT15_PROXY_PORT} // 18471;
my $dir = PostgreSQL::Test::Utils::tempdir('proxy');
my $plog = "$dir/proxy.log";
my $ppid = fork();
if ($ppid == 0)
{
	exec('python3', "$top/test/proxy.py", "127.0.0.1:$pport", $plog) or die "exec: $!";
}
END { kill 'TERM', $ppid if $ppid; }
for (1 .. 100) { last if -e $plog || IO::Socket::INET->new(PeerAddr => "127.0.0.1:$pport"); select(undef, undef, undef, 0.1); }
use IO::Socket::INET;

my $node = PostgreSQL::Test::Cluster->new('proxy_dot');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.denied_networks = '127.0.0.3/32, 169.254.0.0/16'
webhook_ingest.proxy = 'http://127.0.0.1:$pport'
});
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION webhook_ingest;
	SELECT webhook_ingest.add_source('bare', 'http://127.0.0.3:18083/posts/{external_id}', max_attempts => 1);
	SELECT webhook_ingest.add_source('dot', 'http://127.0.0.3.:18083/posts/{external_id}', max_attempts => 1);
	SELECT webhook_ingest.add_source('dot_tls', 'https://127.0.0.3.:18443/posts/{external_id}', max_attempts => 1);
	SELECT webhook_ingest.enqueue(s, '1') FROM unnest(ARRAY['bare', 'dot', 'dot_tls']) s;
});
$node->poll_query_until('postgres', q{SELECT count(*) = 3 FROM webhook_ingest.jobs WHERE state IN ('done', 'dead')})
  or die 'jobs did not finish';
my %err = split /\|/, $node->safe_psql('postgres',
	q{SELECT string_agg(source || '|' || coalesce(last_error, ''), '|') FROM webhook_ingest.jobs});
like($err{bare}, qr/refused by webhook_ingest\.denied_networks/, '127.0.0.3 through the proxy: refused (holds)');
like($err{dot}, qr/refused by webhook_ingest\.denied_networks/, '127.0.0.3. through the proxy: refused too');
like($err{dot_tls}, qr/refused by webhook_ingest\.denied_networks/, 'https://127.0.0.3.: refused too');
my $sent = -e $plog ? slurp_file($plog) : '';
is($sent, '', 'nothing was sent to the proxy') or diag("proxy log:\n$sent");
$node->stop;
done_testing();
