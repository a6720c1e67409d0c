# Fetches through a proxy (issue 15): test/proxy.py on loopback addresses,
# nginx (test/tls/nginx.sh) on 127.0.0.1:18461-18466 for the http and https
# targets (WI_PROXY_TAP_PORT_BASE overrides 18461), test/upstream.py on
# 127.0.0.2:18469 for the no_proxy host (and, as it always listens there too,
# on 127.0.0.1:18471).  Proxies: A on 127.0.0.1:18467
# (webhook_ingest.proxy), B on 127.0.0.3:18468 (denied_networks has
# 127.0.0.3/32), C on 127.0.0.5:18470 (a source's own).
#   1. with webhook_ingest.proxy set, proxy A sees every fetch: each http one
#      as an absolute-form GET, the https ones as CONNECTs, one per
#      connection nginx saw;
#   2. a source with proxy => '' and a host in webhook_ingest.no_proxy are
#      fetched directly: the proxy's log does not move;
#   3. a source's own proxy wins over the setting;
#   4. the network guard checks the proxy's address: a proxy in
#      denied_networks is never connected to (the job is dead with the
#      guard's refusal, B's log stays empty, though B answers when asked); a
#      target URL naming a denied address is refused too, before the proxy.
use strict;
use warnings;
use Cwd qw(getcwd);
use IO::Socket::INET;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 'test/t';
use TlsUpstream;
use Time::HiRes qw(usleep);

my $top = getcwd();
my $base = $ENV{WI_PROXY_TAP_PORT_BASE} // 18461;
my %port = (good => $base, plain => $base + 5, proxy_a => $base + 6, proxy_b => $base + 7,
	upstream => $base + 8, proxy_c => $base + 9);
my $dir = PostgreSQL::Test::Utils::tempdir('proxy');
my $tls = "$dir/nginx";
my $nginx_up = 0;
my @children;

sub nginx { return TlsUpstream::nginx($tls, { TlsUpstream::ports($base), good => $port{good}, plain => $port{plain} }, @_); }

END
{
	kill 'TERM', $_ for @children;
	waitpid($_, 0) for @children;
	nginx('stop') if $nginx_up;
}

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
	my ($host, $p) = @_;
	for (1 .. 100)
	{
		my $s = IO::Socket::INET->new(PeerAddr => $host, PeerPort => $p, Proto => 'tcp');
		if ($s) { close $s; return 1; }
		usleep(100_000);
	}
	return 0;
}

nginx('start') or die('nginx did not start (test/tls/nginx.sh)');
$nginx_up = 1;
my %log = map { $_ => "$dir/$_.log" } qw(proxy_a proxy_b proxy_c);
spawn("$dir/proxy_a.out", 'python3', "$top/test/proxy.py", "127.0.0.1:$port{proxy_a}", $log{proxy_a});
spawn("$dir/proxy_b.out", 'python3', "$top/test/proxy.py", "127.0.0.3:$port{proxy_b}", $log{proxy_b});
spawn("$dir/proxy_c.out", 'python3', "$top/test/proxy.py", "127.0.0.5:$port{proxy_c}", $log{proxy_c});
spawn("$dir/upstream.out", 'python3', "$top/test/upstream.py", $base + 10, '0', "127.0.0.2:$port{upstream}");
wait_port('127.0.0.1', $port{proxy_a}) && wait_port('127.0.0.3', $port{proxy_b})
  && wait_port('127.0.0.5', $port{proxy_c}) && wait_port('127.0.0.2', $port{upstream})
  or die('a proxy or the upstream did not start');

sub lines
{
	my ($which, $re) = @_;
	return () unless -e $log{$which};
	return grep { $_ =~ $re } split /\n/, slurp_file($log{$which});
}

# nginx's access log: [connection, requests on it, port, protocol, ssl, status, uri]
sub requests { return TlsUpstream::requests($tls, @_); }
# One HTTP/1.1 request (target: a path, or an absolute URL for a proxy); the whole answer.
sub http_get
{
	my ($host, $p, $target) = @_;
	my $s = IO::Socket::INET->new(PeerAddr => $host, PeerPort => $p, Proto => 'tcp', Timeout => 10)
	  or die "cannot reach $host:$p: $!";
	print $s "GET $target HTTP/1.1\r\nHost: $host\r\nConnection: close\r\n\r\n";
	# (upstream.py ignores Connection: close; the end of the request stream closes it)
	$s->shutdown(1);
	local $SIG{ALRM} = sub { die "no answer from $host:$p within 10 s\n" };
	alarm 10;
	my $answer = join '', <$s>;
	alarm 0;
	close $s;
	return $answer;
}
sub lit { my $s = shift; $s =~ s/'/''/g; return "'$s'"; }
my $ca = lit(slurp_file("$tls/ca.pem"));

my $node = PostgreSQL::Test::Cluster->new('proxy');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.backoff_base = 50ms
webhook_ingest.backoff_max = 200ms
webhook_ingest.connect_timeout = 5s
webhook_ingest.proxy = 'http://127.0.0.1:$port{proxy_a}'
webhook_ingest.no_proxy = '127.0.0.2'
webhook_ingest.denied_networks = '127.0.0.3/32'
});
$node->start;
my $plain = "http://127.0.0.1:$port{plain}/posts/{external_id}";
my $https = "https://127.0.0.1:$port{good}/posts/{external_id}";
$node->safe_psql('postgres', qq{
	CREATE EXTENSION webhook_ingest;
	SELECT webhook_ingest.add_source('via_http', '$plain', max_attempts => 1);
	SELECT webhook_ingest.add_source('via_https', '$https', max_attempts => 1, tls_ca => $ca);
	SELECT webhook_ingest.add_source('direct', '$plain', max_attempts => 1, proxy => '');
	SELECT webhook_ingest.add_source('direct_tls', '$https', max_attempts => 1, tls_ca => $ca, proxy => '');
	SELECT webhook_ingest.add_source('no_proxy_host', 'http://127.0.0.2:$port{upstream}/posts/{external_id}',
	                                 max_attempts => 1);
	SELECT webhook_ingest.add_source('own_proxy', '$plain', max_attempts => 1,
	                                 proxy => 'http://127.0.0.5:$port{proxy_c}');
	SELECT webhook_ingest.add_source('denied_proxy', '$plain', max_attempts => 1,
	                                 proxy => 'http://127.0.0.3:$port{proxy_b}');
	SELECT webhook_ingest.add_source('denied_proxy_tls', '$https', max_attempts => 1, tls_ca => $ca,
	                                 proxy => 'http://127.0.0.3:$port{proxy_b}');
	SELECT webhook_ingest.add_source('denied_target', 'http://127.0.0.3:$port{upstream}/posts/{external_id}',
	                                 max_attempts => 1);
});
$node->poll_query_until('postgres',
	q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'})
  or die 'the worker did not start';

sub run_jobs
{
	my ($source, $prefix, $n) = @_;
	$node->safe_psql('postgres', qq{
		SELECT count(*) FROM generate_series(1, $n) i, webhook_ingest.enqueue('$source', '$prefix-' || i) e});
	$node->poll_query_until('postgres', qq{
		SELECT count(*) = $n FROM webhook_ingest.jobs
		 WHERE source = '$source' AND external_id LIKE '$prefix-%' AND state IN ('done', 'dead', 'cancelled')})
	  or diag("$source: jobs not finished");
	return $node->safe_psql('postgres', qq{
		SELECT string_agg(state || ' ' || n, ', ' ORDER BY state) FROM
		  (SELECT state::text, count(*) n FROM webhook_ingest.jobs
		    WHERE source = '$source' AND external_id LIKE '$prefix-%' GROUP BY state) s});
}

sub last_error
{
	my ($source) = @_;
	return $node->safe_psql('postgres', qq{SELECT last_error FROM webhook_ingest.jobs WHERE source = '$source'
		ORDER BY id DESC LIMIT 1});
}

# ---- 1. webhook_ingest.proxy: every fetch through it ----

is(run_jobs('via_http', 'vh', 20), 'done 20', 'http through the proxy: 20 jobs done');
my @got = lines('proxy_a', qr{^GET http://127\.0\.0\.1:$port{plain}/posts/vh-\d+$});
is(scalar(@got), 20, 'the proxy logged each of the 20 http fetches as an absolute-form GET');
is(scalar(requests(qr{^/posts/vh-\d+$})), 20, 'and nginx served them');

is(run_jobs('via_https', 'vs', 20), 'done 20', 'https through the proxy: 20 jobs done');
my @tunnels = lines('proxy_a', qr{^CONNECT 127\.0\.0\.1:$port{good}$});
my @served = requests(qr{^/posts/vs-\d+$});
my %conns = map { $_->{conn} => 1 } @served;
is(scalar(@served), 20, 'nginx served the 20 https fetches');
cmp_ok(scalar(@tunnels), '>=', 1, 'the proxy logged CONNECTs to the https port: ' . scalar(@tunnels));
is(scalar(@tunnels), scalar(keys %conns), 'one per connection nginx saw: every https fetch went through the proxy');
is(scalar(lines('proxy_a', qr{refused})), 0, 'the proxy refused nothing');

# ---- 2. proxy => '' and no_proxy: direct ----

my $before = scalar(lines('proxy_a', qr{.}));
is(run_jobs('direct', 'dh', 5), 'done 5', "proxy => '': done");
is(run_jobs('direct_tls', 'ds', 5), 'done 5', "proxy => '' over https: done");
is(scalar(requests(qr{^/posts/d[hs]-\d+$})), 10, 'nginx served them');
is(run_jobs('no_proxy_host', 'np', 5), 'done 5', 'a host in webhook_ingest.no_proxy: done');
is(scalar(lines('proxy_a', qr{.})), $before, 'the proxy saw none of these');
like(http_get('127.0.0.2', $port{upstream}, '/stats'), qr/"listener 127\.0\.0\.2:$port{upstream}": 6, "posts": 5\b/,
	'the no_proxy host got the 5 requests itself (and this /stats)');

# ---- 3. a source's own proxy ----

$before = scalar(lines('proxy_a', qr{.}));
is(run_jobs('own_proxy', 'op', 3), 'done 3', "a source's own proxy: done");
is(scalar(lines('proxy_c', qr{^GET http://127\.0\.0\.1:$port{plain}/posts/op-\d+$})), 3, 'through it');
is(scalar(lines('proxy_a', qr{.})), $before, 'not through webhook_ingest.proxy');

# ---- 4. the network guard and the proxy's address ----

is(run_jobs('denied_proxy', 'dp', 1), 'dead 1', 'a proxy in denied_networks: dead');
like(last_error('denied_proxy'), qr/connection to 127\.0\.0\.3 refused by webhook_ingest\.denied_networks \(127\.0\.0\.3\/32\)/,
	"last_error: the guard's refusal of the proxy's address");
is(run_jobs('denied_proxy_tls', 'dpt', 1), 'dead 1', 'the same for an https target');
like(last_error('denied_proxy_tls'), qr/connection to 127\.0\.0\.3 refused by webhook_ingest\.denied_networks/,
	"last_error: the guard's refusal");
is(scalar(requests(qr{^/posts/dpt?-1$})), 0, 'nginx got neither');
$before = scalar(lines('proxy_a', qr{.}));
is(run_jobs('denied_target', 'dt', 1), 'dead 1', 'a target URL naming a denied address, through the allowed proxy: dead');
like(last_error('denied_target'), qr/connection to 127\.0\.0\.3 refused by webhook_ingest\.denied_networks/,
	"last_error: the guard's refusal");
is(scalar(lines('proxy_a', qr{.})), $before, 'the allowed proxy was not asked for it');
ok(!-s $log{proxy_b}, 'the denied proxy logged nothing: it was never connected to');
# ... though it answers and logs when asked
like(http_get('127.0.0.3', $port{proxy_b}, "http://127.0.0.1:$port{plain}/posts/probe"), qr{^HTTP/1\.1 200 }, 'proxy B answers a request sent to it directly');
is(scalar(lines('proxy_b', qr{^GET http://127\.0\.0\.1:$port{plain}/posts/probe$})), 1, 'and logs it');

$node->stop;
done_testing();
