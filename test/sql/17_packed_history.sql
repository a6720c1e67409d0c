-- 0.8.0's packed history: settled done jobs, a block of 128 ids to a row of
-- job_history_packed, read back through the jobs view exactly as before, a
-- lookup by id narrowed to one block by the planner hook (src/job_history.c).
-- (The worker packs on its own a minute after; here _pack_history is called.)
\set VERBOSITY terse

SELECT webhook_ingest.add_source('pk_a', 'http://127.0.0.1:9/a/{external_id}',
                                 enqueue_roles => ARRAY['webhook_ingest_enqueue']::regrole[]);
SELECT webhook_ingest.add_source('pk_b', 'http://127.0.0.1:9/b/{external_id}',
                                 enqueue_roles => ARRAY['webhook_ingest_admin']::regrole[]);
SELECT webhook_ingest.pause_source('pk_a'), webhook_ingest.pause_source('pk_b');
CREATE ROLE regress_pk_app LOGIN IN ROLE webhook_ingest_enqueue;
CREATE FUNCTION pg_temp.plan_of(q text) RETURNS SETOF text LANGUAGE plpgsql AS
$$ DECLARE l text; BEGIN FOR l IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || q LOOP RETURN NEXT l; END LOOP; END $$;
-- (base: a multiple of 128, so the blocks are the same whatever ids the suites took before)
SELECT (nextval('webhook_ingest.jobs_id_seq') + 1000) / 128 * 128 + 128 AS base \gset
SELECT setval('webhook_ingest.jobs_id_seq', :base + 1000) - :base AS past_base;

-- 300 done jobs of two sources, finished two days ago (filed through the
-- view, as a restore or an admin would; in one transaction with the
-- partitions they need, which the worker drops while they are past and empty)
BEGIN;
SELECT webhook_ingest._ensure_partitions('webhook_ingest.job_history', now() - interval '3 days', now()) >= 0 AS made;
INSERT INTO webhook_ingest.jobs (id, source, external_id, state, events, attempts, last_status, created_at,
                                 started_at, finished_at)
SELECT :base + g, CASE WHEN g % 3 = 0 THEN 'pk_b' ELSE 'pk_a' END, 'obj-' || g, 'done', 1 + g % 4, 1 + g % 2,
       CASE WHEN g % 50 = 0 THEN NULL ELSE 200 END,
       now() - interval '2 days' + g * interval '1 min' - interval '2.5 s',
       CASE WHEN g % 40 = 0 THEN NULL ELSE now() - interval '2 days' + g * interval '1 min' - interval '1.25 s' END,
       now() - interval '2 days' + g * interval '1 min'
  FROM generate_series(1, 300) g;
COMMIT;
SELECT count(*) AS filed FROM webhook_ingest.job_history WHERE id > :base AND id <= :base + 300;
CREATE TEMP TABLE before AS SELECT * FROM webhook_ingest.jobs WHERE id > :base AND id <= :base + 300;

-- packed: the first round makes their packed partition and moves nothing
-- (rows move into it from the next transaction, when every reader sees it),
-- the second packs them all: nothing left in job_history, every job once in
-- job_history_packed, each row one block of ids in id order
SELECT packed, behind FROM webhook_ingest._pack_history(now() - interval '1 minute', '1 minute');
SELECT packed, behind FROM webhook_ingest._pack_history(now() - interval '1 minute', '1 minute');
SELECT count(*) AS left_unpacked FROM webhook_ingest.job_history WHERE id > :base AND id <= :base + 300;
SELECT count(*) AS packed_jobs, count(DISTINCT i) AS distinct_ids,
       bool_and(b.block = i >> 7) AS each_in_its_block
  FROM webhook_ingest.job_history_packed b, unnest(b.ids) i WHERE i > :base AND i <= :base + 300;
SELECT bool_and(ids = (SELECT array_agg(x ORDER BY x) FROM unnest(ids) x)) AS ids_in_order,
       bool_and(cardinality(ids) = cardinality(external_ids) AND cardinality(ids) = cardinality(started)) AS arrays_agree
  FROM webhook_ingest.job_history_packed;

-- the jobs view shows them exactly as before, every column
SELECT count(*) AS same_rows FROM webhook_ingest.jobs j JOIN before b ON (j.*)::text = (b.*)::text;
SELECT count(*) AS all_rows FROM webhook_ingest.jobs WHERE id > :base AND id <= :base + 300;

-- a lookup by id reads one block: the planner gives _packed_jobs the id
-- (a literal, either way round, a parameter of a prepared statement, a
-- PL/pgSQL variable); other conditions read them all, with the same answer
SELECT bool_or(l LIKE '%Function Call: webhook_ingest._packed_jobs(%' || (:base + 17) || '%') AS narrowed
  FROM pg_temp.plan_of(format('SELECT * FROM webhook_ingest.jobs WHERE id = %s', :base + 17)) l;
SELECT bool_or(l LIKE '%Function Call: webhook_ingest._packed_jobs(%' || (:base + 17) || '%') AS narrowed_commuted
  FROM pg_temp.plan_of(format('SELECT state FROM webhook_ingest.jobs WHERE %s = id', :base + 17)) l;
SELECT bool_or(l LIKE '%Function Call: webhook_ingest._packed_jobs(NULL%') AS reads_all
  FROM pg_temp.plan_of(format('SELECT * FROM webhook_ingest.jobs WHERE id > %s', :base + 17)) l;
SELECT (j.*)::text = (b.*)::text AS found_as_before FROM webhook_ingest.jobs j, before b
 WHERE j.id = :base + 17 AND b.id = :base + 17;
SELECT count(*) AS found_by_range FROM webhook_ingest.jobs WHERE id > :base + 290 AND id <= :base + 300;
PREPARE by_id(bigint) AS SELECT id - :base AS job, state, done_lsn FROM webhook_ingest.jobs WHERE id = $1;
SET plan_cache_mode = force_generic_plan;
SELECT bool_or(l LIKE '%Function Call: webhook_ingest._packed_jobs(COALESCE($1, %') AS narrowed_generic
  FROM pg_temp.plan_of(format('EXECUTE by_id(%s)', :base + 18)) l;
EXECUTE by_id(:base + 18);
EXECUTE by_id(:base + 300);
EXECUTE by_id(:base + 301);
EXECUTE by_id(NULL);
RESET plan_cache_mode;
SELECT set_config('regress.base', :'base', false) IS NOT NULL AS set;
DO $$
DECLARE
    want bigint := current_setting('regress.base')::bigint + 19;
    got text;
BEGIN
    SELECT external_id INTO got FROM webhook_ingest.jobs WHERE id = want;
    RAISE NOTICE 'plpgsql lookup: %', got;
END
$$;

-- an app role sees the packed jobs of its sources only, through the view and
-- calling _packed_jobs itself (it checks its caller)
SET ROLE regress_pk_app;
SELECT count(*) AS app_sees, count(*) FILTER (WHERE state = 'done') AS done
  FROM webhook_ingest.jobs WHERE id > :base AND id <= :base + 300;
SELECT count(*) AS app_direct, count(DISTINCT source_id) AS sources,
       count(external_id) + count(created_at) + count(started_at) + count(events) + count(attempts)
       + count(last_status) AS ungranted_columns_seen
  FROM webhook_ingest._packed_jobs() WHERE id > :base AND id <= :base + 300;
SELECT count(*) AS other_sources_job FROM webhook_ingest._packed_jobs(:base + 3);
SELECT count(*) AS its_sources_job FROM webhook_ingest._packed_jobs(:base + 4);
SELECT count(*) FROM webhook_ingest.job_history_packed;
\echo :SQLSTATE
RESET ROLE;

-- retry of a packed done job: back in the queue under its id; the rest of
-- its row stays
SELECT cardinality(ids) > 2 AS row_holds_others FROM webhook_ingest.job_history_packed
 WHERE block = (:base + 20) >> 7 AND :base + 20 = ANY (ids);
SELECT webhook_ingest.retry(:base + 20) AS retried;
SELECT id - :base AS job, state, payload IS NULL AS no_payload FROM webhook_ingest.jobs
 WHERE id BETWEEN :base + 19 AND :base + 21 ORDER BY id;
SELECT count(*) AS still_packed FROM webhook_ingest.job_history_packed WHERE :base + 20 = ANY (ids);
SELECT count(*) AS neighbours_packed FROM webhook_ingest.job_history_packed b, unnest(b.ids) i
 WHERE i IN (:base + 19, :base + 21);
-- an admin's UPDATE of a packed done job refiles it (one row, changed); a
-- DELETE takes it out
UPDATE webhook_ingest.jobs SET events = 99 WHERE id = :base + 22;
SELECT id - :base AS job, events, state FROM webhook_ingest.jobs WHERE id = :base + 22;
SELECT count(*) AS in_job_history FROM webhook_ingest.job_history WHERE id = :base + 22;
DELETE FROM webhook_ingest.jobs WHERE id = :base + 23;
SELECT count(*) AS deleted_gone FROM webhook_ingest.jobs WHERE id = :base + 23;
SELECT count(*) AS total_now FROM webhook_ingest.jobs WHERE id > :base AND id <= :base + 300;

-- the last job of a row: the row goes
CREATE TEMP TABLE one_block AS
SELECT b.block, b.ids FROM webhook_ingest.job_history_packed b WHERE b.block = (:base + 300) >> 7;
DO $$
DECLARE
    i bigint;
BEGIN
    FOR i IN SELECT unnest(ids) FROM one_block LOOP
        PERFORM webhook_ingest._unfile_job(i);
    END LOOP;
END
$$;
SELECT count(*) AS block_rows_left FROM webhook_ingest.job_history_packed b, one_block o WHERE b.block = o.block;

-- the partitions of job_history_packed follow those of job_history (one
-- day each here) and are members of the extension
SELECT count(*) > 0 AS has_partitions,
       bool_and(d.deptype = 'e') AS members
  FROM pg_inherits i JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = i.inhrelid
                                     AND d.refclassid = 'pg_extension'::regclass
 WHERE i.inhparent = 'webhook_ingest.job_history_packed'::regclass;

SELECT webhook_ingest.drop_source('pk_a', force => true), webhook_ingest.drop_source('pk_b', force => true);
DROP ROLE regress_pk_app;
