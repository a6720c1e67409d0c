# audit 0.6.0 storage, finding 3: the application's own wait_for_job() (or
# any reader of the jobs view left in its transaction) holds ACCESS SHARE on
# job_history and its partitions; CREATE TABLE ... PARTITION OF next to a
# DEFAULT partition needed ACCESS EXCLUSIVE there, so under lock_timeout the
# worker skipped the partition, round after round, and once the partitions
# made ahead ran out, done jobs landed in the DEFAULT for good.  Now a
# partition is made alone and attached (SHARE UPDATE EXCLUSIVE on the
# parent, no DEFAULT), and a waiter holds no lock while it sleeps (TAP 045):
# the late job's row is in a partition of job_history, not in the overflow.
# Takes about four minutes (partitions a minute wide, three made ahead).
use strict;
use warnings;
use lib 'test/t';
use AuditNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $port = $ENV{WI_UPSTREAM_PORT} // 18080;
my $node = AuditNode::start('audit_waiter_partitions', "webhook_ingest.retention = 90s\n");
$node->safe_psql('postgres', qq{
	SELECT webhook_ingest.add_source('held', 'http://127.0.0.1:$port/posts/{external_id}');
	SELECT webhook_ingest.pause_source('held');
	SELECT webhook_ingest.add_source('s', 'http://127.0.0.1:$port/posts/{external_id}');
});
my $held = $node->safe_psql('postgres', q{SELECT job_id FROM webhook_ingest.enqueue('held', 'h1')});
$node->poll_query_until('postgres', q{SELECT count(*) >= 3 FROM webhook_ingest._partitions('webhook_ingest.job_history')})
  or die 'no partitions';
my $ahead = $node->safe_psql('postgres', q{
	SELECT ceil(extract(epoch FROM max(upper_bound) - now()))::int FROM webhook_ingest._partitions('webhook_ingest.job_history')});
# The application waits for its job, as it does all day (one waiter at a
# time would do; here one long wait).
my $app = $node->background_psql('postgres', on_error_stop => 0, extra_params => ['-U', 'app'],
	timeout => $ahead + 300);    # (it lives past the default timeout of 180 s)
$app->query_until(qr/waiting/, "\\echo waiting\nSELECT webhook_ingest.wait_for_job($held, '10 minutes');\n");
note "the partitions made ahead end in $ahead s";
sleep($ahead + 5);
$node->safe_psql('postgres', q{SELECT webhook_ingest.enqueue('s', 'late')});
$node->poll_query_until('postgres', q{SELECT state = 'done' FROM webhook_ingest.jobs WHERE external_id = 'late'})
  or die 'the late job was not done';
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.job_history WHERE external_id = 'late'}), '1',
	'a done job lands in a partition while the application waits for another job');
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.job_history_overflow}), '0',
	'  and nothing in the overflow table');
# (the application's wait ends as it would: its job is done)
$node->safe_psql('postgres', q{SELECT webhook_ingest.resume_source('held')});
$node->poll_query_until('postgres', qq{SELECT state = 'done' FROM webhook_ingest.jobs WHERE id = $held})
  or die 'the held job was not done';
$app->quit;
$node->stop;
done_testing();
