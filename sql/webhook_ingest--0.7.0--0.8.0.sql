/* webhook_ingest--0.7.0--0.8.0.sql: done jobs packed a block of ids to a row; the ledger's time conversions inlined */

\echo Use "ALTER EXTENSION webhook_ingest UPDATE TO '0.8.0'" to load this file. \quit

/*
 * _seconds() is event_ledger.received's default, so every accepted event id
 * evaluated it.  0.6.0 wrote its body with extract(epoch FROM timestamptz),
 * which is only STABLE: an IMMUTABLE SQL function whose body is not
 * immutable is never inlined, so each enqueue ran it through the SQL
 * function executor (its body read back from the catalog and planned at
 * every statement): about a sixth of enqueue's time (bench/enqueue, issue
 * 17).  The same value from immutable parts (timestamptz minus timestamptz
 * is an interval of days and seconds; its epoch is exact), which the
 * planner inlines into the statement; _at() likewise, for the events view.
 */
CREATE OR REPLACE FUNCTION webhook_ingest._seconds(t timestamptz)
RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN extract(epoch FROM t - timestamptz '2000-01-01 00:00:00+00')::integer;

CREATE OR REPLACE FUNCTION webhook_ingest._at(seconds integer)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN pg_catalog.to_timestamp(seconds::double precision + 946684800);

/* ---- packed history: done jobs a block of ids to a row ---- */

/*
 * A done job costs about 129 B as a row of job_history (a tuple header, its
 * columns, an entry in the id index) beside the 100 B its event id costs in
 * the ledger: over 200 B per finished webhook for the dedup window (issue
 * 17).  Rows of job_history that have settled (finished a minute ago) are
 * packed by the worker's storage round: the jobs of one block of 128 ids
 * that finished in one partition's time, as arrays in one row of
 * job_history_packed (TOAST-compressed), found by the block number
 * (id >> 7).  The partitions of job_history are emptied that way and
 * dropped as soon as their time is past; job_history_packed is partitioned
 * by finished_at like job_history and its partitions are dropped whole past
 * retention.  A block's jobs that finish later (a retry of a dead one) make
 * another row of the same block.
 *
 * job_history keeps taking the jobs the worker finishes (one row each, as
 * before: a completion batch is a handful of jobs), what admins file by
 * hand, and the rows of 0.7.0: nothing is moved by the update, the worker
 * packs old rows a chunk at a time like new ones.
 */
CREATE TABLE webhook_ingest.job_history_packed (
    finished_at     timestamptz NOT NULL,
    block           bigint NOT NULL,
    ids             bigint[] NOT NULL,
    finished        timestamptz[] NOT NULL,
    created         timestamptz[] NOT NULL,
    started         timestamptz[] NOT NULL,
    source_ids      integer[] NOT NULL,
    events          integer[] NOT NULL,
    attempts        smallint[] NOT NULL,
    statuses        smallint[] NOT NULL,
    external_ids    text[] COLLATE "C" NOT NULL
) PARTITION BY RANGE (finished_at);
CREATE INDEX job_history_packed_block ON webhook_ingest.job_history_packed (block);
COMMENT ON TABLE webhook_ingest.job_history_packed IS
    'done jobs, a block of 128 ids (block = id >> 7) that finished in one partition''s time to a row, as arrays in id order; partitioned by the oldest finished_at of its row, a partition dropped whole after webhook_ingest.retention';
ALTER TABLE webhook_ingest.job_history_packed ENABLE ROW LEVEL SECURITY;
CREATE POLICY job_history_packed_admin ON webhook_ingest.job_history_packed TO webhook_ingest_admin USING (true);
REVOKE ALL ON webhook_ingest.job_history_packed FROM PUBLIC;
GRANT SELECT ON webhook_ingest.job_history_packed TO webhook_ingest_admin;

/*
 * The packed jobs the caller may read (all of them for the admin role, an
 * app role those of the sources it may enqueue into), or the one with that
 * id: src/job_history.c.  Not SECURITY DEFINER: it checks its caller, then
 * reads the table as its owner.  In the jobs view the planner gives it the
 * id of a query's `id = ...` (a constant or a parameter), so a lookup by id
 * reads one block, not every packed row.
 */
CREATE FUNCTION webhook_ingest._packed_jobs(job_id bigint DEFAULT NULL,
    OUT id bigint, OUT finished_at timestamptz, OUT created_at timestamptz, OUT started_at timestamptz,
    OUT source_id integer, OUT events integer, OUT attempts smallint, OUT last_status smallint,
    OUT external_id text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'webhook_ingest_packed_jobs'
LANGUAGE C STABLE CALLED ON NULL INPUT ROWS 1000;
GRANT EXECUTE ON FUNCTION webhook_ingest._packed_jobs(bigint) TO webhook_ingest_admin, webhook_ingest_enqueue;

CREATE VIEW webhook_ingest._jobs_packed (id, source, external_id, state, payload, events, refetch, attempts, last_error, last_status,
    created_at, updated_at, next_attempt_at, lease_until, worker_pid, finished_at, started_at, done_lsn)
    WITH (security_barrier) AS
SELECT h.id, s.name, h.external_id, 'done'::webhook_ingest.job_state, k.payload, h.events, false,
       h.attempts::integer, NULL::text, h.last_status::integer, h.created_at, h.finished_at, h.finished_at,
       NULL::timestamptz, NULL::integer, h.finished_at, h.started_at, b.done_lsn
  FROM webhook_ingest._packed_jobs() h
  JOIN webhook_ingest.sources s ON s.id = h.source_id
  LEFT JOIN webhook_ingest.done_batches b ON b.finished_at = h.finished_at
  LEFT JOIN (SELECT * FROM webhook_ingest.kept_payloads
             UNION ALL SELECT * FROM webhook_ingest.kept_payloads_overflow) k
         ON k.job_id = h.id AND k.kept_until > now()
 WHERE webhook_ingest._may_read_jobs(s.name);
REVOKE ALL ON webhook_ingest._jobs_packed FROM PUBLIC;
CREATE OR REPLACE VIEW webhook_ingest.jobs WITH (security_barrier) AS
SELECT * FROM webhook_ingest._jobs_queued
UNION ALL
SELECT * FROM webhook_ingest._jobs_finished
UNION ALL
SELECT * FROM webhook_ingest._jobs_packed
UNION ALL
SELECT * FROM webhook_ingest._jobs_unmoved;
COMMENT ON VIEW webhook_ingest.jobs IS
    'every job, as 0.5.0''s jobs table showed it: queue, job_history and job_history_packed (payload NULL unless kept) and rows not yet moved';

/*
 * A partition of job_history_packed with the bounds of a partition of
 * job_history (made alone and attached, a member of the extension, as
 * _ensure_partitions makes them), unless one holding that time exists:
 * true when the time [lower, upper) can be packed.  False when a packed
 * partition overlaps it only in part (retention changed the width since):
 * those rows stay where they are until retention drops them.  Under
 * lock_timeout: false when it cannot be made now.
 */
CREATE FUNCTION webhook_ingest._packed_partition_for(lower timestamptz, upper timestamptz)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    part text := format('job_history_packed_p%s', to_char(lower AT TIME ZONE 'UTC', 'YYYYMMDD"_"HH24MI'));
BEGIN
    IF EXISTS (SELECT FROM webhook_ingest._partitions('webhook_ingest.job_history_packed') p
                WHERE p.lower_bound <= lower AND upper <= p.upper_bound) THEN
        RETURN true;
    END IF;
    IF EXISTS (SELECT FROM webhook_ingest._partitions('webhook_ingest.job_history_packed') p
                WHERE p.lower_bound < upper AND lower < p.upper_bound) THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE webhook_ingest.%I (LIKE webhook_ingest.job_history_packed)', part);
    EXECUTE format('ALTER TABLE webhook_ingest.job_history_packed ATTACH PARTITION webhook_ingest.%I FOR VALUES FROM (%L) TO (%L)',
                   part, lower, upper);
    EXECUTE format('ALTER EXTENSION webhook_ingest ADD TABLE webhook_ingest.%I', part);
    RETURN true;
EXCEPTION WHEN lock_not_available OR duplicate_table THEN
    RETURN false;       -- next round
END
$fn$;

/*
 * Pack what has settled in job_history: for each partition whose rows
 * finished before settled_before, oldest first, chunks of up to 32 blocks
 * (4 096 ids) by id, each one statement that deletes the rows and inserts
 * their blocks; in the partition that takes rows now, only once 128 jobs
 * have settled or the oldest settled ten minutes ago, so that a trickle
 * still makes rows of many jobs.  The packed partitions its time needs are
 * made first; a partition they cannot be made for now (lock_timeout) waits
 * for the next round.  Takes the lock _unfile_job takes first, so a retry of
 * a done job finds it in one place or the other (without waiting for it: a
 * retry under way leaves the packing for the next round, the rest of the
 * storage round goes on).  Stops after budget.
 * Returns the jobs packed, and whether rows were left for lack of time.
 */
CREATE FUNCTION webhook_ingest._pack_history(settled_before timestamptz, budget interval DEFAULT '40 ms',
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
                         statuses, external_ids)
                    SELECT min(m.finished_at), m.id >> 7, array_agg(m.id ORDER BY m.id),
                           array_agg(m.finished_at ORDER BY m.id), array_agg(m.created_at ORDER BY m.id),
                           array_agg(m.started_at ORDER BY m.id), array_agg(m.source_id ORDER BY m.id),
                           array_agg(m.events ORDER BY m.id), array_agg(m.attempts ORDER BY m.id),
                           array_agg(m.last_status ORDER BY m.id), array_agg(m.external_id ORDER BY m.id)
                      FROM moved m GROUP BY m.id >> 7
                    RETURNING cardinality(ids) AS jobs)
                SELECT coalesce(sum(b.jobs), 0) FROM blocks b$q$, p.name)
               INTO n USING lo, hi, settled_before;
            packed := packed + n;
            IF clock_timestamp() - started > budget THEN
                behind := true;
                RETURN;
            END IF;
            EXECUTE format('SELECT min(h.id) FROM webhook_ingest.%I h WHERE h.id >= $2 AND h.finished_at < $1', p.name)
               INTO lo USING settled_before, hi;
        END LOOP;
    END LOOP;
END
$fn$;

/*
 * Take one job out of wherever it is (its kept payload too); false if none.
 * 0.6.0's, and the packed history: the job's element leaves its row (the
 * row goes when it was the last).
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
                   external_ids = external_ids[:r.k - 1] || external_ids[r.k + 1:]
             WHERE p.tableoid = r.tableoid AND p.ctid = r.ctid;
        END IF;
        RETURN true;
    END LOOP;
    DELETE FROM webhook_ingest.jobs_legacy l
     WHERE l.id = job_id AND l.id > (SELECT m.moved_upto FROM webhook_ingest.legacy_migration m);
    RETURN FOUND;
END
$fn$;

/*
 * The storage round (0.6.0's), with the packing: history settled for a
 * minute packed, the partitions of job_history it empties dropped once
 * their time is past (their disk back), those of job_history_packed past
 * retention dropped.
 */
CREATE OR REPLACE FUNCTION webhook_ingest._maintain_storage(move_batch integer DEFAULT 5000,
    OUT behind boolean, OUT history_until timestamptz, OUT kept_until timestamptz)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    width interval := webhook_ingest._partition_width();
    retention interval := webhook_ingest._retention();
    keep interval;
    removed bigint;
    pack record;
    p record;
    holds_rows boolean;
BEGIN
    behind := false;
    -- (expired ones and those made ahead at another width)
    PERFORM webhook_ingest._drop_partitions('webhook_ingest.job_history',
                                             CASE WHEN retention IS NULL THEN '-infinity' ELSE now() - retention END);
    PERFORM webhook_ingest._drop_partitions('webhook_ingest.job_history_packed',
                                             CASE WHEN retention IS NULL THEN '-infinity' ELSE now() - retention END);
    PERFORM webhook_ingest._drop_partitions('webhook_ingest.kept_payloads', now());
    PERFORM webhook_ingest._ensure_partitions('webhook_ingest.job_history', now(), now() + 3 * width);
    SELECT max(s.keep_payloads) INTO keep FROM webhook_ingest.sources s;
    IF keep IS NOT NULL THEN
        PERFORM webhook_ingest._ensure_partitions('webhook_ingest.kept_payloads', now(), now() + keep + width);
    END IF;
    DELETE FROM webhook_ingest.kept_payloads_overflow d
     WHERE d.ctid = ANY (ARRAY(SELECT x.ctid FROM webhook_ingest.kept_payloads_overflow x
                                WHERE x.kept_until <= now() LIMIT 1000));
    IF retention IS NOT NULL THEN
        DELETE FROM webhook_ingest.job_history_overflow d
         WHERE d.ctid = ANY (ARRAY(SELECT x.ctid FROM webhook_ingest.job_history_overflow x
                                    WHERE x.finished_at < now() - retention LIMIT 1000));
        GET DIAGNOSTICS removed = ROW_COUNT;
        behind := removed = 1000;
        DELETE FROM webhook_ingest.done_batches b
         WHERE b.finished_at = ANY (ARRAY(SELECT x.finished_at FROM webhook_ingest.done_batches x
                                           WHERE x.finished_at < now() - retention - width
                                           ORDER BY x.finished_at LIMIT 10000));
        GET DIAGNOSTICS removed = ROW_COUNT;
        behind := behind OR removed = 10000;
        DELETE FROM webhook_ingest.queue q
         WHERE q.id = ANY (ARRAY(SELECT c.id FROM webhook_ingest.queue c
                                  WHERE c.state <> ALL ('{pending,running,dead}'::webhook_ingest.job_state[])
                                    AND c.finished_at < now() - retention
                                  ORDER BY c.finished_at LIMIT 1000 FOR UPDATE SKIP LOCKED))
           AND q.state = 'cancelled';
        GET DIAGNOSTICS removed = ROW_COUNT;
        behind := behind OR removed = 1000;
    END IF;
    IF webhook_ingest._move_legacy_jobs(move_batch) > 0 THEN
        behind := true;
    END IF;
    SELECT * INTO pack FROM webhook_ingest._pack_history(now() - interval '1 minute');
    behind := behind OR pack.behind;
    -- Emptied by the packing: a partition whose time is past is dropped (five
    -- minutes on: a completion batch, handler included, is shorter); the one
    -- taking rows has its indexes rebuilt once they are big and it is empty
    -- (after a burst, say), so what they held goes back too.
    FOR p IN SELECT * FROM webhook_ingest._partitions('webhook_ingest.job_history')
              WHERE lower_bound <= now() LOOP
        EXECUTE format('SELECT EXISTS (SELECT FROM (SELECT h.id FROM webhook_ingest.%I h ORDER BY h.id LIMIT 1) x)',
                       p.name) INTO holds_rows;
        CONTINUE WHEN holds_rows;
        IF p.upper_bound <= now() - interval '5 minutes' THEN
            EXIT WHEN webhook_ingest._drop_partition(p.name) = 'locked';       -- next round
        ELSIF p.upper_bound > now()
              AND pg_catalog.pg_indexes_size(format('webhook_ingest.%I', p.name)::regclass) > 262144 THEN
            BEGIN
                EXECUTE format('REINDEX TABLE webhook_ingest.%I', p.name);
            EXCEPTION WHEN lock_not_available THEN
                NULL;       -- next round
            END;
        END IF;
    END LOOP;
    history_until := webhook_ingest._horizon('webhook_ingest.job_history');
    kept_until := webhook_ingest._horizon('webhook_ingest.kept_payloads');
END
$fn$;

REVOKE ALL ON FUNCTION webhook_ingest._packed_partition_for(timestamptz, timestamptz),
                       webhook_ingest._pack_history(timestamptz, interval) FROM PUBLIC;

/* ---- a superuser's proxy stays the superuser's (audit 0.7.0, second pass, P1) ---- */

/*
 * Only a superuser may give a source its own proxy (or '' for none), because
 * it goes around webhook_ingest.proxy.  But a webhook_ingest_admin could
 * still change the url_template of a source a superuser had given one, and
 * so send fetches to any host through it (with proxy '': directly, past the
 * egress proxy the superuser meant as the SSRF barrier).  _guard_source now
 * refuses that (42501) unless the same change clears the proxy
 * (test/audit/FINDINGS-0.7.0-second.md, TAP 117).  0.7.0's function with one
 * block added before the client certificate check.
 */
CREATE OR REPLACE FUNCTION webhook_ingest._guard_source()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    owner oid;
BEGIN
    IF TG_OP = 'INSERT' OR
       (NEW.name, NEW.url_template, NEW.handler, NEW.headers, NEW.timeout_ms, NEW.max_attempts)
       IS DISTINCT FROM (OLD.name, OLD.url_template, OLD.handler, OLD.headers, OLD.timeout_ms, OLD.max_attempts) THEN
        PERFORM webhook_ingest._check_source(NEW.name, NEW.url_template, NEW.handler, NEW.headers,
                                             NEW.timeout_ms, NEW.max_attempts);
    END IF;
    -- (jsonpath has no equality: compared as text)
    IF TG_OP = 'INSERT' OR
       (NEW.signature_scheme, NEW.signing_secrets, NEW.signature_tolerance,
        NEW.external_id_path::text, NEW.event_id_path::text)
       IS DISTINCT FROM (OLD.signature_scheme, OLD.signing_secrets, OLD.signature_tolerance,
                         OLD.external_id_path::text, OLD.event_id_path::text) THEN
        PERFORM webhook_ingest._check_intake(NEW.signature_scheme, NEW.signing_secrets, NEW.signature_tolerance,
                                             NEW.external_id_path, NEW.event_id_path);
    END IF;
    IF TG_OP = 'INSERT' OR
       (NEW.weight, NEW.rate_limit, NEW.rate_burst, NEW.max_in_flight)
       IS DISTINCT FROM (OLD.weight, OLD.rate_limit, OLD.rate_burst, OLD.max_in_flight) THEN
        PERFORM webhook_ingest._check_limits(NEW.weight, NEW.rate_limit, NEW.rate_burst, NEW.max_in_flight);
    END IF;
    IF TG_OP = 'INSERT' OR NEW.tls_ca IS DISTINCT FROM OLD.tls_ca THEN
        PERFORM webhook_ingest._check_tls_ca(NEW.tls_ca);
    END IF;
    IF TG_OP = 'INSERT' OR NEW.proxy IS DISTINCT FROM OLD.proxy THEN
        PERFORM webhook_ingest._check_proxy(NEW.proxy);
        -- A source's own proxy (or '' for none) goes around webhook_ingest.proxy, the superuser's
        -- egress policy: only a superuser sets one; anyone who may write sources can clear it.
        IF NEW.proxy IS NOT NULL AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
            RAISE EXCEPTION 'permission denied to set the proxy of source "%"', webhook_ingest._clip(NEW.name)
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = 'A source''s proxy overrides webhook_ingest.proxy, which only a superuser sets.',
                      HINT = 'Ask a superuser to set it, or leave it NULL to use webhook_ingest.proxy.';
        END IF;
    END IF;
    -- The same policy for where such a source points: its proxy was chosen by a superuser for
    -- its url_template, and a non-superuser who points it elsewhere would take that way out
    -- (proxy '' : direct) to any host, around webhook_ingest.proxy.  Clearing the proxy in the
    -- same change (alter_source(..., reset_proxy => true)) is fine.
    IF TG_OP = 'UPDATE' AND NEW.proxy IS NOT NULL AND NEW.url_template IS DISTINCT FROM OLD.url_template
       AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
        RAISE EXCEPTION 'permission denied to change the url_template of source "%"', webhook_ingest._clip(NEW.name)
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'The source has its own proxy, which only a superuser sets: its fetches would go to the new URL that way, around webhook_ingest.proxy.',
                  HINT = 'Ask a superuser to change it, or reset its proxy in the same call (reset_proxy => true) to use webhook_ingest.proxy.';
    END IF;
    -- (its key is checked with it by _set_tls_client: a restore loads the key after the source)
    IF TG_OP = 'INSERT' OR NEW.tls_client_cert IS DISTINCT FROM OLD.tls_client_cert THEN
        PERFORM webhook_ingest._check_tls_client(NEW.tls_client_cert, NULL, false);
    END IF;
    IF NEW.handler IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.handler IS DISTINCT FROM OLD.handler) THEN
        SELECT p.proowner INTO owner FROM pg_catalog.pg_proc p WHERE p.oid = NEW.handler;
        IF NOT pg_catalog.pg_has_role(current_user, owner, 'USAGE') THEN
            RAISE EXCEPTION 'permission denied to register handler %: it is owned by role %',
                            NEW.handler, owner::regrole
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = format('Handlers run as their owner, and role %s does not have the privileges of role %s.',
                                      current_user, owner::regrole),
                      HINT = 'Register it as a role that has them (a member of the owner role), or as a superuser.';
        END IF;
    END IF;
    -- Any change of the row is one for the worker too (it ends a throttle of the source).
    IF TG_OP = 'UPDATE' THEN
        NEW.updated_at := now();
    END IF;
    IF NEW.enqueue_roles IS NOT NULL
       AND (TG_OP = 'INSERT' OR NEW.enqueue_roles::oid[] IS DISTINCT FROM OLD.enqueue_roles::oid[]) THEN
        IF pg_catalog.cardinality(NEW.enqueue_roles) = 0 THEN
            RAISE EXCEPTION 'enqueue_roles must not be empty'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'NULL (reset_enqueue_roles => true in alter_source) lets every member of webhook_ingest_enqueue enqueue.';
        END IF;
        IF pg_catalog.array_position(NEW.enqueue_roles, NULL) IS NOT NULL THEN
            RAISE EXCEPTION 'enqueue_roles must not contain NULL' USING ERRCODE = 'null_value_not_allowed';
        END IF;
    END IF;
    RETURN NEW;
END
$fn$;
