-- Issue 28: an object's jobs and a time window through the jobs view are an
-- index's work in every table under it (queue, job_history, the packed
-- history), with the same answers before and after packing; history().
-- The plans are pinned by their shape: each scan and the relation (or
-- partitions, as one) it reads, with sequential scans disabled, so that a
-- query an index can no longer serve shows a Seq Scan here whatever the
-- data's size.  (The worker packs on its own a minute after; here
-- _pack_history is called.)
\set VERBOSITY terse

SELECT webhook_ingest.add_source('hl_a', 'http://127.0.0.1:9/a/{external_id}',
                                 enqueue_roles => ARRAY['webhook_ingest_enqueue']::regrole[]);
SELECT webhook_ingest.add_source('hl_b', 'http://127.0.0.1:9/b/{external_id}',
                                 enqueue_roles => ARRAY['webhook_ingest_admin']::regrole[]);
SELECT webhook_ingest.pause_source('hl_a'), webhook_ingest.pause_source('hl_b');
CREATE ROLE regress_hl_app LOGIN IN ROLE webhook_ingest_enqueue;

-- A call's arguments, as EXPLAIN VERBOSE prints them.
CREATE FUNCTION pg_temp.top_level_args(call text) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    args text[] := '{}';
    depth integer := 0;
    quoted boolean := false;
    start integer := 1;
    c text;
BEGIN
    FOR i IN 1..length(call) LOOP
        c := substr(call, i, 1);
        IF c = '''' THEN
            quoted := NOT quoted;
        ELSIF NOT quoted AND c IN ('(', '[') THEN
            depth := depth + 1;
        ELSIF NOT quoted AND c IN (')', ']') THEN
            depth := depth - 1;
        ELSIF NOT quoted AND depth = 0 AND c = ',' THEN
            args := args || btrim(substr(call, start, i - start));
            start := i + 1;
        END IF;
    END LOOP;
    RETURN args || btrim(substr(call, start));
END
$$;
-- The scans of a query's plan on the tables that grow (the queue, the
-- history, jobs_legacy), each relation once (partitions as one), and what
-- the packed history's function is narrowed by.
CREATE FUNCTION pg_temp.plan_shape(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    l text;
    s text;
    args text[];
    seen text[] := '{}';
BEGIN
    FOR l IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || q LOOP
        IF l ~ 'Function Call: webhook_ingest\._packed_jobs\(' THEN
            -- its four arguments: NULL, or what they narrow by
            args := pg_temp.top_level_args(substring(l from '_packed_jobs\((.*)\)$'));
            s := format('_packed_jobs(%s, %s, %s, %s)',
                        CASE WHEN args[1] ~ '^NULL::' THEN 'NULL' ELSE 'id' END,
                        CASE WHEN args[2] ~ '^NULL::' THEN 'NULL' ELSE 'external_ids' END,
                        CASE WHEN args[3] ~ '^NULL::' THEN 'NULL' ELSE 'from' END,
                        CASE WHEN args[4] ~ '^NULL::' THEN 'NULL' ELSE 'to' END);
        ELSE
            s := substring(l from '((Seq Scan|Index Scan|Index Only Scan|Bitmap Index Scan|BitmapOr|BitmapAnd)( using [a-z0-9_]+)?( on [a-z_.0-9]+)?)');
            s := regexp_replace(regexp_replace(s, '_p[0-9]{8}_[0-9]{4}', '_p*', 'g'), 'webhook_ingest\.', '', 'g');
            CONTINUE WHEN s !~ '(queue|job_history|jobs_legacy|BitmapOr|BitmapAnd)';
        END IF;
        CONTINUE WHEN s IS NULL OR s = ANY (seen);
        seen := seen || s;
        RETURN NEXT s;
    END LOOP;
END
$$;
-- What _packed_jobs runs for these arguments, in the same form.
CREATE FUNCTION pg_temp.inner_shape(job_id bigint, external_ids text[], finished_from timestamptz,
                                    finished_to timestamptz) RETURNS SETOF text LANGUAGE sql AS $$
SELECT DISTINCT regexp_replace(substring(l from '((Seq Scan|Index Scan|Bitmap Index Scan|Bitmap Heap Scan)( using [a-z0-9_]+)?( on [a-z_.0-9]+)?)'),
                               '_p[0-9]{8}_[0-9]{4}', '_p*', 'g')
  FROM webhook_ingest._packed_jobs_plan(job_id, external_ids, finished_from, finished_to) p(n, l)
 WHERE l ~ 'Scan.* job_history_packed' ORDER BY 1
$$;

-- Pack what has settled by then, waiting out a storage round of the worker
-- that holds the packing's lock; the jobs packed.
CREATE FUNCTION pg_temp.pack(settled_before timestamptz) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint := 0;
    r record;
BEGIN
    FOR i IN 1..200 LOOP
        SELECT * INTO r FROM webhook_ingest._pack_history(settled_before, '1 minute');
        n := n + r.packed;
        EXIT WHEN NOT EXISTS (SELECT FROM webhook_ingest.job_history h WHERE h.finished_at < settled_before
                                 AND h.id > current_setting('regress.base')::bigint);
        PERFORM pg_sleep(0.05);
    END LOOP;
    RETURN n;
END
$$;

-- (base: a multiple of 128, so the blocks are the same whatever ids the suites took before)
SELECT (nextval('webhook_ingest.jobs_id_seq') + 1000) / 128 * 128 + 128 AS base \gset
SELECT setval('webhook_ingest.jobs_id_seq', :base + 1000) - :base AS past_base;
SELECT set_config('regress.base', :'base', false) IS NOT NULL AS set;

-- 600 done jobs of 60 objects, two sources (ten jobs an object, one every
-- 60 ids), finished over the last three days, one in five after a failed
-- attempt; then the newest job of the first ten objects queued (pending) and
-- of the next five dead
BEGIN;
SELECT webhook_ingest._ensure_partitions('webhook_ingest.job_history', now() - interval '4 days', now()) >= 0 AS made;
INSERT INTO webhook_ingest.jobs (id, source, external_id, state, events, attempts, last_status, created_at,
                                 started_at, finished_at)
SELECT :base + g, CASE WHEN g % 60 < 30 THEN 'hl_a' ELSE 'hl_b' END, 'obj-' || g % 60, 'done', 1, 1 + (g % 5 = 0)::int,
       200, now() - interval '3 days' + g * interval '7 min' - interval '2 s',
       now() - interval '3 days' + g * interval '7 min' - interval '1 s', now() - interval '3 days' + g * interval '7 min'
  FROM generate_series(1, 600) g;
COMMIT;
INSERT INTO webhook_ingest.jobs (id, source, external_id, state, attempts, last_error, finished_at)
SELECT :base + 600 + g, CASE WHEN g < 30 THEN 'hl_a' ELSE 'hl_b' END, 'obj-' || g,
       CASE WHEN g <= 10 THEN 'pending' ELSE 'dead' END::webhook_ingest.job_state,
       CASE WHEN g <= 10 THEN 0 ELSE 10 END, CASE WHEN g > 10 THEN 'attempt 10/10: HTTP 500' END,
       CASE WHEN g > 10 THEN now() - interval '1 hour' END
  FROM generate_series(1, 15) g;
ANALYZE webhook_ingest.queue;
CREATE TEMP TABLE truth AS SELECT * FROM webhook_ingest.jobs WHERE id > :base AND id <= :base + 615;
SELECT count(*) AS jobs, count(*) FILTER (WHERE state = 'done') AS done FROM truth;

-- The answers of every shape, against the truth (each true).
CREATE FUNCTION pg_temp.answers() RETURNS TABLE (shape text, right_answer boolean) LANGUAGE plpgsql AS $$
DECLARE
    o integer;
    src text;
    ok boolean;
    t timestamptz;
BEGIN
    shape := 'an object''s jobs (every object, and one that does not exist)';
    right_answer := true;
    FOR o IN 0..60 LOOP
        src := CASE WHEN o < 30 THEN 'hl_a' ELSE 'hl_b' END;
        SELECT coalesce((SELECT array_agg(j.* ORDER BY j.id)::text FROM webhook_ingest.jobs j
                          WHERE j.source = src AND j.external_id = 'obj-' || o), '')
             = coalesce((SELECT array_agg(t.* ORDER BY t.id)::text FROM truth t
                          WHERE t.source = src AND t.external_id = 'obj-' || o), '') INTO ok;
        right_answer := right_answer AND ok;
    END LOOP;
    RETURN NEXT;
    shape := 'its last job (ORDER BY id DESC LIMIT 1)';
    right_answer := true;
    FOR o IN 0..59 LOOP
        src := CASE WHEN o < 30 THEN 'hl_a' ELSE 'hl_b' END;
        SELECT (SELECT j.id FROM webhook_ingest.jobs j WHERE j.source = src AND j.external_id = 'obj-' || o
                 ORDER BY j.id DESC LIMIT 1)
             = (SELECT max(t.id) FROM truth t WHERE t.source = src AND t.external_id = 'obj-' || o) INTO ok;
        right_answer := right_answer AND ok;
    END LOOP;
    RETURN NEXT;
    shape := 'by external_id alone, and an IN list';
    SELECT (SELECT count(*) FROM webhook_ingest.jobs WHERE external_id = 'obj-7')
         = (SELECT count(*) FROM truth WHERE external_id = 'obj-7')
       AND (SELECT array_agg(id ORDER BY id) FROM webhook_ingest.jobs WHERE external_id IN ('obj-7', 'obj-42', 'none'))
         = (SELECT array_agg(id ORDER BY id) FROM truth WHERE external_id IN ('obj-7', 'obj-42'))
      INTO right_answer;
    RETURN NEXT;
    shape := 'time windows: the last hour, BETWEEN, an empty one, one that ends before it starts';
    right_answer := true;
    FOR t IN SELECT now() - interval '3 days' + g * interval '5 hours' FROM generate_series(0, 14) g LOOP
        SELECT (SELECT array_agg(id ORDER BY id) FROM webhook_ingest.jobs
                 WHERE id > current_setting('regress.base')::bigint AND finished_at BETWEEN t AND t + interval '40 min')
               IS NOT DISTINCT FROM
               (SELECT array_agg(id ORDER BY id) FROM truth WHERE finished_at BETWEEN t AND t + interval '40 min')
          INTO ok;
        right_answer := right_answer AND ok;
    END LOOP;
    SELECT right_answer
       AND (SELECT count(*) FROM webhook_ingest.jobs WHERE finished_at > now() - interval '61 minutes'
                                                      AND id > current_setting('regress.base')::bigint)
         = (SELECT count(*) FROM truth WHERE finished_at > now() - interval '61 minutes')
       AND (SELECT count(*) FROM webhook_ingest.jobs WHERE finished_at > now() + interval '1 minute') = 0
       AND (SELECT count(*) FROM webhook_ingest.jobs
             WHERE finished_at > now() - interval '1 day' AND finished_at < now() - interval '2 days') = 0
      INTO right_answer;
    RETURN NEXT;
END
$$;
SELECT * FROM pg_temp.answers();

-- packed: every done job of the three days (the newest are the packing's
-- too: their partition's time is past); the same answers
SELECT pg_temp.pack(now() + interval '1 minute') IS NOT NULL AS packed;
SELECT count(*) AS left_unpacked FROM webhook_ingest.job_history WHERE id > :base;
SELECT count(*) AS packed_jobs, bool_and(r.object_bits IS NOT NULL AND cardinality(r.object_checks) = cardinality(r.ids)
                                         AND r.last_finished = (SELECT max(f) FROM unnest(r.finished) f)) AS keyed
  FROM webhook_ingest.job_history_packed r, unnest(r.ids) i WHERE i > :base;
SELECT * FROM pg_temp.answers();

-- the plans: in the queue both partial indexes (active jobs, the others),
-- in job_history its external_id index, the packed history narrowed
SET enable_seqscan = off;
SELECT pg_temp.plan_shape($$SELECT state FROM webhook_ingest.jobs WHERE source = 'hl_a' AND external_id = 'obj-7'$$);
SELECT pg_temp.plan_shape($$SELECT * FROM webhook_ingest.jobs WHERE source = 'hl_a' AND external_id = 'obj-7'
                            ORDER BY id DESC LIMIT 1$$);
SELECT pg_temp.plan_shape($$SELECT id FROM webhook_ingest.jobs WHERE external_id IN ('obj-7', 'obj-8')$$);
-- (an ORM's: quoted, qualified, every column)
SELECT pg_temp.plan_shape($$SELECT "webhook_ingest"."jobs"."id", "webhook_ingest"."jobs"."state",
                                   "webhook_ingest"."jobs"."done_lsn" FROM "webhook_ingest"."jobs"
                             WHERE ("webhook_ingest"."jobs"."external_id" = 'obj-7'
                                    AND "webhook_ingest"."jobs"."source" = 'hl_a')
                             ORDER BY "webhook_ingest"."jobs"."id" DESC LIMIT 1$$);
-- jobs is the UNION ALL of its branches itself, flattened into the statement: the plan's top is
-- their Append (a view over _jobs_all was a subquery of its own, one more level of views, and
-- of copies of their tree, to plan for each statement; "Subquery Scan on jobs" then)
CREATE FUNCTION pg_temp.plan_top(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    l text;
BEGIN
    FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
        RETURN l;
    END LOOP;
END
$$;
SELECT pg_temp.plan_top($$SELECT id, state FROM webhook_ingest.jobs WHERE source = 'hl_a' AND external_id = 'obj-7'$$) AS top;
-- time windows: the queue's finished_at index, job_history's BRIN, the packed history narrowed
SELECT pg_temp.plan_shape($$SELECT count(*) FROM webhook_ingest.jobs WHERE finished_at > now() - interval '10 seconds'$$);
SELECT pg_temp.plan_shape($$SELECT id FROM webhook_ingest.jobs
                             WHERE finished_at BETWEEN now() - interval '2 days' AND now() - interval '1 day'$$);
-- a lookup by id, as before: the queue's primary key, job_history's id index, one block
SELECT pg_temp.plan_shape(format('SELECT state, done_lsn FROM webhook_ingest.jobs WHERE id = %s', :base + 17));
-- a prepared statement's generic plan: the same, with the parameters
PREPARE by_object(text, text) AS
SELECT id - current_setting('regress.base')::bigint AS job, state FROM webhook_ingest.jobs
 WHERE source = $1 AND external_id = $2 ORDER BY id DESC LIMIT 1;
PREPARE by_window(timestamptz, timestamptz) AS SELECT count(*) FROM webhook_ingest.jobs WHERE finished_at BETWEEN $1 AND $2;
SET plan_cache_mode = force_generic_plan;
SELECT pg_temp.plan_shape($$EXECUTE by_object('hl_b', 'obj-42')$$);
SELECT pg_temp.plan_shape($$EXECUTE by_window(now() - interval '1 day', now())$$);
EXECUTE by_object('hl_b', 'obj-42');
EXECUTE by_object('hl_a', 'obj-11');
EXECUTE by_object('hl_a', 'obj-7');
EXECUTE by_object('hl_b', 'obj-7');
EXECUTE by_object(NULL, NULL);
EXECUTE by_window(now() - interval '1 day', now() - interval '2 days');
RESET plan_cache_mode;
-- inside _packed_jobs: the object keys' GIN index, the spans' GiST index, the block index
SELECT pg_temp.inner_shape(NULL, '{obj-7}', NULL, NULL);
SELECT pg_temp.inner_shape(NULL, NULL, now() - interval '1 day', NULL);
SELECT pg_temp.inner_shape(:base + 17, NULL, NULL, NULL);
RESET enable_seqscan;

-- rows packed before 0.10.0 carry no keys (object_bits NULL): the index
-- holds them under key 0, which every lookup asks for too, until the
-- storage round keys them
UPDATE webhook_ingest.job_history_packed r SET object_bits = NULL, object_checks = NULL, last_finished = NULL
 WHERE r.block = (:base + 7) >> 7 AND (:base + 67) = ANY (r.ids);
SELECT count(*) AS unkeyed_rows FROM webhook_ingest.job_history_packed WHERE object_bits IS NULL;
SELECT * FROM pg_temp.answers();
SELECT webhook_ingest._key_packed_rows(10) AS keyed;
SELECT count(*) AS unkeyed_rows FROM webhook_ingest.job_history_packed WHERE object_bits IS NULL;
SELECT * FROM pg_temp.answers();

-- history(): an object's jobs with their webhooks; enqueue links each event
-- id to its job and counts duplicates on it; the same after the job is done
-- and packed
SELECT outcome FROM webhook_ingest.enqueue('hl_b', 'order-123', NULL, 'evt-1');
SELECT outcome FROM webhook_ingest.enqueue('hl_b', 'order-123', NULL, 'evt-2');
SELECT outcome FROM webhook_ingest.enqueue('hl_b', 'order-123', NULL, 'evt-1');
SELECT outcome FROM webhook_ingest.enqueue('hl_b', 'order-123', NULL, 'evt-1');
SELECT outcome FROM webhook_ingest.enqueue('hl_b', 'order-123', NULL);
SELECT row_number() OVER (ORDER BY job_id) AS job, state, webhooks, event_ids, duplicates, attempts, last_error,
       created_at <= now() AS has_times, done_lsn
  FROM webhook_ingest.history('hl_b', 'order-123');
UPDATE webhook_ingest.jobs SET state = 'done', attempts = 2, finished_at = now(),
                               done_lsn = '0/12345678'
 WHERE source = 'hl_b' AND external_id = 'order-123';
SELECT outcome FROM webhook_ingest.enqueue('hl_b', 'order-123', NULL, 'evt-3');
SELECT outcome FROM webhook_ingest.enqueue('hl_b', 'order-123', NULL, 'evt-2');
SELECT row_number() OVER (ORDER BY job_id) AS job, state, webhooks, event_ids, duplicates, attempts, done_lsn
  FROM webhook_ingest.history('hl_b', 'order-123');
SELECT pg_temp.pack(now() + interval '1 hour') IS NOT NULL AS packed;
SELECT count(*) AS first_job_packed FROM webhook_ingest.job_history_packed r, unnest(r.ids) i
 WHERE i = (SELECT min(job_id) FROM webhook_ingest.history('hl_b', 'order-123'));
SELECT row_number() OVER (ORDER BY job_id) AS job, state, webhooks, event_ids, duplicates, attempts, done_lsn
  FROM webhook_ingest.history('hl_b', 'order-123');
-- duplicates are counted up to 1 000 an event id (a replay past that writes nothing)
UPDATE webhook_ingest.event_ledger l SET duplicates = 998
 WHERE l.event_id = 'evt-3' AND l.source_id = (SELECT s.id FROM webhook_ingest.sources s WHERE s.name = 'hl_b');
SELECT outcome FROM webhook_ingest.enqueue('hl_b', 'order-123', NULL, 'evt-3');
SELECT outcome FROM webhook_ingest.enqueue('hl_b', 'order-123', NULL, 'evt-3');
SELECT outcome FROM webhook_ingest.enqueue('hl_b', 'order-123', NULL, 'evt-3');
SELECT duplicates FROM webhook_ingest.history('hl_b', 'order-123') WHERE 'evt-3' = ANY (event_ids);
-- a done job's error of its last failed attempt: in history(), not in jobs (NULL for done jobs, as before)
UPDATE webhook_ingest.job_history_packed r
   SET errors[array_position(r.ids, :base + 5)] = 'attempt 1/10 after 3 ms: HTTP 503; retrying in 1000 ms'
 WHERE r.block = (:base + 5) >> 7 AND :base + 5 = ANY (r.ids);
SELECT job_id - :base AS job, attempts, last_error FROM webhook_ingest.history('hl_a', 'obj-5') WHERE job_id = :base + 5;
SELECT last_error FROM webhook_ingest.jobs WHERE id = :base + 5;
SELECT count(*) AS none_of_another_object FROM webhook_ingest.history('hl_a', 'obj-42');
SELECT count(*) AS none_missing FROM webhook_ingest.history('hl_a', 'nothing');

-- no more than jobs lets a role see: history() is webhook_ingest_admin's; an
-- app role can call _packed_jobs for the sources it may enqueue into, and
-- gets only the columns the jobs view grants it
SET ROLE regress_hl_app;
SELECT * FROM webhook_ingest.history('hl_a', 'obj-7');
SELECT count(*) AS app_sees, count(external_id) + count(created_at) + count(last_error) AS ungranted_columns_seen
  FROM webhook_ingest._packed_jobs(NULL, '{obj-7}');
SELECT count(*) AS other_source FROM webhook_ingest._packed_jobs(NULL, '{obj-42}');
SELECT count(*) AS app_window FROM webhook_ingest._packed_jobs(NULL, NULL, now() - interval '4 days', now())
 WHERE id > current_setting('regress.base')::bigint;
SELECT external_id FROM webhook_ingest.jobs WHERE id = :base + 7;
SELECT * FROM webhook_ingest._packed_jobs_plan(NULL, '{obj-7}');
RESET ROLE;

SELECT webhook_ingest.drop_source('hl_a', force => true), webhook_ingest.drop_source('hl_b', force => true);
DROP ROLE regress_hl_app;
