# audit 0.6.0 storage, finding 1: any role that can create a view (here the
# application role, in its own schema) pins a partition of kept_payloads (or
# job_history) with a regclass constant: DROP TABLE then fails with "cannot
# drop table ... because other objects depend on it", which
# _drop_partitions does not catch, so the whole storage round rolls back
# every time (no partitions made ahead, no retention, no move of 0.5.0's
# rows); and since the worker's start runs that round outside its error
# recovery, a restarted worker exits at once, again and again: no webhook is
# fetched any more.
use strict;
use warnings;
use lib 'test/t';
use AuditNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $port = $ENV{WI_UPSTREAM_PORT} // 18080;
# Retention under two hours: partitions a minute wide, so one ends soon.
my $node = AuditNode::start('audit_pinned_partition', "webhook_ingest.retention = 90s\n");
$node->safe_psql('postgres', qq{
	SELECT webhook_ingest.add_source('s', 'http://127.0.0.1:$port/posts/{external_id}',
	                                 keep_payloads => '30 seconds');
	CREATE SCHEMA apps AUTHORIZATION app;
});
$node->poll_query_until('postgres', q{SELECT count(*) > 0 FROM webhook_ingest._partitions('webhook_ingest.kept_payloads')})
  or die 'no kept_payloads partition';
# The partition that ends first.
my ($part, $ends) = split /\|/, $node->safe_psql('postgres', q{
	SELECT name, extract(epoch FROM upper_bound - now())::int
	  FROM webhook_ingest._partitions('webhook_ingest.kept_payloads') ORDER BY upper_bound LIMIT 1});
$node->safe_psql('postgres', qq{CREATE VIEW apps.pin AS SELECT 'webhook_ingest.$part'::regclass AS r},
	extra_params => ['-U', 'app']);
note "pinned $part, which ends in $ends s";
sleep($ends + 3) if $ends > 0;
my $log_start = -s $node->logfile;
# The worker starts again (as after any restart of the server).
$node->restart;
AuditNode::wait_for_worker($node);
$node->safe_psql('postgres', q{SELECT webhook_ingest.enqueue('s', 'after-pin')});
ok($node->poll_query_until('postgres',
		q{SELECT state = 'done' FROM webhook_ingest.jobs WHERE external_id = 'after-pin'}),
	'a restarted worker still fetches webhooks while a partition is pinned');
my $log = slurp_file($node->logfile, $log_start);
unlike($log, qr/the worker of database "postgres" exited unexpectedly/, 'the worker does not exit over a partition it cannot drop');
ok($node->safe_psql('postgres', q{SELECT count(*) > 0 FROM webhook_ingest._partitions('webhook_ingest.job_history')
	WHERE upper_bound > now() + interval '2 minutes'}) eq 't',
	'partitions are still made ahead');
like($log, qr/WARNING:.*$part/, 'the pinned partition is named in a warning');
$node->stop;
done_testing();
