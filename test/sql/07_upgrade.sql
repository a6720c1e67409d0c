-- ALTER EXTENSION UPDATE from 0.1.0 to 0.2.0 keeps every row; jobs already
-- done get a done_lsn.  Then 0.2.0 to 0.3.0 keeps every row and rewrites
-- nothing.  (A fresh CREATE EXTENSION runs the same path: 0.1.0, then the
-- update scripts.)
\set VERBOSITY default
\set SHOW_CONTEXT never

SET client_min_messages = warning;
DROP EXTENSION webhook_ingest CASCADE;
RESET client_min_messages;
CREATE EXTENSION webhook_ingest VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest';
SELECT webhook_ingest.add_source('up', 'http://127.0.0.1:9/u/{external_id}');
-- this library serves schemas 0.9.0 and 0.10.0: enqueue() refuses 0.1.0's, with a hint
SELECT outcome FROM webhook_ingest.enqueue('up', 'a', NULL, 'e1');
-- the webhooks 0.1.0's library took (one job per object, each event id once)
INSERT INTO webhook_ingest.jobs (source, external_id) VALUES ('up', 'a'), ('up', 'b');
INSERT INTO webhook_ingest.events (source, event_id) VALUES ('up', 'e1'), ('up', 'e2');
UPDATE webhook_ingest.jobs SET state = 'done', finished_at = now() WHERE external_id = 'b';
-- 0.1.0 has none of the new functions
SELECT webhook_ingest.cancel(1);

ALTER EXTENSION webhook_ingest UPDATE TO '0.2.0';
SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest';
SELECT external_id, state, done_lsn IS NOT NULL AS has_done_lsn, events
  FROM webhook_ingest.jobs ORDER BY external_id, id;
SELECT name, paused FROM webhook_ingest.sources;
-- the event ids survived
SELECT source, event_id FROM webhook_ingest.events ORDER BY 2;
INSERT INTO webhook_ingest.jobs (source, external_id) VALUES ('up', 'c');
INSERT INTO webhook_ingest.events (source, event_id) VALUES ('up', 'e3');
SELECT webhook_ingest.cancel(id) FROM webhook_ingest.jobs WHERE external_id = 'c';
SELECT source, pending, dead FROM webhook_ingest.queue_stats;
-- what the update added
SELECT e.enumlabel FROM pg_enum e WHERE e.enumtypid = 'webhook_ingest.job_state'::regtype ORDER BY e.enumsortorder;
SELECT indexrelid::regclass AS index, pg_get_expr(indpred, indrelid) AS predicate
  FROM pg_index WHERE indrelid = 'webhook_ingest.jobs'::regclass ORDER BY 1::text;

-- 0.2.0 -> 0.3.0
SELECT count(*) AS jobs_before FROM webhook_ingest.jobs \gset
SELECT pg_relation_filenode('webhook_ingest.jobs') AS jobs_file,
       (SELECT string_agg(pg_relation_filenode(indexrelid)::text, ',' ORDER BY indexrelid::regclass::text)
          FROM pg_index WHERE indrelid = 'webhook_ingest.jobs'::regclass) AS index_files \gset
ALTER EXTENSION webhook_ingest UPDATE TO '0.3.0';
SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest';
-- every row kept, and jobs and its indexes neither rewritten nor rebuilt
SELECT count(*) = :jobs_before AS every_job_kept FROM webhook_ingest.jobs;
SELECT pg_relation_filenode('webhook_ingest.jobs') = :jobs_file AS jobs_not_rewritten,
       (SELECT string_agg(pg_relation_filenode(indexrelid)::text, ',' ORDER BY indexrelid::regclass::text)
          FROM pg_index WHERE indrelid = 'webhook_ingest.jobs'::regclass) = :'index_files' AS indexes_not_rebuilt;
SELECT external_id, state, done_lsn IS NOT NULL AS has_done_lsn, events
  FROM webhook_ingest.jobs ORDER BY external_id, id;
-- the existing source keeps working, open to every enqueuer
SELECT name, paused, enqueue_roles FROM webhook_ingest.sources;
INSERT INTO webhook_ingest.jobs (source, external_id, events) VALUES ('up', 'd', 2);
INSERT INTO webhook_ingest.events (source, event_id) VALUES ('up', 'e4'), ('up', 'e5');
SET ROLE regress_app;       -- from 04_privileges: a member of webhook_ingest_enqueue
SELECT count(*) AS jobs_it_sees FROM webhook_ingest.jobs;
RESET ROLE;
-- what the update added: the admin role, enqueue_roles, row security on jobs,
-- the guard on sources, operations as SECURITY DEFINER, enqueue and
-- wait_for_job no longer SECURITY DEFINER
SELECT rolname, rolcanlogin FROM pg_roles WHERE rolname = 'webhook_ingest_admin';
SELECT attname, atttypid::regtype FROM pg_attribute
 WHERE attrelid = 'webhook_ingest.sources'::regclass AND attname = 'enqueue_roles';
SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = 'webhook_ingest.jobs'::regclass;
SELECT polname, polcmd, polroles::regrole[] AS roles, pg_get_expr(polqual, polrelid) AS qual
  FROM pg_policy WHERE polrelid = 'webhook_ingest.jobs'::regclass ORDER BY polname;
SELECT tgname FROM pg_trigger WHERE tgrelid = 'webhook_ingest.sources'::regclass AND NOT tgisinternal ORDER BY 1;
-- what pg_dump dumps of the extension's tables (and the job id sequence), and with which filter
SELECT c.relid::regclass AS config, c.cond
  FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS c(relid, cond)
 WHERE e.extname = 'webhook_ingest' ORDER BY c.relid::regclass::text COLLATE "C";
-- a job inserted as running (restored from a dump) is pending and due at once
SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger
 WHERE tgrelid = 'webhook_ingest.jobs'::regclass AND NOT tgisinternal;
BEGIN;
INSERT INTO webhook_ingest.jobs (source, external_id, state, attempts, lease_until, worker_pid)
VALUES ('up', 'restored', 'running', 3, now() + interval '1 hour', pg_backend_pid());
SELECT state, attempts, lease_until, worker_pid, next_attempt_at <= now() AS due, last_error
  FROM webhook_ingest.jobs WHERE external_id = 'restored';
ROLLBACK;
SELECT p.oid::regprocedure AS function, p.prosecdef
  FROM pg_proc p WHERE p.pronamespace = 'webhook_ingest'::regnamespace AND p.prokind = 'f'
   AND p.proname !~ '^_' ORDER BY 1::text;
SELECT pg_describe_object(classid, objid, 0) AS member
  FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'webhook_ingest')
 ORDER BY 1;

-- 0.3.0 -> 0.4.0: every row kept, nothing rewritten; the sources keep working
-- through enqueue, and get the intake settings (NULL: receive() refuses)
SELECT count(*) AS jobs_before FROM webhook_ingest.jobs \gset
SELECT pg_relation_filenode('webhook_ingest.jobs') AS jobs_file,
       pg_relation_filenode('webhook_ingest.sources') AS sources_file,
       pg_relation_filenode('webhook_ingest.events') AS events_file \gset
SELECT id AS last_job_before FROM webhook_ingest.jobs ORDER BY id DESC LIMIT 1 \gset
ALTER EXTENSION webhook_ingest UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest';
SELECT count(*) = :jobs_before AS every_job_kept FROM webhook_ingest.jobs;
-- (through 0.6.0, 0.5.0's jobs table is jobs_legacy, the same file; its events table, events_legacy
-- since 0.6.0, is gone since 0.10.0: its ids are in the ledger)
SELECT pg_relation_filenode('webhook_ingest.jobs_legacy') = :jobs_file AS jobs_not_rewritten,
       pg_relation_filenode('webhook_ingest.sources') = :sources_file AS sources_not_rewritten,
       to_regclass('webhook_ingest.events_legacy') IS NULL AS events_legacy_gone;
SELECT source, event_id FROM webhook_ingest.events ORDER BY 2;
SELECT name, signature_scheme, signing_secrets, signature_tolerance, external_id_path, event_id_path
  FROM webhook_ingest.sources;
SELECT outcome FROM webhook_ingest.enqueue('up', 'a', NULL, 'e1');
SELECT outcome FROM webhook_ingest.enqueue('up', 'e', NULL, 'e6');
\set VERBOSITY default
SELECT * FROM webhook_ingest.receive('up', '{}', '{}');
\set VERBOSITY terse
SELECT webhook_ingest.alter_source('up', signature_scheme => 'github', signing_secrets => '{s}',
                                   external_id_path => '$.id');
SELECT outcome FROM webhook_ingest.receive('up',
    '{"X-Hub-Signature-256": "sha256=4a7d9c1ce6c3e4b2a1b7ad3d5d0a3af2a1a5e8ad3f0c3d5f1a0a3a2c1b0d9e8f"}', '{"id": "f"}');
SELECT outcome FROM webhook_ingest.receive('up',
    '{"X-Hub-Signature-256": "sha256=effd84f79b14c2cf6e81710a121ddccd6c4ba29c8c73274fbbf3a66135fb568d"}', '{"id": "f"}');
SELECT p.oid::regprocedure AS function, p.prosecdef
  FROM pg_proc p WHERE p.pronamespace = 'webhook_ingest'::regnamespace AND p.prokind = 'f'
   AND p.proname !~ '^_' ORDER BY 1::text;
-- ... and, through 0.5.0, the scheduling settings (weight 1, no limits) and
-- jobs_due led by the source, still only the pending jobs; queue_stats' new columns
SELECT name, weight, rate_limit, rate_burst, max_in_flight FROM webhook_ingest.sources;
SELECT pg_get_indexdef('webhook_ingest.queue_due'::regclass) AS queue_due;
SELECT source, in_flight, throttled_until FROM webhook_ingest.queue_stats ORDER BY 1;

-- ... and through 0.6.0: the jobs that may still be worked on are in the
-- queue at once, the done ones stay in jobs_legacy until the worker's storage
-- round moves them to job_history (here by hand: the worker is off), and the
-- jobs view shows every job exactly once all along; new ids follow the old
SELECT state, count(*) FROM webhook_ingest.queue GROUP BY 1 ORDER BY 1;
SELECT state, count(*) FROM webhook_ingest.jobs_legacy GROUP BY 1 ORDER BY 1;
SELECT count(*) = count(DISTINCT id) AS each_job_once, count(*) = :jobs_before + 2 AS with_the_two_new
  FROM webhook_ingest.jobs;
SELECT behind AS more_to_do FROM webhook_ingest._maintain_storage();
SELECT behind AS more_to_do FROM webhook_ingest._maintain_storage();
SELECT moved_upto = last_id AS all_moved, jobs_truncated, events_truncated FROM webhook_ingest.legacy_migration;
SELECT count(*) AS legacy_left, pg_relation_size('webhook_ingest.jobs_legacy') AS legacy_bytes
  FROM webhook_ingest.jobs_legacy;
SELECT count(*) = count(DISTINCT id) AS each_job_once, count(*) = :jobs_before + 2 AS with_the_two_new
  FROM webhook_ingest.jobs;
SELECT external_id, state, done_lsn IS NOT NULL AS has_done_lsn, events
  FROM webhook_ingest.jobs ORDER BY external_id, id;
SELECT (SELECT count(*) FROM webhook_ingest.job_history) AS history_rows,
       (SELECT count(*) FROM webhook_ingest.jobs WHERE state = 'done') AS done_jobs;
SELECT outcome FROM webhook_ingest.enqueue('up', 'a', NULL, 'e1');   -- an old event id: still a duplicate
SELECT job_id > :last_job_before AS new_id_follows, outcome FROM webhook_ingest.enqueue('up', 'z', NULL, 'e60');
SELECT source, event_id FROM webhook_ingest.events WHERE event_id IN ('e1', 'e60') ORDER BY 2;

-- ... and through 0.7.0: every source keeps its row, with no TLS settings nor
-- proxy of its own (the system's bundle, webhook_ingest.proxy), and no key;
-- worker_status has the connection counters
SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest';
SELECT name, tls_ca IS NULL AS system_bundle, tls_client_cert IS NULL AS no_client_cert, proxy IS NULL AS setting_proxy
  FROM webhook_ingest.sources ORDER BY 1;
SELECT count(*) AS keys FROM webhook_ingest.source_tls_keys;
SELECT connections_opened >= 0 AND tls_connections_opened >= 0 AS counted FROM webhook_ingest.worker_status WHERE role = 'fetcher';

-- ... and through 0.8.0: the ledger's times are the values 0.6.0 computed, and
-- an accepted event id runs no SQL function (the default is inlined: the plan
-- shows the expression, not a call of _seconds)
SELECT webhook_ingest._seconds('2026-12-01 12:34:56.7+00') = 849443697 AS same_seconds,
       webhook_ingest._seconds('2000-01-01 00:00:00+00') = 0 AS from_2000,
       webhook_ingest._at(849443697) = timestamptz '2026-12-01 12:34:57+00' AS same_time,
       webhook_ingest._at(webhook_ingest._seconds(now())) = date_trunc('second', now() + interval '0.5 s') AS round_trip;
CREATE FUNCTION pg_temp.plan_of(q text) RETURNS SETOF text LANGUAGE plpgsql AS
$$ DECLARE l text; BEGIN FOR l IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || q LOOP RETURN NEXT l; END LOOP; END $$;
SELECT bool_or(l LIKE '%_seconds%') AS calls_seconds, bool_or(l LIKE '%EXTRACT(epoch%' OR l LIKE '%date_part(''epoch''%') AS inlined
  FROM pg_temp.plan_of('INSERT INTO webhook_ingest.event_ledger (source_id, event_id) VALUES (1, ''x'')') l;
SELECT bool_or(l LIKE '%_at(%') AS calls_at, bool_or(l LIKE '%to_timestamp%') AS inlined
  FROM pg_temp.plan_of('SELECT received_at FROM webhook_ingest.events') l;
