# Stress: 8 clients deliver webhooks for 20 objects with event ids drawn from
# a small pool (so most are redeliveries) while other clients claim and finish
# jobs the way the worker does.  No client may see an error (no unique
# violation, no deadlock), and the books must balance afterwards.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('stress');
$node->init;
# Intake alone: the worker serves app but claims nothing.
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.database = 'app'
webhook_ingest.enabled = off
max_connections = 40
});
$node->start;

$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', q{
	CREATE EXTENSION webhook_ingest;
	SELECT webhook_ingest.add_source('stress', 'http://127.0.0.1:9/o/{external_id}');
	-- the partition the worker's storage round would have made (it is off here)
	SELECT webhook_ingest._ensure_partitions('webhook_ingest.job_history', now(), now() + interval '1 day');
	CREATE TABLE stress_log (ev text, outcome text);
});

$node->pgbench(
	'--no-vacuum --client=8 --jobs=2 --transactions=1500',
	0,
	[qr{processed: 12000/12000}],
	[qr{^$}],
	'concurrent webhooks, claims and finishes: no client error',
	{
		'001_webhook@8' => q{
\set obj random(1, 20)
\set ev random(1, 3000)
INSERT INTO stress_log SELECT 'ev-' || :ev, outcome
  FROM webhook_ingest.enqueue('stress', 'obj-' || :obj, NULL, 'ev-' || :ev);
},
		'002_webhook_no_event@1' => q{
\set obj random(1, 20)
INSERT INTO stress_log SELECT NULL, outcome FROM webhook_ingest.enqueue('stress', 'obj-' || :obj);
},
		# the worker's claim, and its finish: back to pending if a webhook came
		# meanwhile, else out of the queue into job_history (src/worker/complete.c)
		'003_worker@2' => q{
WITH due AS (
	SELECT id FROM webhook_ingest.queue
	 WHERE state = 'pending' AND next_attempt_at <= now()
	 ORDER BY next_attempt_at LIMIT 5 FOR UPDATE SKIP LOCKED)
UPDATE webhook_ingest.queue j SET state = 'running', attempts = j.attempts + 1, refetch = false
  FROM due WHERE j.id = due.id;
WITH fin AS (
	SELECT id FROM webhook_ingest.queue WHERE state = 'running'
	 LIMIT 5 FOR NO KEY UPDATE SKIP LOCKED),
again AS (
	UPDATE webhook_ingest.queue j SET state = 'pending', refetch = false
	  FROM fin WHERE j.id = fin.id AND j.refetch
	RETURNING j.id),
gone AS (
	DELETE FROM webhook_ingest.queue j USING fin WHERE j.id = fin.id AND NOT j.refetch
	RETURNING j.*)
INSERT INTO webhook_ingest.job_history (id, finished_at, created_at, started_at, source_id, events, attempts,
                                        last_status, external_id)
SELECT g.id, now(), g.created_at, g.started_at, s.id, g.events, g.attempts, 200, g.external_id
  FROM gone g JOIN webhook_ingest.sources s ON s.name = g.source;
},
	},
	'app');

is($node->safe_psql('app', q{
	SELECT count(*) FROM (SELECT ev FROM stress_log WHERE outcome <> 'duplicate' AND ev IS NOT NULL
	                       GROUP BY ev HAVING count(*) > 1) s}),
	'0', 'each event id accepted at most once');
is($node->safe_psql('app', q{
	SELECT (SELECT count(DISTINCT ev) FROM stress_log WHERE ev IS NOT NULL)
	     = (SELECT count(*) FROM webhook_ingest.events WHERE source = 'stress')}),
	't', 'every event id delivered is remembered exactly once');
ok($node->safe_psql('app', q{SELECT count(*) FROM stress_log WHERE outcome = 'duplicate'}) > 0,
	'redeliveries were seen as duplicates');
is($node->safe_psql('app', q{
	SELECT count(*) FROM (SELECT external_id FROM webhook_ingest.jobs
	                       WHERE state IN ('pending', 'running')
	                       GROUP BY external_id HAVING count(*) > 1) s}),
	'0', 'never more than one active job per object');
is($node->safe_psql('app', q{
	SELECT count(*) FROM webhook_ingest.jobs WHERE refetch AND state <> 'running'}),
	'0', 'only running jobs carry a refetch flag');

# Every accepted webhook is served by exactly one job: the jobs' webhook
# counts add up to the accepted deliveries (with and without event ids).
my $accepted = $node->safe_psql('app', q{SELECT count(*) FROM stress_log WHERE outcome <> 'duplicate'});
my $absorbed = $node->safe_psql('app', q{SELECT sum(events) FROM webhook_ingest.jobs WHERE source = 'stress'});
is($absorbed, $accepted, 'the jobs absorbed exactly the accepted webhooks');
my $outcomes = $node->safe_psql('app', q{SELECT string_agg(DISTINCT outcome, ',' ORDER BY outcome) FROM stress_log});
is($outcomes, 'coalesced,duplicate,queued,requeued', 'all four outcomes occurred under load');

$node->stop;
done_testing();
