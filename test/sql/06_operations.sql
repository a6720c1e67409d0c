-- Operating from SQL: retry, retry_dead, cancel, pause_source, resume_source,
-- the monitoring views, wait_for_job and wait_replayed.  The worker claims
-- nothing here (webhook_ingest.enabled = off); its steps are played by hand
-- with the statements it runs.
\set VERBOSITY default
\set SHOW_CONTEXT never

SELECT webhook_ingest.add_source('ops', 'http://127.0.0.1:9/o/{external_id}');
SELECT webhook_ingest.add_source('ops2', 'http://127.0.0.1:9/p/{external_id}');
SELECT job_id AS j1 FROM webhook_ingest.enqueue('ops', 'a') \gset
SELECT job_id AS j2 FROM webhook_ingest.enqueue('ops', 'b') \gset
SELECT job_id AS j3 FROM webhook_ingest.enqueue('ops', 'c') \gset

-- cancel: a pending job is called off, once; a finished one is not
SELECT webhook_ingest.cancel(:j1);
SELECT state, finished_at IS NOT NULL AS finished, last_error FROM webhook_ingest.jobs WHERE id = :j1;
SELECT webhook_ingest.cancel(:j1);
-- the object is free again: a new webhook queues a new job
SELECT outcome, job_id <> :j1 AS new_job FROM webhook_ingest.enqueue('ops', 'a');
-- retry of the cancelled job now meets the active one: false, with a notice
SELECT webhook_ingest.retry(:j1);

-- a running job (claimed as the worker claims) can be cancelled; the
-- worker's guarded finish then changes nothing
UPDATE webhook_ingest.jobs SET state = 'running', attempts = attempts + 1,
       lease_until = now() + interval '1 minute', started_at = now()
 WHERE id = :j2;
SELECT webhook_ingest.retry(:j2);
SELECT webhook_ingest.cancel(:j2);
UPDATE webhook_ingest.jobs SET state = 'done', finished_at = now()
 WHERE id = :j2 AND state = 'running' AND attempts = 1;
SELECT state FROM webhook_ingest.jobs WHERE id = :j2;
-- retry brings it back with a clean slate
SELECT webhook_ingest.retry(:j2);
SELECT state, attempts, finished_at, last_error, next_attempt_at <= now() AS due
  FROM webhook_ingest.jobs WHERE id = :j2;

-- retry of a pending job in back-off makes it due now
UPDATE webhook_ingest.jobs SET next_attempt_at = now() + interval '1 hour', attempts = 3 WHERE id = :j3;
SELECT webhook_ingest.retry(:j3);
SELECT attempts, next_attempt_at <= now() AS due FROM webhook_ingest.jobs WHERE id = :j3;

-- retry of a done job replays it, and clears its done_lsn
UPDATE webhook_ingest.jobs SET state = 'done', finished_at = now(), done_lsn = pg_current_wal_lsn() WHERE id = :j3;
SELECT webhook_ingest.retry(:j3);
SELECT state, done_lsn FROM webhook_ingest.jobs WHERE id = :j3;

-- errors
SELECT webhook_ingest.retry(NULL);
SELECT webhook_ingest.retry(-1);
SELECT webhook_ingest.cancel(NULL);
SELECT webhook_ingest.cancel(-1);

-- retry_dead: the latest dead job per object, since a time, skipping objects already queued
INSERT INTO webhook_ingest.jobs (source, external_id, state, attempts, finished_at, last_error)
VALUES ('ops2', 'x', 'dead', 10, now() - interval '3 hours', 'HTTP 500'),
       ('ops2', 'x', 'dead', 10, now() - interval '2 hours', 'HTTP 500'),
       ('ops2', 'y', 'dead', 10, now() - interval '2 hours', 'HTTP 500'),
       ('ops2', 'z', 'dead', 10, now() - interval '2 days', 'HTTP 500'),
       ('ops2', 'w', 'dead', 10, now() - interval '1 hour', 'HTTP 500');
SELECT outcome FROM webhook_ingest.enqueue('ops2', 'w');
SELECT webhook_ingest.retry_dead('ops2', now() - interval '1 day');
SELECT external_id, state, attempts, finished_at < now() - interval '150 minutes' AS older
  FROM webhook_ingest.jobs WHERE source = 'ops2' ORDER BY external_id, id;
-- again: nothing left in that window but z (older) and w (queued)
SELECT webhook_ingest.retry_dead('ops2', now() - interval '1 day');
SELECT webhook_ingest.retry_dead('ops2');
SELECT webhook_ingest.retry_dead('nope');
SELECT webhook_ingest.retry_dead(NULL);

-- pause_source parks the pending jobs (claims skip them), resume makes them due
SELECT webhook_ingest.pause_source('ops2');
SELECT paused FROM webhook_ingest.sources WHERE name = 'ops2';
SELECT external_id, next_attempt_at FROM webhook_ingest.jobs
 WHERE source = 'ops2' AND state = 'pending' ORDER BY external_id;
-- webhooks are still accepted
SELECT outcome FROM webhook_ingest.enqueue('ops2', 'v');
-- the worker's claim takes nothing of a paused source, even a job that came due
WITH due AS (
    SELECT pj.id FROM webhook_ingest.jobs pj JOIN webhook_ingest.sources ps ON ps.name = pj.source
     WHERE pj.state = 'pending' AND pj.next_attempt_at <= now() AND NOT ps.paused AND pj.source = 'ops2'
     ORDER BY pj.next_attempt_at LIMIT 10 FOR UPDATE OF pj SKIP LOCKED)
SELECT count(*) AS claimable FROM due;
-- the worker's housekeeping parks it
UPDATE webhook_ingest.jobs j SET next_attempt_at = 'infinity', updated_at = now()
  FROM webhook_ingest.sources s
 WHERE s.paused AND j.source = s.name AND j.state = 'pending' AND j.next_attempt_at <= now();
-- retry of a parked job keeps it parked
SELECT webhook_ingest.retry(id) FROM webhook_ingest.jobs WHERE source = 'ops2' AND external_id = 'v';
SELECT source, paused, pending, due_now, running, retry_waiting, dead
  FROM webhook_ingest.queue_stats WHERE source = 'ops2';
SELECT webhook_ingest.resume_source('ops2');
SELECT count(*) FILTER (WHERE next_attempt_at <= now()) AS due, count(*) AS pending
  FROM webhook_ingest.jobs WHERE source = 'ops2' AND state = 'pending';
SELECT webhook_ingest.pause_source('nope');
SELECT webhook_ingest.resume_source('nope');

-- queue_stats: every source, with its backlog
UPDATE webhook_ingest.jobs SET next_attempt_at = now() + interval '5 minutes', attempts = 1
 WHERE source = 'ops2' AND external_id = 'x' AND state = 'pending';
UPDATE webhook_ingest.jobs SET created_at = now() - interval '10 minutes'
 WHERE source = 'ops2' AND external_id = 'x' AND state = 'pending';
SELECT source, paused, pending, due_now, running, retry_waiting, done_last_hour, retried_last_hour, dead,
       backlog_age >= interval '10 minutes' AS ten_minutes_behind
  FROM webhook_ingest.queue_stats WHERE source LIKE 'ops%' ORDER BY source;
-- the counts come from index-only scans of partial indexes, not from the
-- jobs table (the view reads _queue_stats(), which runs with jit = off)
CREATE FUNCTION plan_of(query text) RETURNS SETOF text LANGUAGE plpgsql AS
$$ BEGIN RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || query; END $$;
VACUUM (ANALYZE) webhook_ingest.queue;   -- the visibility map, as autovacuum keeps it
SET enable_seqscan = off;     -- the tables here are tiny; with 10 million rows see bench/views
SELECT array_agg(line) AS view_plan FROM plan_of('SELECT * FROM webhook_ingest.queue_stats') line;
SELECT bool_or(line LIKE '%Index Only Scan using queue_active_object on queue%') AS active_jobs_index_only,
       bool_or(line LIKE '%Index Only Scan using queue_dead on queue%') AS dead_jobs_index_only,
       bool_or(line ~ '(Seq Scan|Bitmap Heap Scan|Index Scan using \w+) on queue') AS reads_jobs_heap
  FROM plan_of((SELECT prosrc FROM pg_proc WHERE oid = 'webhook_ingest._queue_stats()'::regprocedure)) line;
RESET enable_seqscan;
SELECT proconfig, prosecdef FROM pg_proc WHERE oid = 'webhook_ingest._queue_stats()'::regprocedure;
DROP FUNCTION plan_of(text);

-- the shared-memory views: empty while the worker has done nothing
SELECT count(*) FROM webhook_ingest.latency;
SELECT count(*) FROM webhook_ingest.recent_failures;
SELECT * FROM webhook_ingest._latency(0);
SELECT * FROM webhook_ingest._latency(16);
SELECT * FROM webhook_ingest._recent_counts(61);

-- wait_for_job: false on timeout (nobody fetches here), true for a done job
-- once its done_lsn is known, false at once for a dead or cancelled one
SELECT webhook_ingest.wait_for_job(:j2, '50 milliseconds');
UPDATE webhook_ingest.jobs SET state = 'done', finished_at = now() WHERE id = :j2;
SELECT webhook_ingest.wait_for_job(:j2, '50 milliseconds');
UPDATE webhook_ingest.jobs SET done_lsn = pg_current_wal_lsn() WHERE id = :j2;
SELECT webhook_ingest.wait_for_job(:j2, '10 seconds');
SELECT webhook_ingest.wait_for_job(:j1, '10 seconds');
SELECT webhook_ingest.wait_for_job(id, '10 seconds') FROM webhook_ingest.jobs
 WHERE source = 'ops2' AND external_id = 'w' AND state = 'dead';
-- errors
SELECT webhook_ingest.wait_for_job(-1, '1 second');
SELECT webhook_ingest.wait_for_job(NULL, '1 second');
SELECT webhook_ingest.wait_for_job(:j2, NULL);
SELECT webhook_ingest.wait_for_job(:j2, '-1 second');
BEGIN;
SELECT job_id AS j4 FROM webhook_ingest.enqueue('ops', 'd') \gset
SELECT webhook_ingest.wait_for_job(:j4, '1 second');
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT webhook_ingest.wait_for_job(:j2, '1 second');
ROLLBACK;

-- wait_replayed on a primary: returns once flushed; an error after the timeout for a position not reached
CALL webhook_ingest.wait_replayed(pg_current_wal_flush_lsn(), '1 second');
\set VERBOSITY terse
CALL webhook_ingest.wait_replayed('FFFFFFFF/0', '20 milliseconds');
\echo :SQLSTATE
\set VERBOSITY default
CALL webhook_ingest.wait_replayed(NULL, '1 second');
CALL webhook_ingest.wait_replayed('0/0', '-1 day');
BEGIN ISOLATION LEVEL REPEATABLE READ;
CALL webhook_ingest.wait_replayed('0/0', '1 second');
ROLLBACK;
-- a procedure, called on its own: from inside a query (or a function) it would hold a snapshot
DO $$ BEGIN CALL webhook_ingest.wait_replayed('0/0', '1 second'); END $$;
CREATE FUNCTION call_wait_replayed() RETURNS void LANGUAGE plpgsql AS
$$ BEGIN CALL webhook_ingest.wait_replayed('0/0', '1 second'); END $$;
SELECT call_wait_replayed();
DROP FUNCTION call_wait_replayed();

-- storage settings of the hot tables
SELECT relname, reloptions FROM pg_class
 WHERE relname IN ('queue', 'event_ledger') AND relnamespace = 'webhook_ingest'::regnamespace ORDER BY relname;

-- the monitoring role reads the views, and nothing else
SET ROLE webhook_ingest_monitor;
SELECT count(*) >= 2 AS sources_listed FROM webhook_ingest.queue_stats;
SELECT count(*) FROM webhook_ingest.worker_status WHERE role = 'fetcher';
SELECT count(*) FROM webhook_ingest.latency;
SELECT count(*) FROM webhook_ingest.recent_failures;
SELECT count(*) FROM webhook_ingest.jobs;
SELECT webhook_ingest.retry(1);
SELECT webhook_ingest.pause_source('ops');
RESET ROLE;

-- the application's role may wait for its jobs and read their done_lsn, nothing more
SET ROLE webhook_ingest_enqueue;
SELECT webhook_ingest.wait_for_job(:j2, '1 second');
SELECT state, done_lsn IS NOT NULL AS has_done_lsn FROM webhook_ingest.jobs WHERE id = :j2;
CALL webhook_ingest.wait_replayed(pg_current_wal_flush_lsn(), '1 second');
SELECT external_id FROM webhook_ingest.jobs WHERE id = :j2;
SELECT webhook_ingest.cancel(:j2);
RESET ROLE;
