# Audit 15: one upstream that accepts TCP and never answers the TLS
# ClientHello stalls every other https source's fetches.  With PIPEWAIT a new
# https transfer waits (libcurl's PENDING list, global to the multi handle)
# for the first connection to its host to say whether it multiplexes; libcurl
# 7.88 wakes pending transfers one at a time, head first, so the healthy
# source's waiting transfers sit behind the stalled host's until those time
# out (timeout_ms, 30 s here), and many of them then fail too.
# Expected: a healthy HTTP/2 source's 200 jobs finish in seconds whatever
# another host does (here: within 10 s, all done at their first attempt).
use strict;
use warnings;
use Cwd qw(getcwd);
use IO::Socket::INET;
use Time::HiRes qw(time);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 'test/t';
use TlsUpstream;

my $top = getcwd();
my $base = $ENV{WI_AUDIT15_TLS_PORT_BASE} // 18481;
my %port = TlsUpstream::ports($base);
my $stall_port = $base + 9;
my $tls = PostgreSQL::Test::Utils::tempdir('tls');
my $nginx_up = 0;
sub nginx { return TlsUpstream::nginx($tls, \%port, @_); }

# The stalled upstream: accepts connections and never writes a byte.
my $listener = IO::Socket::INET->new(LocalAddr => "127.0.0.1:$stall_port", Listen => 1024, ReuseAddr => 1)
  or die "listen: $!";
my $stall_pid = fork();
if ($stall_pid == 0)
{
	my @held;
	while (my $c = $listener->accept) { push @held, $c; }
	exit 0;
}
close $listener;
END
{
	kill 'KILL', $stall_pid if $stall_pid;
	nginx('stop') if $nginx_up;
}
nginx('start') or BAIL_OUT('nginx did not start (test/tls/nginx.sh)');
$nginx_up = 1;
my $ca = slurp_file("$tls/ca.pem");
$ca =~ s/'/''/g;

my $node = PostgreSQL::Test::Cluster->new('stall');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
});
$node->start;
$node->safe_psql('postgres', qq{
	CREATE EXTENSION webhook_ingest;
	SELECT webhook_ingest.add_source('stalled', 'https://127.0.0.1:$stall_port/posts/{external_id}',
	                                 tls_ca => '$ca', max_attempts => 1, timeout_ms => 30000);
	SELECT webhook_ingest.add_source('healthy', 'https://127.0.0.1:$port{good}/posts/{external_id}',
	                                 tls_ca => '$ca', max_attempts => 1, timeout_ms => 30000);
	-- (the control reaches the same nginx by another name: its connection is not the one the test needs)
	SELECT webhook_ingest.add_source('control', 'https://localhost:$port{good}/posts/{external_id}',
	                                 tls_ca => '$ca', max_attempts => 1, timeout_ms => 30000);
});
$node->poll_query_until('postgres',
	q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'})
  or die 'the worker did not start';

# Control: a healthy source alone, from cold (a new connection).
$node->safe_psql('postgres', q{SELECT count(*) FROM generate_series(1, 200) i, webhook_ingest.enqueue('control', 'alone-' || i)});
my $t0 = time;
$node->poll_query_until('postgres', q{SELECT count(*) = 200 FROM webhook_ingest.jobs WHERE source = 'control' AND state IN ('done', 'dead')});
note(sprintf('a healthy source alone: 200 jobs in %.1f s', time - $t0));

# 200 fetches of the stalled host in flight, then 200 of the healthy one.
$node->safe_psql('postgres', q{SELECT count(*) FROM generate_series(1, 200) i, webhook_ingest.enqueue('stalled', 's-' || i)});
$node->poll_query_until('postgres', q{SELECT count(*) = 200 FROM webhook_ingest.jobs WHERE source = 'stalled' AND state = 'running'})
  or die 'the stalled fetches did not start';
$node->safe_psql('postgres', q{SELECT count(*) FROM generate_series(1, 200) i, webhook_ingest.enqueue('healthy', 'beside-' || i)});
$t0 = time;
my $finished = 0;
while (time - $t0 < 10)
{
	$finished = $node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.jobs
		WHERE source = 'healthy' AND external_id LIKE 'beside-%' AND state IN ('done', 'dead')});
	last if $finished == 200;
	select(undef, undef, undef, 0.2);
}
is($finished, 200, 'beside a stalled host, the healthy source\'s 200 jobs finish within 10 s');
$node->poll_query_until('postgres', q{SELECT count(*) = 200 FROM webhook_ingest.jobs
	WHERE source = 'healthy' AND external_id LIKE 'beside-%' AND state IN ('done', 'dead')});
note(sprintf('they took %.1f s', time - $t0));
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.jobs
	WHERE source = 'healthy' AND external_id LIKE 'beside-%' AND state = 'done'}), '200',
	'and all of them are done at their first attempt');
diag($node->safe_psql('postgres', q{SELECT state, left(last_error, 90), count(*) FROM webhook_ingest.jobs
	WHERE source = 'healthy' AND state <> 'done' GROUP BY 1, 2}));
$node->stop;
done_testing();
