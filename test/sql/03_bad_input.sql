-- Every bad input to enqueue: an error with its own SQLSTATE, and nothing written.
\set VERBOSITY default
\set SHOW_CONTEXT never

SELECT webhook_ingest.add_source('bad', 'http://127.0.0.1:8080/things/{external_id}');
SELECT outcome FROM webhook_ingest.enqueue('bad', 'accepted-before', NULL, 'ev-accepted');
CREATE TEMP TABLE before AS
SELECT (SELECT count(*) FROM webhook_ingest.jobs) AS jobs, (SELECT count(*) FROM webhook_ingest.events) AS events;

SELECT * FROM webhook_ingest.enqueue(NULL, 'x');
\echo :SQLSTATE
SELECT * FROM webhook_ingest.enqueue('', 'x');
\echo :SQLSTATE
SELECT * FROM webhook_ingest.enqueue('unknown', 'x');
\echo :SQLSTATE
SELECT * FROM webhook_ingest.enqueue('unknown', 'x', NULL, 'ev-unknown');
\echo :SQLSTATE
SELECT * FROM webhook_ingest.enqueue('bad', NULL);
\echo :SQLSTATE
SELECT * FROM webhook_ingest.enqueue('bad', '');
\echo :SQLSTATE
SELECT * FROM webhook_ingest.enqueue('bad', repeat('x', 1025));
\echo :SQLSTATE
SELECT * FROM webhook_ingest.enqueue('bad', repeat('é', 513));
\echo :SQLSTATE
SELECT * FROM webhook_ingest.enqueue('bad', E'line\nbreak');
\echo :SQLSTATE
SELECT * FROM webhook_ingest.enqueue('bad', E'tab\there');
\echo :SQLSTATE
SELECT * FROM webhook_ingest.enqueue('bad', E'del\x7f');
\echo :SQLSTATE
SELECT * FROM webhook_ingest.enqueue('bad', E'c1-control\u0085');
\echo :SQLSTATE
SELECT * FROM webhook_ingest.enqueue('bad', 'x', NULL, '');
\echo :SQLSTATE
SELECT * FROM webhook_ingest.enqueue('bad', 'x', NULL, repeat('e', 1025));
\echo :SQLSTATE
SELECT * FROM webhook_ingest.enqueue('bad', 'x', NULL, E'ev\r');
\echo :SQLSTATE
SELECT webhook_ingest.url_for('bad', E'x\ny');
\echo :SQLSTATE

-- a failure inside the caller's transaction leaves earlier work to the caller
BEGIN;
SELECT outcome FROM webhook_ingest.enqueue('bad', 'in-tx', NULL, 'ev-in-tx');
SAVEPOINT s;
SELECT * FROM webhook_ingest.enqueue('bad', '');
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT outcome FROM webhook_ingest.enqueue('bad', 'in-tx', NULL, 'ev-in-tx');

-- nothing changed but the one accepted webhook
SELECT (SELECT count(*) FROM webhook_ingest.jobs) - jobs AS new_jobs,
       (SELECT count(*) FROM webhook_ingest.events) - events AS new_events
  FROM before;
SELECT outcome FROM webhook_ingest.enqueue('bad', 'accepted-before', NULL, 'ev-accepted');

-- a read-only transaction cannot enqueue
BEGIN READ ONLY;
SELECT * FROM webhook_ingest.enqueue('bad', 'read-only', NULL, 'ev-ro');
\echo :SQLSTATE
ROLLBACK;
BEGIN READ ONLY;
SELECT * FROM webhook_ingest.enqueue('bad', 'accepted-before', NULL, 'ev-ro2');
\echo :SQLSTATE
ROLLBACK;

-- an external id with a "." or ".." path segment would address another resource of the upstream
SELECT * FROM webhook_ingest.enqueue('blog', '..', NULL, 'dot-1');
\echo :SQLSTATE
SELECT * FROM webhook_ingest.enqueue('blog', 'x/../../admin', NULL, 'dot-2');
\echo :SQLSTATE
SELECT count(*) AS nothing_written FROM webhook_ingest.events WHERE event_id IN ('dot-1', 'dot-2');
