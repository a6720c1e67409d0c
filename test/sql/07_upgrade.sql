-- ALTER EXTENSION UPDATE from 0.1.0 keeps every row; jobs already done get a
-- done_lsn.  (A fresh CREATE EXTENSION runs the same path: 0.1.0, then the
-- update scripts.)
\set VERBOSITY default
\set SHOW_CONTEXT never

SET client_min_messages = warning;
DROP EXTENSION webhook_ingest CASCADE;
RESET client_min_messages;
CREATE EXTENSION webhook_ingest VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest';
SELECT webhook_ingest.add_source('up', 'http://127.0.0.1:9/u/{external_id}');
-- this library still takes webhooks into 0.1.0 tables
SELECT outcome FROM webhook_ingest.enqueue('up', 'a', NULL, 'e1');
SELECT outcome FROM webhook_ingest.enqueue('up', 'a', NULL, 'e1');
SELECT outcome FROM webhook_ingest.enqueue('up', 'b', NULL, 'e2');
UPDATE webhook_ingest.jobs SET state = 'done', finished_at = now() WHERE external_id = 'b';
-- 0.1.0 has none of the new functions
SELECT webhook_ingest.cancel(1);

ALTER EXTENSION webhook_ingest UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest';
SELECT external_id, state, done_lsn IS NOT NULL AS has_done_lsn, events
  FROM webhook_ingest.jobs ORDER BY external_id, id;
SELECT name, paused FROM webhook_ingest.sources;
-- the event ids survived: a redelivery is still a duplicate
SELECT outcome FROM webhook_ingest.enqueue('up', 'a', NULL, 'e1');
SELECT outcome FROM webhook_ingest.enqueue('up', 'c', NULL, 'e3');
SELECT webhook_ingest.cancel(id) FROM webhook_ingest.jobs WHERE external_id = 'c';
SELECT source, pending, dead FROM webhook_ingest.queue_stats;
-- what the update added
SELECT e.enumlabel FROM pg_enum e WHERE e.enumtypid = 'webhook_ingest.job_state'::regtype ORDER BY e.enumsortorder;
SELECT indexrelid::regclass AS index, pg_get_expr(indpred, indrelid) AS predicate
  FROM pg_index WHERE indrelid = 'webhook_ingest.jobs'::regclass ORDER BY 1::text;
SELECT pg_describe_object(classid, objid, 0) AS member
  FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'webhook_ingest')
 ORDER BY 1;
