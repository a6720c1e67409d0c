-- enqueue: the four outcomes, coalescing, refetch after a running job, and
-- the transaction it runs in.
\set VERBOSITY default
\set SHOW_CONTEXT never

SELECT webhook_ingest.add_source('crm', 'http://127.0.0.1:8080/contacts/{external_id}');

-- a new object is queued
SELECT outcome FROM webhook_ingest.enqueue('crm', 'c1', '{"n": 1}', 'e1');
-- the same event again is a duplicate and changes nothing
SELECT outcome, job_id = (SELECT id FROM webhook_ingest.jobs WHERE external_id = 'c1') AS same_job
  FROM webhook_ingest.enqueue('crm', 'c1', '{"n": 99}', 'e1');
-- another event for the pending object coalesces into its job
SELECT outcome FROM webhook_ingest.enqueue('crm', 'c1', '{"n": 2}', 'e2');
-- no event id: no dedup, still coalesced
SELECT outcome FROM webhook_ingest.enqueue('crm', 'c1');
SELECT outcome FROM webhook_ingest.enqueue('crm', 'c1');
-- one pending job serves all four webhooks; the latest payload wins, a NULL payload keeps it
SELECT source, external_id, state, payload, events, refetch, attempts
  FROM webhook_ingest.jobs WHERE external_id = 'c1';

-- the same ids under another source are another object
SELECT webhook_ingest.add_source('crm2', 'http://127.0.0.1:8080/v2/{external_id}');
SELECT outcome FROM webhook_ingest.enqueue('crm2', 'c1', NULL, 'e1');

-- a claim, as the worker makes it, takes the job; a webhook now requeues it
WITH due AS (
    SELECT id FROM webhook_ingest.jobs
     WHERE state = 'pending' AND next_attempt_at <= now() AND source = 'crm'
     ORDER BY next_attempt_at LIMIT 10 FOR UPDATE SKIP LOCKED)
UPDATE webhook_ingest.jobs j
   SET state = 'running', attempts = attempts + 1, refetch = false,
       lease_until = now() + interval '1 minute', worker_pid = pg_backend_pid()
  FROM due WHERE j.id = due.id
RETURNING j.external_id, j.state, j.attempts;
SELECT outcome FROM webhook_ingest.enqueue('crm', 'c1', '{"n": 3}', 'e3');
SELECT outcome FROM webhook_ingest.enqueue('crm', 'c1', NULL, 'e4');
SELECT outcome FROM webhook_ingest.enqueue('crm', 'c1', NULL, 'e3');
SELECT state, payload, events, refetch FROM webhook_ingest.jobs WHERE external_id = 'c1' AND source = 'crm';
-- still exactly one active job for the object
SELECT count(*) FROM webhook_ingest.jobs
 WHERE source = 'crm' AND external_id = 'c1' AND state IN ('pending', 'running');

-- finishing a flagged job sends it back to pending for one more fetch
UPDATE webhook_ingest.jobs
   SET state = CASE WHEN refetch THEN 'pending' ELSE 'done' END::webhook_ingest.job_state,
       refetch = false, lease_until = NULL
 WHERE source = 'crm' AND external_id = 'c1' AND state = 'running'
RETURNING state;
-- finishing without a webhook in between ends it; the next webhook makes a new job
UPDATE webhook_ingest.jobs SET state = 'running' WHERE source = 'crm' AND external_id = 'c1';
UPDATE webhook_ingest.jobs
   SET state = CASE WHEN refetch THEN 'pending' ELSE 'done' END::webhook_ingest.job_state
 WHERE source = 'crm' AND external_id = 'c1' AND state = 'running'
RETURNING state;
SELECT outcome, job_id > (SELECT max(id) FROM webhook_ingest.jobs WHERE state = 'done') AS new_job
  FROM webhook_ingest.enqueue('crm', 'c1', NULL, 'e5');
SELECT state, count(*) FROM webhook_ingest.jobs WHERE source = 'crm' AND external_id = 'c1'
 GROUP BY state ORDER BY state;
-- a duplicate of an event whose object has no active job names no job
UPDATE webhook_ingest.jobs SET state = 'done' WHERE source = 'crm' AND external_id = 'c1';
SELECT job_id, outcome FROM webhook_ingest.enqueue('crm', 'c1', NULL, 'e5');

-- enqueue honours the caller's transaction: a rollback keeps nothing, burns no event id
BEGIN;
SELECT outcome FROM webhook_ingest.enqueue('crm', 'c2', NULL, 'e-rolled-back');
ROLLBACK;
SELECT count(*) AS jobs_for_c2 FROM webhook_ingest.jobs WHERE external_id = 'c2';
SELECT outcome FROM webhook_ingest.enqueue('crm', 'c2', NULL, 'e-rolled-back');
-- and a savepoint rollback likewise
BEGIN;
SAVEPOINT s;
SELECT outcome FROM webhook_ingest.enqueue('crm', 'c3', NULL, 'e-sp');
ROLLBACK TO SAVEPOINT s;
SELECT outcome FROM webhook_ingest.enqueue('crm', 'c3', NULL, 'e-sp');
COMMIT;
-- two calls in one statement see each other
SELECT a.outcome, b.outcome
  FROM webhook_ingest.enqueue('crm', 'c4', NULL, 'e-c4a') a,
       webhook_ingest.enqueue('crm', 'c4', NULL, 'e-c4a') b;
-- callable from the select list as well
SELECT (webhook_ingest.enqueue('crm', 'c5')).outcome;

-- ids: the longest accepted, and non-ASCII text
SELECT outcome FROM webhook_ingest.enqueue('crm', repeat('x', 1024), NULL, repeat('y', 1024));
SELECT outcome FROM webhook_ingest.enqueue('crm', 'café-ünïcode', NULL, 'événement');

-- job columns the worker relies on
SELECT id IS NOT NULL AS has_id, created_at <= now() AS created, updated_at >= created_at AS updated,
       next_attempt_at <= now() AS due, last_error, lease_until
  FROM webhook_ingest.jobs WHERE external_id = 'c2';

-- REPEATABLE READ and SERIALIZABLE callers: the same outcomes
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT outcome FROM webhook_ingest.enqueue('crm', 'rr1', '{"v": 1}', 'rr-e1');
SELECT outcome FROM webhook_ingest.enqueue('crm', 'rr1', NULL, 'rr-e1');
SELECT outcome FROM webhook_ingest.enqueue('crm', 'rr1', '{"v": 2}', 'rr-e2');
COMMIT;
UPDATE webhook_ingest.jobs SET state = 'running' WHERE external_id = 'rr1';
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT outcome FROM webhook_ingest.enqueue('crm', 'rr1', NULL, 'rr-e3');
SELECT job_id IS NOT NULL AS has_job, outcome FROM webhook_ingest.enqueue('crm', 'rr1', NULL, 'rr-e3');
SELECT * FROM webhook_ingest.enqueue('nope', 'rr1', NULL, 'rr-e4');
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT outcome FROM webhook_ingest.enqueue('crm', 'rr1', NULL, 'rr-e3');
COMMIT;
SELECT state, payload, events, refetch FROM webhook_ingest.jobs WHERE external_id = 'rr1';

-- a queue table changed by hand (a column added): enqueue gives the same results
ALTER TABLE webhook_ingest.queue ADD COLUMN note text;
SELECT outcome FROM webhook_ingest.enqueue('crm', 'shape1', NULL, 'shape-e1');
SELECT outcome FROM webhook_ingest.enqueue('crm', 'shape1', NULL, 'shape-e1');
SELECT outcome FROM webhook_ingest.enqueue('crm', 'shape1', NULL, 'shape-e2');
ALTER TABLE webhook_ingest.queue DROP COLUMN note;
SELECT outcome FROM webhook_ingest.enqueue('crm', 'shape1', NULL, 'shape-e3');
SELECT events FROM webhook_ingest.jobs WHERE external_id = 'shape1';
