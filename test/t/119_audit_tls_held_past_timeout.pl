# Audit 0.7.0 (second pass), finding H1 (test/audit/FINDINGS-0.7.0-second.md):
# a fetch that h2_pacing.c holds back for its https origin (one probe at a
# time while the origin's protocol is unknown, then as connections have
# room) had no deadline of its own: its timeout_ms was looked at only when
# the origin next had room.  Behind a longer fetch of the same origin (a
# source with a longer timeout_ms, a slow answer, a handshake that stalls)
# it waited as long as that one, however short its own timeout.
# Here the origin accepts TCP and never answers the TLS handshake (as in
# TAP 110); connect_timeout is 8 s.  A source with timeout_ms 20 s has one
# fetch in flight (the origin's probe, stalled in its handshake) when a
# source of the same origin with timeout_ms 1 s gets 3 jobs, which are held.
# Expected: those end (timed out) within about their second, not when the
# probe gives up 8 s later.
use strict;
use warnings;
use IO::Socket::INET;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $stall_port = $ENV{WI_AUDIT119_PORT} // 18961;
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
END { kill 'KILL', $stall_pid if $stall_pid; }

my $node = PostgreSQL::Test::Cluster->new('held_timeout');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 1s
webhook_ingest.connect_timeout = 8s
log_statement = 'none'
});
$node->start;
my $url = "https://127.0.0.1:$stall_port/posts/{external_id}";
$node->safe_psql('postgres', qq{
	CREATE EXTENSION webhook_ingest;
	SELECT webhook_ingest.add_source('slow', '$url', timeout_ms => 20000, max_attempts => 1);
	SELECT webhook_ingest.add_source('quick', '$url', timeout_ms => 1000, max_attempts => 1);
});
$node->poll_query_until('postgres',
	q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'})
  or die 'the worker did not start';
my $slow = $node->safe_psql('postgres', q{SELECT job_id FROM webhook_ingest.enqueue('slow', 's1')});
$node->poll_query_until('postgres', qq{SELECT state = 'running' FROM webhook_ingest.jobs WHERE id = $slow})
  or die 'the slow fetch did not start';
my $t0 = time;
$node->safe_psql('postgres', q{SELECT count(*) FROM generate_series(1, 3) i, webhook_ingest.enqueue('quick', 'q' || i)});
$node->poll_query_until('postgres', q{SELECT count(*) = 3 FROM webhook_ingest.jobs WHERE source = 'quick' AND state = 'dead'})
  or die 'the quick jobs did not end';
my $took = time - $t0;
note(sprintf('the 3 held fetches with timeout_ms 1 s ended %.1f s after they were enqueued', $took));
cmp_ok($took, '<', 4, 'held fetches end at their own timeout, not when the origin next has room');
like($node->safe_psql('postgres', q{SELECT min(last_error) FROM webhook_ingest.jobs WHERE source = 'quick'}),
	qr/Timeout was reached/, '  as timed out');
ok($node->poll_query_until('postgres', qq{SELECT state = 'dead' FROM webhook_ingest.jobs WHERE id = $slow}),
	'the stalled probe itself ends at connect_timeout');
$node->stop;
done_testing();
