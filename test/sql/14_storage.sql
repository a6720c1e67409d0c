-- 0.6.0's storage: three lifetimes, four tables, and the views that keep
-- 0.5.0's shape.  (The worker's own completions: worker suite, worker_storage.)
\set VERBOSITY terse

SELECT webhook_ingest.add_source('st', 'http://127.0.0.1:9/st/{external_id}');
SELECT webhook_ingest.pause_source('st');       -- nothing here is for the worker
SELECT id AS st_id FROM webhook_ingest.sources WHERE name = 'st' \gset

-- the views have exactly 0.5.0's columns, in order and type
CREATE FUNCTION pg_temp.columns(rel regclass) RETURNS text LANGUAGE sql AS
$$ SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
     FROM pg_attribute WHERE attrelid = rel AND attnum > 0 AND NOT attisdropped $$;
SELECT pg_temp.columns('webhook_ingest.jobs') = pg_temp.columns('webhook_ingest.jobs_legacy') AS jobs_as_in_050,
       pg_temp.columns('webhook_ingest.events') = 'source text, event_id text, received_at timestamp with time zone'
           AS events_as_in_050;
SELECT pg_temp.columns('webhook_ingest.jobs') AS jobs_columns;

-- keep_payloads: more than 0, at most retention (7 days here)
SELECT webhook_ingest.add_source('st_keep', 'http://127.0.0.1:9/k/{external_id}', keep_payloads => '0 s');
\echo :SQLSTATE
SELECT webhook_ingest.add_source('st_keep', 'http://127.0.0.1:9/k/{external_id}', keep_payloads => '8 days');
\echo :SQLSTATE
SELECT webhook_ingest.add_source('st_keep', 'http://127.0.0.1:9/k/{external_id}', keep_payloads => '1 day');
SELECT webhook_ingest.alter_source('st_keep', keep_payloads => '-1 hour');
\echo :SQLSTATE
SELECT webhook_ingest.alter_source('st_keep', keep_payloads => '2 days', reset_keep_payloads => true);
\echo :SQLSTATE
SELECT webhook_ingest.alter_source('st_keep', timeout_ms => 5000);     -- keeps it
SELECT keep_payloads FROM webhook_ingest.sources WHERE name = 'st_keep';
SELECT webhook_ingest.alter_source('st_keep', reset_keep_payloads => true);
SELECT keep_payloads FROM webhook_ingest.sources WHERE name = 'st_keep';
UPDATE webhook_ingest.sources SET keep_payloads = '-1 day' WHERE name = 'st_keep';
\echo :SQLSTATE

-- the ledger is exact: two event ids whose index keys have the same 32-bit
-- hash code are two events (the hash index only finds candidates; the heap's
-- full id decides), and each is a duplicate the second time
CREATE TEMP TABLE keys AS
SELECT 'ev-' || i AS event_id, hashtext(:st_id || ':ev-' || i) AS h FROM generate_series(1, 300000) i;
CREATE TEMP TABLE twins AS
SELECT a.event_id AS e1, b.event_id AS e2 FROM keys a JOIN keys b ON a.h = b.h AND a.event_id < b.event_id
 ORDER BY 1, 2 LIMIT 1;
SELECT count(*) AS twins_found FROM twins;
SELECT (SELECT outcome FROM webhook_ingest.enqueue('st', 't1', NULL, e1)) AS first,
       (SELECT outcome FROM webhook_ingest.enqueue('st', 't2', NULL, e2)) AS its_twin,
       (SELECT outcome FROM webhook_ingest.enqueue('st', 't1', NULL, e1)) AS first_again,
       (SELECT outcome FROM webhook_ingest.enqueue('st', 't2', NULL, e2)) AS twin_again
  FROM twins;
SELECT count(*) AS remembered FROM webhook_ingest.event_ledger
 WHERE source_id = :st_id AND event_id IN (SELECT e1 FROM twins UNION ALL SELECT e2 FROM twins);

-- a done job lives in job_history: no payload kept (the source keeps none), its
-- done_lsn from done_batches; the jobs view shows it as 0.5.0 did
INSERT INTO webhook_ingest.jobs (source, external_id, state, payload, attempts, last_status, finished_at, done_lsn)
VALUES ('st', 'd1', 'done', '{"a": 1}', 1, 200, now(), '0/10');
SELECT id AS d1 FROM webhook_ingest.jobs WHERE external_id = 'd1' \gset
SELECT state, payload, refetch, attempts, last_error, last_status, done_lsn, updated_at = finished_at AS updated_is_finished
  FROM webhook_ingest.jobs WHERE id = :d1;
SELECT (SELECT count(*) FROM webhook_ingest.queue WHERE id = :d1) AS in_queue,
       (SELECT count(*) FROM webhook_ingest.job_history WHERE id = :d1) AS in_history;
-- cancel of a done job changes nothing; retry brings it back into the queue
-- under its id, with a NULL payload (its source keeps none)
SELECT webhook_ingest.cancel(:d1);
SELECT webhook_ingest.retry(:d1);
SELECT state, payload, attempts, finished_at FROM webhook_ingest.jobs WHERE id = :d1;
SELECT (SELECT count(*) FROM webhook_ingest.queue WHERE id = :d1) AS in_queue,
       (SELECT count(*) FROM webhook_ingest.job_history WHERE id = :d1) AS in_history;
-- a retry of a done job while the object has an active one: refused, nothing moved
INSERT INTO webhook_ingest.jobs (source, external_id, state, finished_at) VALUES ('st', 'd1', 'done', now());
SELECT id AS d1b FROM webhook_ingest.jobs WHERE external_id = 'd1' AND state = 'done' \gset
SELECT webhook_ingest.retry(:d1b);
SELECT state, count(*) FROM webhook_ingest.jobs WHERE external_id = 'd1' GROUP BY 1 ORDER BY 1;

-- partitions: the storage round makes them ahead, as members of the extension
-- (pg_dump leaves them out), and says until when they take rows; a missing
-- partition never fails a write (the overflow table takes the row), and the
-- next round makes it again
SELECT behind IS NOT NULL AS round_ran, history_until > now() AS covered_ahead FROM webhook_ingest._maintain_storage();
SELECT count(*) >= 3 AS made_ahead,
       bool_and(EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                          AND d.objid = ('webhook_ingest.' || p.name)::regclass AND d.deptype = 'e')) AS all_members
  FROM webhook_ingest._partitions('webhook_ingest.job_history') p WHERE p.upper_bound > now();
SELECT webhook_ingest._drop_partitions('webhook_ingest.job_history', 'infinity') > 0 AS dropped;
SELECT count(*) AS partitions_left FROM webhook_ingest._partitions('webhook_ingest.job_history');
SELECT webhook_ingest._horizon('webhook_ingest.job_history') AS history_until;
INSERT INTO webhook_ingest.jobs (source, external_id, state, finished_at) VALUES ('st', 'd2', 'done', now());
SELECT count(*) AS in_overflow FROM webhook_ingest.job_history_overflow WHERE external_id = 'd2';
SELECT behind IS NOT NULL AS round_ran, history_until > now() AS covered_again FROM webhook_ingest._maintain_storage();
SELECT count(*) >= 3 AS made_again,
       count(*) FILTER (WHERE p.lower_bound <= now() AND now() < p.upper_bound) AS taking_now
  FROM webhook_ingest._partitions('webhook_ingest.job_history') p;
SELECT state FROM webhook_ingest.jobs WHERE external_id = 'd2';

-- row security through the views: an app role sees the states of the jobs of
-- the sources it may enqueue into, done ones included, and nothing of others;
-- a function in its query never sees the rows it may not see (security barrier)
SELECT webhook_ingest.add_source('st_closed', 'http://127.0.0.1:9/c/{external_id}',
                                 enqueue_roles => '{webhook_ingest_admin}');
INSERT INTO webhook_ingest.jobs (source, external_id, state, finished_at) VALUES ('st_closed', 'c1', 'done', now());
INSERT INTO webhook_ingest.jobs (source, external_id, state) VALUES ('st_closed', 'c2', 'dead');
INSERT INTO webhook_ingest.jobs (source, external_id, state) VALUES ('st', 'x1', 'dead');
SELECT string_agg(id::text, ',' ORDER BY id) AS some_ids FROM webhook_ingest.jobs
 WHERE source IN ('st', 'st_closed') AND external_id IN ('d1', 'd2', 'c1', 'c2', 'x1') \gset
CREATE FUNCTION public.st_peek(text) RETURNS boolean LANGUAGE plpgsql COST 0.0000001 AS
$$ BEGIN RAISE NOTICE 'peeked %', $1; RETURN true; END $$;
GRANT EXECUTE ON FUNCTION public.st_peek(text) TO regress_app;
SELECT count(*) AS jobs_of_st_closed FROM webhook_ingest.jobs WHERE source = 'st_closed';
SET ROLE regress_app;
SELECT state, count(*) AS visible FROM webhook_ingest.jobs WHERE id IN (:some_ids) GROUP BY 1 ORDER BY 1;
SELECT count(*) AS peeked_rows FROM webhook_ingest.jobs
 WHERE public.st_peek(state::text) AND id IN (:some_ids) AND state = 'dead';
SELECT state FROM webhook_ingest.jobs WHERE id = :d1;
SELECT payload FROM webhook_ingest.jobs WHERE id = :d1;
\echo :SQLSTATE
SELECT count(*) FROM webhook_ingest.job_history;
\echo :SQLSTATE
RESET ROLE;
DROP FUNCTION public.st_peek(text);

SELECT webhook_ingest.drop_source('st', force => true);
SELECT webhook_ingest.drop_source('st_keep');
SELECT webhook_ingest.drop_source('st_closed', force => true);
-- a dropped source's history leaves the view at once (it stays on disk until its partition goes)
SELECT count(*) AS jobs_of_dropped FROM webhook_ingest.jobs WHERE source IN ('st', 'st_closed');
