# A wait_for_job() caller holds no lock on the job history while it sleeps:
# each lookup runs in a subtransaction rolled back at once.  Otherwise every
# waiter (the application calls wait_for_job after each enqueue) would hold
# ACCESS SHARE on job_history and all its partitions for up to its timeout,
# and the worker could never drop a partition past retention while anyone
# waits (audit of 0.6.0's storage, finding 3).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('waiter');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.database = 'postgres'
webhook_ingest.poll_interval = 50ms
});
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION webhook_ingest;
	SELECT webhook_ingest.add_source('held', 'http://127.0.0.1:18080/posts/{external_id}');
	SELECT webhook_ingest.pause_source('held');
});
ok($node->poll_query_until('postgres',
		q{SELECT count(*) > 0 FROM webhook_ingest._partitions('webhook_ingest.job_history')}),
	'the worker made the history partitions');
my $job = $node->safe_psql('postgres', q{SELECT job_id FROM webhook_ingest.enqueue('held', 'h1')});

my $waiter = $node->background_psql('postgres');
$waiter->query_safe(q{SELECT pg_backend_pid() AS pid \gset});
my $pid = $waiter->query_safe(q{SELECT :pid});
$waiter->query_until(qr/waiting/, qq{\\echo waiting\nSELECT webhook_ingest.wait_for_job($job, '20 s');\n});
ok($node->poll_query_until('postgres',
		qq{SELECT query LIKE '%wait_for_job%' AND state = 'active' FROM pg_stat_activity WHERE pid = $pid}),
	"the waiter (pid $pid) is in wait_for_job");
sleep 1;    # several lookups and sleeps
is($node->safe_psql('postgres', qq{
	SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
	 WHERE l.pid = $pid AND c.relnamespace = 'webhook_ingest'::regnamespace
	   AND (c.relname LIKE 'job_history%' OR c.relname LIKE 'kept_payloads%' OR c.relname = 'jobs_legacy')}),
	'0', '  and holds no lock on the history, the kept payloads or jobs_legacy');
is($node->safe_psql('postgres', qq{
	SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
	 WHERE l.pid = $pid AND c.relnamespace = 'webhook_ingest'::regnamespace AND c.relname LIKE 'queue%'}),
	'0', '  nor on the queue and its indexes (a REINDEX of it would queue every enqueue behind the waiter)');
my ($ret, $out, $err) = $node->psql('postgres', q{
	BEGIN;
	SET LOCAL lock_timeout = '200ms';
	LOCK TABLE webhook_ingest.job_history IN ACCESS EXCLUSIVE MODE;
	ROLLBACK;});
is($ret, 0, '  so the lock that dropping a partition needs is granted while it waits');

# A partition dropped while it waits (past its fifth lookup, when a kept
# plan would have gone generic and named the partitions of its time).
sleep 6;
is($node->safe_psql('postgres', q{
	SELECT webhook_ingest._drop_partition(max(name)) FROM webhook_ingest._partitions('webhook_ingest.job_history')}),
	'dropped', 'a partition is dropped while the waiter waits');
$node->safe_psql('postgres', q{SELECT webhook_ingest.resume_source('held')});
ok($node->poll_query_until('postgres', qq{SELECT state = 'idle' FROM pg_stat_activity WHERE pid = $pid}),
	'  the waiter returns once its job is done');
unlike(slurp_file($node->logfile), qr/could not open relation/, '  and its lookups never met the dropped partition');
$waiter->quit;
$node->stop;
done_testing();
