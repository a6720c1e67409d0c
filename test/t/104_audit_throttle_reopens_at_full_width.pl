# sched-attack finding S2 (issue 11, item 3): when a source's throttle ends,
# the next claim gives it every free slot at once.  An upstream that is
# still throttling (its Retry-After was short, or it answers every request
# with 429 and Retry-After: 1) then gets as many requests as there are due
# jobs, up to max_concurrent_requests, once per throttle - and every one of
# them is charged an attempt, so a backlog dies of max_attempts within
# seconds while the upstream asked us to wait.  Seen with the defaults
# against a hostile upstream: 9 204 requests in 11 s (3 000 jobs, 4 attempts
# each).  After a throttle the source now sends one request, and opens up
# again only once a response does not throttle it.
# Seen failing: 1 200 fetches in 4 s (300 jobs, 4 attempts each).
use strict;
use warnings;
use lib 'test/t';
use AuditNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = AuditNode::start('audit_reopen', "webhook_ingest.backoff_base = 1s\nwebhook_ingest.backoff_max = 1s\n");
$node->safe_psql('postgres', q{
	SELECT webhook_ingest.add_source('hostile', 'http://127.0.0.1:18080/throttled/{external_id}', max_attempts => 100);
	SELECT webhook_ingest.add_source('fine', 'http://127.0.0.1:18080/posts/{external_id}');
	SELECT count(*) FROM generate_series(1, 300) g, webhook_ingest.enqueue('hostile', 'h' || g);
});
# The first claim knows nothing yet: its 300 fetches all meet the 429.
$node->poll_query_until('postgres', q{
	SELECT throttled_until IS NOT NULL FROM webhook_ingest.queue_stats WHERE source = 'hostile'})
  or die 'the source was not throttled';
usleep(4_000_000);
my $fetches = $node->safe_psql('postgres',
	q{SELECT sum(attempts) FROM webhook_ingest.jobs WHERE source = 'hostile'});
cmp_ok($fetches, '<=', 300 + 10,
	"after the first throttle, an upstream that keeps throttling gets about one request per throttle ($fetches fetches in 4 s)");
is($node->safe_psql('postgres', q{SELECT max(attempts) FROM webhook_ingest.jobs WHERE source = 'hostile'}), '2',
	'no job was charged more than its first attempt and one probe');

# Other sources are not held back meanwhile.
$node->safe_psql('postgres', q{SELECT webhook_ingest.enqueue('fine', 'f1')});
$node->poll_query_until('postgres', q{SELECT state = 'done' FROM webhook_ingest.jobs WHERE external_id = 'f1'})
  or die 'the other source was held back';
pass('another source is served while the hostile one is throttled');

# A response that does not throttle opens the source again: the rest go at once.
$node->safe_psql('postgres', q{
	SELECT webhook_ingest.alter_source('hostile', url_template => 'http://127.0.0.1:18080/posts/{external_id}')});
ok($node->poll_query_until('postgres', q{
	SELECT count(*) = 0 FROM webhook_ingest.jobs WHERE source = 'hostile' AND state <> 'done'}),
	'once the upstream stops throttling, the backlog drains');
$node->stop;
done_testing();
