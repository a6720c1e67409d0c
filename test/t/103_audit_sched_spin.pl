# sched-attack finding S1 (issue 11): the worker spins, issuing claims with a
# zero wait, while a rate-limited source is held back by something other
# than its bucket.  wi_sched_wait_ms() calls for a claim once a backlogged
# source's bucket "has a token", but the bucket is refilled only for a
# source that may fetch (allowance()): a paused source's bucket is never
# refilled, so the wait stays 0 until it is resumed.  And for a rate_limit
# below about 1e-13 per second (which _check_limits accepted then) the time
# to the next token overflowed TimestampTz and wrapped into the past: 0
# again (now refused below 0.001/s, and the wait is capped at a day).
# Seen failing: about 1.2-1.5 s of worker CPU per 3 s and some 50 000
# empty claim transactions a second, in both cases.
use strict;
use warnings;
use lib 'test/t';
use AuditNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = AuditNode::start('audit_spin');
my $pid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'});

# The worker's CPU time (user + system), in ms, over 3 s.
sub worker_cpu_ms
{
	my $read = sub {
		my @f = split ' ', (slurp_file("/proc/$pid/stat") =~ s/^.*\) //sr);
		return ($f[11] + $f[12]) * 1000 / 100;	# utime, stime in ticks of 1/100 s
	};
	my $before = $read->();
	usleep(3_000_000);
	return $read->() - $before;
}

my $idle = worker_cpu_ms();
diag("an idle worker: $idle ms of CPU in 3 s");

# A rate-limited source with a backlog: one fetch a second.  Paused after
# its first fetch, its bucket is empty and stays so.
$node->safe_psql('postgres', q{
	SELECT webhook_ingest.add_source('limited', 'http://127.0.0.1:18080/posts/{external_id}', rate_limit => 1);
	SELECT count(*) FROM generate_series(1, 20) g, webhook_ingest.enqueue('limited', 'l' || g);
});
$node->poll_query_until('postgres', q{SELECT count(*) > 0 FROM webhook_ingest.jobs WHERE state = 'done'})
  or die 'the limited source fetched nothing';
$node->safe_psql('postgres', q{SELECT webhook_ingest.pause_source('limited')});
usleep(300_000);
my $paused = worker_cpu_ms();
cmp_ok($paused, '<', 300, "a paused rate-limited source with a backlog does not make the worker spin ($paused ms of CPU in 3 s)");
$node->safe_psql('postgres', q{
	SELECT webhook_ingest.resume_source('limited');
	SELECT webhook_ingest.alter_source('limited', reset_limits => true);
});
$node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM webhook_ingest.jobs WHERE state <> 'done'})
  or die 'the limited source did not drain';

# A very low rate (the lowest allowed, 0.001/s): the first fetch takes the only
# token, the next is 1 000 s away.  Lower rates are refused (the time to the
# next token could overflow).
my ($ret) = $node->psql('postgres',
	q{SELECT webhook_ingest.add_source('lower', 'http://127.0.0.1:18080/posts/{external_id}', rate_limit => 1e-14)});
isnt($ret, 0, 'a rate_limit of 1e-14 is refused');
$node->safe_psql('postgres', q{
	SELECT webhook_ingest.add_source('low', 'http://127.0.0.1:18080/posts/{external_id}', rate_limit => 0.001);
	SELECT count(*) FROM generate_series(1, 5) g, webhook_ingest.enqueue('low', 'm' || g);
});
$node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM webhook_ingest.jobs WHERE source = 'low' AND state = 'done'})
  or die 'the first fetch at a low rate did not happen';
usleep(300_000);
my $low = worker_cpu_ms();
cmp_ok($low, '<', 300, "a source with rate_limit 0.001 does not make the worker spin ($low ms of CPU in 3 s)");
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.jobs WHERE state = 'pending'}), '4',
	'nor does it fetch more than its one token');
$node->stop;
done_testing();
