/* webhook_ingest--0.9.0--0.10.0.sql: apply workers, hardening (third pass), history lookups, reconciliation */

\echo Use "ALTER EXTENSION webhook_ingest UPDATE TO '0.10.0'" to load this file. \quit

/* ==== issue 28: history you can ask questions of ==== */

/*
 * 0.8.0 packed done jobs a block of 128 ids to a row of job_history_packed,
 * found by id only: a query for an object's jobs (source, external_id) or
 * for a time window on finished_at unpacked every row kept (152 ms at
 * 100 000 jobs, growing with the history).  Now each of those is an
 * index's work, in every table the jobs view reads:
 *
 *   queue         a partial index on (source, external_id) for the jobs that
 *                 are neither pending nor running (queue_active_object has
 *                 those), one on finished_at where it is set; nothing enqueue
 *                 writes (its rows have neither) touches them.
 *   job_history   a BRIN Bloom index on external_id (a btree in the overflow
 *                 table).
 *   job_history_packed  a GIN index on the row's object keys (object_keys.c:
 *                 a bucket of each job's SHA-256 key, a few dozen jobs a
 *                 bucket) with a check array in the row, and a GiST index on
 *                 each row's span of finished_at (last_finished: its latest).
 *
 * The planner hook that gave _packed_jobs() a query's id gives it the
 * query's external ids and finished_at bounds as well
 * (src/packed_jobs_planner.c), and a support function tells the planner
 * how few rows that returns.
 *
 * Rows packed before this version carry no keys: the index holds them
 * under key 0, which every lookup asks for too, and the storage round keys
 * them a batch at a time (_key_packed_rows).  Building the two indexes
 * reads no packed arrays: about a second per 10 M jobs packed.
 */

-- The keys (src/object_keys.c); _object_keys is the GIN index's expression (its cost: up to 128 digests,
-- so that the planner reads a partition through the index rather than computing them for every row).
CREATE FUNCTION webhook_ingest._object_keys(external_ids text[], bits smallint)
RETURNS integer[]
AS 'MODULE_PATHNAME', 'webhook_ingest_object_keys'
LANGUAGE C IMMUTABLE PARALLEL SAFE COST 1000;
CREATE FUNCTION webhook_ingest._object_checks(external_ids text[])
RETURNS smallint[]
AS 'MODULE_PATHNAME', 'webhook_ingest_object_checks'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

/*
 * The bits a row of a partition expected to hold `jobs` jobs is keyed at:
 * a bucket of about 24 jobs (an even number of bits, 4 to 24).
 */
CREATE FUNCTION webhook_ingest._object_bits(jobs double precision)
RETURNS smallint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN least(24, greatest(4, 2 * round(log(2.0, greatest(jobs, 1.0)::numeric / 24) / 2)))::smallint;

ALTER TABLE webhook_ingest.job_history_packed
    ADD COLUMN last_finished timestamptz,
    ADD COLUMN object_bits smallint,
    ADD COLUMN object_checks smallint[],
    ADD COLUMN errors text[];
-- (256 B a row: kept in the row, so that the rows a bucket names are told apart without reading their ids)
ALTER TABLE webhook_ingest.job_history_packed ALTER COLUMN object_checks SET STORAGE MAIN;
COMMENT ON COLUMN webhook_ingest.job_history_packed.last_finished IS
    'the latest finished_at of the row''s jobs (NULL in rows packed before 0.10.0 until keyed)';
COMMENT ON COLUMN webhook_ingest.job_history_packed.object_bits IS
    'the bits the row''s object keys are bucketed at (src/object_keys.c); NULL: not keyed yet';
COMMENT ON COLUMN webhook_ingest.job_history_packed.object_checks IS
    'the low 16 bits of each job''s object key, in id order';
COMMENT ON COLUMN webhook_ingest.job_history_packed.errors IS
    'each job''s last failed attempt''s error (NULL: none, or packed before 0.10.0)';
-- (its pending list at the least, 64 kB: the pages a list took stay in the index when it is merged, in
-- every partition, and a lookup reads the list whole)
CREATE INDEX job_history_packed_object ON webhook_ingest.job_history_packed
    USING gin (webhook_ingest._object_keys(external_ids, object_bits)) WITH (gin_pending_list_limit = 64);
CREATE INDEX job_history_packed_span ON webhook_ingest.job_history_packed
    USING gist (tstzrange(finished_at, last_finished, '[]'));

-- A done job keeps the error of its last failed attempt (for history(); the jobs view shows NULL, as before).
ALTER TABLE webhook_ingest.job_history ADD COLUMN last_error text;
ALTER TABLE webhook_ingest.job_history_overflow ADD COLUMN last_error text;
/*
 * An object's jobs not packed yet (minutes of them): a Bloom filter of each
 * range of 8 pages (about 500 jobs) of job_history, about 1.3 B a job, where
 * a btree would keep some 40 B a job until the partition is dropped or its
 * index rebuilt; a lookup reads the filters and the ranges that may hold the
 * id.  The storage round summarizes the newest ranges (_summarize_history).
 */
DO $do$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_opclass o WHERE o.opcname = 'text_bloom_ops') THEN
        CREATE INDEX job_history_object ON webhook_ingest.job_history
            USING brin (external_id text_bloom_ops (n_distinct_per_range = 500, false_positive_rate = 0.01))
            WITH (pages_per_range = 8, autosummarize = on);
    ELSE
        CREATE INDEX job_history_object ON webhook_ingest.job_history (external_id);   -- (13: no Bloom BRIN)
    END IF;
END
$do$;
CREATE INDEX job_history_overflow_object ON webhook_ingest.job_history_overflow (external_id);

/*
 * _packed_jobs with the narrowings (job_id, external_ids, finished_from,
 * finished_to: src/job_history.c) and the jobs' errors; 0.8.0's
 * _packed_jobs(job_id) goes once the view reads this one.
 */
CREATE FUNCTION webhook_ingest._packed_jobs_support(internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'webhook_ingest_packed_jobs_support'
LANGUAGE C STRICT;
CREATE FUNCTION webhook_ingest._packed_jobs(job_id bigint DEFAULT NULL, external_ids text[] DEFAULT NULL,
    finished_from timestamptz DEFAULT NULL, finished_to timestamptz DEFAULT NULL,
    OUT id bigint, OUT finished_at timestamptz, OUT created_at timestamptz, OUT started_at timestamptz,
    OUT source_id integer, OUT events integer, OUT attempts smallint, OUT last_status smallint,
    OUT external_id text, OUT last_error text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'webhook_ingest_packed_jobs'
LANGUAGE C STABLE CALLED ON NULL INPUT ROWS 1000 SUPPORT webhook_ingest._packed_jobs_support;

/*
 * The jobs view's parts gain attempt_error: the last failed attempt's error
 * (a queued job's last_error; a done job's, kept in its history row).
 * _jobs_all is their union with it, read by history(); jobs is _jobs_all
 * with 0.5.0's columns, as before.  _jobs_queued's filter holds for every
 * row, but spelled as two cases it lets the planner find a queued object's
 * jobs through both partial indexes (a BitmapOr).
 */
CREATE INDEX queue_settled_object ON webhook_ingest.queue (source, external_id)
    WHERE state <> ALL ('{pending,running}'::webhook_ingest.job_state[]);
CREATE INDEX queue_finished ON webhook_ingest.queue (finished_at) WHERE finished_at IS NOT NULL;
CREATE OR REPLACE VIEW webhook_ingest._jobs_queued (id, source, external_id, state, payload, events, refetch, attempts,
    last_error, last_status, created_at, updated_at, next_attempt_at, lease_until, worker_pid, finished_at, started_at,
    done_lsn, attempt_error)
    WITH (security_barrier) AS
SELECT q.id, q.source, q.external_id, q.state, q.payload, q.events, q.refetch, q.attempts, q.last_error,
       q.last_status, q.created_at, q.updated_at, q.next_attempt_at, q.lease_until, q.worker_pid,
       q.finished_at, q.started_at, NULL::pg_lsn AS done_lsn, q.last_error
  FROM webhook_ingest.queue q
 WHERE (q.state = ANY ('{pending,running}'::webhook_ingest.job_state[])
        OR q.state <> ALL ('{pending,running}'::webhook_ingest.job_state[]))
   AND webhook_ingest._may_read_jobs(q.source);
CREATE OR REPLACE VIEW webhook_ingest._jobs_finished (id, source, external_id, state, payload, events, refetch, attempts,
    last_error, last_status, created_at, updated_at, next_attempt_at, lease_until, worker_pid, finished_at, started_at,
    done_lsn, attempt_error)
    WITH (security_barrier) AS
SELECT h.id, s.name, h.external_id, 'done'::webhook_ingest.job_state, k.payload, h.events, false,
       h.attempts::integer, NULL::text, h.last_status::integer, h.created_at, h.finished_at, h.finished_at,
       NULL::timestamptz, NULL::integer, h.finished_at, h.started_at, b.done_lsn, h.last_error
  FROM (SELECT * FROM webhook_ingest.job_history
        UNION ALL SELECT * FROM webhook_ingest.job_history_overflow) h
  JOIN webhook_ingest.sources s ON s.id = h.source_id
  LEFT JOIN webhook_ingest.done_batches b ON b.finished_at = h.finished_at
  LEFT JOIN (SELECT * FROM webhook_ingest.kept_payloads
             UNION ALL SELECT * FROM webhook_ingest.kept_payloads_overflow) k
         ON k.job_id = h.id AND k.kept_until > now()
 WHERE webhook_ingest._may_read_jobs(s.name);
CREATE OR REPLACE VIEW webhook_ingest._jobs_packed (id, source, external_id, state, payload, events, refetch, attempts,
    last_error, last_status, created_at, updated_at, next_attempt_at, lease_until, worker_pid, finished_at, started_at,
    done_lsn, attempt_error)
    WITH (security_barrier) AS
SELECT h.id, s.name, h.external_id, 'done'::webhook_ingest.job_state, k.payload, h.events, false,
       h.attempts::integer, NULL::text, h.last_status::integer, h.created_at, h.finished_at, h.finished_at,
       NULL::timestamptz, NULL::integer, h.finished_at, h.started_at, b.done_lsn, h.last_error
  FROM webhook_ingest._packed_jobs(NULL::bigint, NULL::text[], NULL::timestamptz, NULL::timestamptz) h
  JOIN webhook_ingest.sources s ON s.id = h.source_id
  LEFT JOIN webhook_ingest.done_batches b ON b.finished_at = h.finished_at
  LEFT JOIN (SELECT * FROM webhook_ingest.kept_payloads
             UNION ALL SELECT * FROM webhook_ingest.kept_payloads_overflow) k
         ON k.job_id = h.id AND k.kept_until > now()
 WHERE webhook_ingest._may_read_jobs(s.name);
CREATE OR REPLACE VIEW webhook_ingest._jobs_unmoved (id, source, external_id, state, payload, events, refetch, attempts,
    last_error, last_status, created_at, updated_at, next_attempt_at, lease_until, worker_pid, finished_at, started_at,
    done_lsn, attempt_error)
    WITH (security_barrier) AS
SELECT l.id, l.source, l.external_id, l.state, l.payload, l.events, l.refetch, l.attempts, l.last_error,
       l.last_status, l.created_at, l.updated_at, l.next_attempt_at, l.lease_until, l.worker_pid,
       l.finished_at, l.started_at, l.done_lsn, l.last_error
  FROM webhook_ingest.jobs_legacy l
 WHERE l.id > (SELECT m.moved_upto FROM webhook_ingest.legacy_migration m)
   AND webhook_ingest._may_read_jobs(l.source);
CREATE VIEW webhook_ingest._jobs_all WITH (security_barrier) AS
SELECT * FROM webhook_ingest._jobs_queued
UNION ALL
SELECT * FROM webhook_ingest._jobs_finished
UNION ALL
SELECT * FROM webhook_ingest._jobs_packed
UNION ALL
SELECT * FROM webhook_ingest._jobs_unmoved;
COMMENT ON VIEW webhook_ingest._jobs_all IS
    'every job, with the jobs view''s columns and attempt_error (the last failed attempt''s error, done jobs'' too)';
CREATE OR REPLACE VIEW webhook_ingest.jobs WITH (security_barrier) AS
SELECT a.id, a.source, a.external_id, a.state, a.payload, a.events, a.refetch, a.attempts, a.last_error,
       a.last_status, a.created_at, a.updated_at, a.next_attempt_at, a.lease_until, a.worker_pid, a.finished_at,
       a.started_at, a.done_lsn
  FROM webhook_ingest._jobs_all a;
DROP FUNCTION webhook_ingest._packed_jobs(bigint);
-- EXPLAIN of what _packed_jobs runs for these arguments (for operators, and the plan tests)
CREATE FUNCTION webhook_ingest._packed_jobs_plan(job_id bigint DEFAULT NULL, external_ids text[] DEFAULT NULL,
    finished_from timestamptz DEFAULT NULL, finished_to timestamptz DEFAULT NULL)
RETURNS TABLE (n integer, line text)
AS 'MODULE_PATHNAME', 'webhook_ingest_packed_jobs_plan'
LANGUAGE C VOLATILE CALLED ON NULL INPUT;
REVOKE ALL ON webhook_ingest._jobs_all FROM PUBLIC;
GRANT SELECT ON webhook_ingest._jobs_all TO webhook_ingest_admin;
REVOKE ALL ON FUNCTION webhook_ingest._object_keys(text[], smallint), webhook_ingest._object_checks(text[]),
                       webhook_ingest._object_bits(double precision), webhook_ingest._packed_jobs_support(internal),
                       webhook_ingest._packed_jobs(bigint, text[], timestamptz, timestamptz),
                       webhook_ingest._packed_jobs_plan(bigint, text[], timestamptz, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._packed_jobs_plan(bigint, text[], timestamptz, timestamptz)
    TO webhook_ingest_admin;
GRANT EXECUTE ON FUNCTION webhook_ingest._packed_jobs(bigint, text[], timestamptz, timestamptz)
    TO webhook_ingest_admin, webhook_ingest_enqueue;

/*
 * The rows of job_history_packed not keyed yet (packed before 0.10.0): up
 * to n of them get their object keys' bits and checks and their
 * last_finished, a partition at a time (the bits from its size).  The
 * storage round calls it after the packing (_pack_history) until none is
 * left; found through the object index's key 0.  Returns the rows keyed.
 */
CREATE FUNCTION webhook_ingest._key_packed_rows(n integer)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    p record;
    left_unkeyed boolean;
    keyed bigint;
    done bigint := 0;
    unkeyed constant text := '(SELECT x.ctid FROM webhook_ingest.%I x
                                WHERE webhook_ingest._object_keys(x.external_ids, x.object_bits) OPERATOR(pg_catalog.@>) ''{0}''
                                  AND x.object_bits IS NULL LIMIT %s)';
BEGIN
    FOR p IN SELECT x.name, greatest(c.reltuples, 1) * 128 AS jobs
               FROM webhook_ingest._partitions('webhook_ingest.job_history_packed') x
               JOIN pg_catalog.pg_class c ON c.relname = x.name AND c.relnamespace = 'webhook_ingest'::regnamespace LOOP
        EXIT WHEN done >= n;
        EXECUTE format('SELECT EXISTS ' || unkeyed, p.name, 1) INTO left_unkeyed;
        CONTINUE WHEN NOT left_unkeyed;
        EXECUTE format('UPDATE webhook_ingest.%I r
                           SET object_bits = webhook_ingest._object_bits($1),
                               object_checks = webhook_ingest._object_checks(r.external_ids),
                               last_finished = (SELECT max(f) FROM pg_catalog.unnest(r.finished) f)
                         WHERE r.ctid = ANY (ARRAY' || unkeyed || ')', p.name, p.name, n - done)
          USING p.jobs;
        GET DIAGNOSTICS keyed = ROW_COUNT;
        done := done + keyed;
    END LOOP;
    RETURN done;
END
$fn$;

/*
 * 0.8.0's packing, the rows keyed as they are made: their object keys'
 * bits (from how many jobs their partition is expected to hold: what the
 * one before it held, or what it holds so far), the checks, last_finished
 * and the jobs' errors.  Then rows packed before 0.10.0 are
 * keyed (a batch a round), and the BRIN indexes of the ledger and
 * job_history kept up (_summarize_ledger, _summarize_history, below).
 */
CREATE OR REPLACE FUNCTION webhook_ingest._pack_history(settled_before timestamptz, budget interval DEFAULT '40 ms',
    OUT packed bigint, OUT behind boolean)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    started timestamptz := clock_timestamp();
    p record;
    lo bigint;
    hi bigint;
    settled bigint;
    oldest timestamptz;
    n bigint;
    expected double precision;
    saved_lock_timeout text := current_setting('lock_timeout');
BEGIN
    packed := 0;
    behind := false;
    BEGIN
        PERFORM FROM webhook_ingest.legacy_migration FOR UPDATE NOWAIT;
    EXCEPTION WHEN lock_not_available THEN
        RETURN;     -- a retry or cancel of a done job is under way: next round
    END;
    FOR p IN SELECT * FROM webhook_ingest._partitions('webhook_ingest.job_history')
              WHERE lower_bound < settled_before ORDER BY lower_bound LOOP
        CONTINUE WHEN NOT webhook_ingest._packed_partition_for(p.lower_bound, p.upper_bound);
        -- (each chunk's successor is looked for from where it ended, by the id
        -- index: not through the dead index entries of the chunks packed before it)
        EXECUTE format('SELECT min(h.id) FROM webhook_ingest.%I h WHERE h.finished_at < $1', p.name)
           INTO lo USING settled_before;
        -- (the jobs its packed partition is to hold: as many as the one before it of its width held, or
        -- what it holds so far: their statistics' rows, of at most 128 jobs; and a chunk.  Not what the rate
        -- since the partition began would make of it: after a burst that would be a bucket a job.)
        SELECT greatest(coalesce(max(greatest(c.reltuples, 0))
                                     FILTER (WHERE x.lower_bound <= p.lower_bound AND p.upper_bound <= x.upper_bound), 0),
                        coalesce(max(greatest(c.reltuples, 0))
                                     FILTER (WHERE x.upper_bound = p.lower_bound
                                               AND x.upper_bound - x.lower_bound = p.upper_bound - p.lower_bound), 0))
               * 128 + 4096
          INTO expected
          FROM webhook_ingest._partitions('webhook_ingest.job_history_packed') x
          JOIN pg_catalog.pg_class c ON c.relname = x.name AND c.relnamespace = 'webhook_ingest'::regnamespace;
        LOOP
            EXIT WHEN lo IS NULL;
            hi := ((lo >> 7) + 32) << 7;
            IF p.upper_bound > settled_before THEN
                -- a few settled jobs of the partition taking rows wait for more (or ten minutes)
                EXECUTE format('SELECT count(*), min(x.finished_at) FROM (SELECT h.finished_at FROM webhook_ingest.%I h
                                 WHERE h.id >= $2 AND h.finished_at < $1 ORDER BY h.id LIMIT 128) x', p.name)
                   INTO settled, oldest USING settled_before, lo;
                EXIT WHEN settled < 128 AND oldest >= settled_before - interval '10 minutes';
            END IF;
            EXECUTE format($q$
                WITH moved AS (
                    DELETE FROM webhook_ingest.%I h
                     WHERE h.id >= $1 AND h.id < $2 AND h.finished_at < $3
                    RETURNING h.*),
                blocks AS (
                    INSERT INTO webhook_ingest.job_history_packed
                        (finished_at, block, ids, finished, created, started, source_ids, events, attempts,
                         statuses, external_ids, last_finished, object_bits, object_checks, errors)
                    SELECT min(m.finished_at), m.id >> 7, array_agg(m.id ORDER BY m.id),
                           array_agg(m.finished_at ORDER BY m.id), array_agg(m.created_at ORDER BY m.id),
                           array_agg(m.started_at ORDER BY m.id), array_agg(m.source_id ORDER BY m.id),
                           array_agg(m.events ORDER BY m.id), array_agg(m.attempts ORDER BY m.id),
                           array_agg(m.last_status ORDER BY m.id), array_agg(m.external_id ORDER BY m.id),
                           max(m.finished_at), webhook_ingest._object_bits($4),
                           webhook_ingest._object_checks(array_agg(m.external_id ORDER BY m.id)),
                           array_agg(m.last_error ORDER BY m.id)
                      FROM moved m GROUP BY m.id >> 7
                    RETURNING cardinality(ids) AS jobs)
                SELECT coalesce(sum(b.jobs), 0) FROM blocks b$q$, p.name)
               INTO n USING lo, hi, settled_before, expected;
            packed := packed + n;
            IF clock_timestamp() - started > budget THEN
                behind := true;
                RETURN;
            END IF;
            EXECUTE format('SELECT min(h.id) FROM webhook_ingest.%I h WHERE h.id >= $2 AND h.finished_at < $1', p.name)
               INTO lo USING settled_before, hi;
        END LOOP;
    END LOOP;
    IF webhook_ingest._key_packed_rows(1000) = 1000 THEN
        behind := true;
    END IF;
    BEGIN
        -- (briefly: a vacuum of the ledger holds the lock it needs, and a wait of a second would cancel it)
        PERFORM set_config('lock_timeout', '50ms', true);
        PERFORM webhook_ingest._summarize_ledger();
        PERFORM webhook_ingest._summarize_history();
        PERFORM set_config('lock_timeout', saved_lock_timeout, true);
    EXCEPTION WHEN lock_not_available THEN
        NULL;       -- next round (the setting is put back with the subtransaction)
    END;
END
$fn$;

/*
 * 0.8.0's _unfile_job: a packed job's element leaves every array of its
 * row, the checks and errors too (last_finished stays: still a bound).
 */
CREATE OR REPLACE FUNCTION webhook_ingest._unfile_job(job_id bigint)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    r record;
BEGIN
    PERFORM FROM webhook_ingest.legacy_migration FOR UPDATE;
    DELETE FROM webhook_ingest.queue q WHERE q.id = job_id;
    IF FOUND THEN
        RETURN true;
    END IF;
    DELETE FROM webhook_ingest.kept_payloads k WHERE k.job_id = _unfile_job.job_id;
    DELETE FROM webhook_ingest.kept_payloads_overflow k WHERE k.job_id = _unfile_job.job_id;
    DELETE FROM webhook_ingest.job_history h WHERE h.id = job_id;
    IF FOUND THEN
        RETURN true;
    END IF;
    DELETE FROM webhook_ingest.job_history_overflow h WHERE h.id = job_id;
    IF FOUND THEN
        RETURN true;
    END IF;
    FOR r IN SELECT p.tableoid, p.ctid, cardinality(p.ids) AS n, pg_catalog.array_position(p.ids, job_id) AS k
               FROM webhook_ingest.job_history_packed p
              WHERE p.block = job_id >> 7 AND job_id = ANY (p.ids) FOR UPDATE LOOP
        IF r.n = 1 THEN
            DELETE FROM webhook_ingest.job_history_packed p WHERE p.tableoid = r.tableoid AND p.ctid = r.ctid;
        ELSE
            -- element k out of every array
            UPDATE webhook_ingest.job_history_packed p
               SET ids = ids[:r.k - 1] || ids[r.k + 1:], finished = finished[:r.k - 1] || finished[r.k + 1:],
                   created = created[:r.k - 1] || created[r.k + 1:], started = started[:r.k - 1] || started[r.k + 1:],
                   source_ids = source_ids[:r.k - 1] || source_ids[r.k + 1:],
                   events = events[:r.k - 1] || events[r.k + 1:], attempts = attempts[:r.k - 1] || attempts[r.k + 1:],
                   statuses = statuses[:r.k - 1] || statuses[r.k + 1:],
                   external_ids = external_ids[:r.k - 1] || external_ids[r.k + 1:],
                   object_checks = object_checks[:r.k - 1] || object_checks[r.k + 1:],
                   errors = errors[:r.k - 1] || errors[r.k + 1:]
             WHERE p.tableoid = r.tableoid AND p.ctid = r.ctid;
        END IF;
        RETURN true;
    END LOOP;
    DELETE FROM webhook_ingest.jobs_legacy l
     WHERE l.id = job_id AND l.id > (SELECT m.moved_upto FROM webhook_ingest.legacy_migration m);
    RETURN FOUND;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._key_packed_rows(integer) FROM PUBLIC;

/*
 * Which job each accepted event id went to, and how often it came again
 * (a duplicate): enqueue writes job_id with the event id (src/enqueue.c)
 * and counts duplicates on its row.  NULL for event ids accepted before
 * 0.10.0 (and those an INSERT into the events view or import_events
 * adds).  history() finds a job's event ids through the BRIN index on
 * received: the ledger is filled in arrival order (and refilled so as
 * purge_events frees its oldest pages), so a page range holds the ids of a
 * short time.
 */
ALTER TABLE webhook_ingest.event_ledger ADD COLUMN job_id bigint, ADD COLUMN duplicates integer;
COMMENT ON COLUMN webhook_ingest.event_ledger.job_id IS
    'the job the webhook went to (NULL: accepted before 0.10.0, or not through enqueue/receive)';
COMMENT ON COLUMN webhook_ingest.event_ledger.duplicates IS
    'how many more times the event id came and was refused as a duplicate, up to 1000 (NULL: none)';
CREATE INDEX event_ledger_received ON webhook_ingest.event_ledger USING brin (received)
    WITH (pages_per_range = 4, autosummarize = on);

/*
 * The BRIN index's upkeep, in the storage round (_pack_history calls it).
 * purge_events deletes the expired ids page by page and new ones fill the
 * freed space, but a range's summary only ever widens: once the walk has
 * passed, a range would span a week.  So the summaries of the ranges the
 * walk has passed since the last call are dropped (up to max_pages pages),
 * then every range without one is summarized again (and the newest pages
 * for the first time): a range holds ids of a few seconds, and a lookup
 * reads the pages of a job's time.  Returns the ranges dropped.
 */
ALTER TABLE webhook_ingest.purge_position ADD COLUMN summaries_from bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN webhook_ingest.purge_position.summaries_from IS
    'the first page of event_ledger whose BRIN summary has not been redone since purge_events walked it';
CREATE FUNCTION webhook_ingest._summarize_ledger(max_pages integer DEFAULT 4000)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    per_range constant integer := 4;        -- event_ledger_received's pages_per_range
    from_page bigint;
    to_page bigint;
    pages bigint := pg_catalog.pg_relation_size('webhook_ingest.event_ledger')
                    / pg_catalog.current_setting('block_size')::bigint;
    dropped integer := 0;
BEGIN
    SELECT p.summaries_from, p.next_page INTO from_page, to_page FROM webhook_ingest.purge_position p FOR UPDATE;
    IF to_page < from_page THEN
        to_page := pages;       -- the walk went round: to the end first
    END IF;
    to_page := least(to_page, from_page + max_pages);
    FOR r IN (from_page / per_range) .. (to_page - 1) / per_range LOOP
        EXIT WHEN r * per_range >= to_page;
        PERFORM pg_catalog.brin_desummarize_range('webhook_ingest.event_ledger_received', r * per_range);
        dropped := dropped + 1;
    END LOOP;
    UPDATE webhook_ingest.purge_position SET summaries_from = CASE WHEN to_page >= pages THEN 0 ELSE to_page END;
    PERFORM pg_catalog.brin_summarize_new_values('webhook_ingest.event_ledger_received');
    RETURN dropped;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._summarize_ledger(integer) FROM PUBLIC;

/*
 * The newest pages of the partitions of job_history that take rows now (or
 * did a minute ago) summarized in their BRIN indexes (external_id,
 * finished_at), so that a lookup reads the pages of its id or time and not
 * every page added since autovacuum last came.  The storage round calls it
 * (_pack_history).  Returns the ranges summarized.
 */
CREATE FUNCTION webhook_ingest._summarize_history()
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    i record;
    ranges integer := 0;
BEGIN
    FOR i IN SELECT x.indexrelid::regclass AS index
               FROM webhook_ingest._partitions('webhook_ingest.job_history') p
               JOIN pg_catalog.pg_index x ON x.indrelid = format('webhook_ingest.%I', p.name)::regclass
               JOIN pg_catalog.pg_class c ON c.oid = x.indexrelid
               JOIN pg_catalog.pg_am a ON a.oid = c.relam AND a.amname = 'brin'
              WHERE p.lower_bound <= now() AND p.upper_bound > now() - interval '1 minute' LOOP
        ranges := ranges + pg_catalog.brin_summarize_new_values(i.index);
    END LOOP;
    RETURN ranges;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._summarize_history() FROM PUBLIC;

/*
 * history(source, external_id): every job of the object that is kept, in
 * order, with its webhooks (the event ids accepted into it and how many
 * duplicates of them came), attempts, state, the last failed attempt's
 * error (kept for done jobs too), done_lsn and times.  An invoker's
 * function over the jobs view's parts: the same row filter as jobs
 * (enqueue_roles), and only roles that may read the tables under it
 * (webhook_ingest_admin) may call it.
 */
CREATE FUNCTION webhook_ingest.history(source text, external_id text)
RETURNS TABLE (job_id bigint, state webhook_ingest.job_state, webhooks integer, event_ids text[],
               duplicates bigint, attempts integer, last_status integer, last_error text, created_at timestamptz,
               started_at timestamptz, finished_at timestamptz, done_lsn pg_lsn)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
SELECT j.id, j.state, j.events, e.event_ids, coalesce(e.duplicates, 0), j.attempts, j.last_status, j.attempt_error,
       j.created_at, j.started_at, j.finished_at, j.done_lsn
  FROM webhook_ingest._jobs_all j
  LEFT JOIN LATERAL (
       -- (received is the enqueue's second, rounded: a margin of two)
       SELECT array_agg(l.event_id ORDER BY l.received, l.event_id) AS event_ids, sum(l.duplicates) AS duplicates
         FROM webhook_ingest.event_ledger l
        WHERE l.job_id = j.id
          AND l.source_id = (SELECT s.id FROM webhook_ingest.sources s WHERE s.name = j.source)
          AND l.received >= webhook_ingest._seconds(j.created_at) - 2
          AND l.received <= webhook_ingest._seconds(coalesce(j.finished_at, now())) + 2) e ON true
 WHERE j.source = history.source AND j.external_id = history.external_id
 ORDER BY j.id
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest.history(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest.history(text, text) TO webhook_ingest_admin;
