/* webhook_ingest--0.1.0--0.2.0.sql: operate it from SQL - monitoring views, replay and cancel, pause, retention, replica read-your-writes */

\echo Use "ALTER EXTENSION webhook_ingest UPDATE TO '0.2.0'" to load this file. \quit

/*
 * A job an operator called off.  The new value cannot be used in this
 * transaction, so the index predicates below name the states it is not.
 */
ALTER TYPE webhook_ingest.job_state ADD VALUE IF NOT EXISTS 'cancelled';

-- Paused sources keep taking webhooks; the worker claims none of their jobs.
ALTER TABLE webhook_ingest.sources ADD COLUMN paused boolean NOT NULL DEFAULT false;

/*
 * The end of the commit record of the transaction that made the job done:
 * a standby that has replayed this far shows the handler's writes.  The
 * worker writes it right after that commit; jobs done before this version
 * get the current position, which is past all of them.
 */
ALTER TABLE webhook_ingest.jobs ADD COLUMN done_lsn pg_lsn;
COMMENT ON COLUMN webhook_ingest.jobs.done_lsn IS
    'commit LSN of the transaction that finished the job: wait_replayed(done_lsn) on a standby, then read';
UPDATE webhook_ingest.jobs SET done_lsn = pg_catalog.pg_current_wal_lsn() WHERE state = 'done';

/*
 * Storage for a hot queue: every job row is updated about three times
 * (claim, finish, done_lsn), the last one HOT; leave room on the page for it
 * and let autovacuum start early and run unthrottled on the churn.
 */
ALTER TABLE webhook_ingest.jobs SET (fillfactor = 80,
                                     autovacuum_vacuum_scale_factor = 0.02,
                                     autovacuum_vacuum_insert_scale_factor = 0.02,
                                     autovacuum_analyze_scale_factor = 0.05,
                                     autovacuum_vacuum_cost_delay = 0);
ALTER TABLE webhook_ingest.events SET (autovacuum_vacuum_scale_factor = 0.05,
                                       autovacuum_vacuum_cost_delay = 0);
/*
 * sources holds a handful of rows, too few for autovacuum's default analyze
 * threshold (50 changes): unanalyzed, the planner takes it for hundreds of
 * rows and plans queue_stats as an expensive query (JIT and all).  Analyze
 * it after any change, and now.
 */
ALTER TABLE webhook_ingest.sources SET (autovacuum_analyze_threshold = 1,
                                        autovacuum_analyze_scale_factor = 0);
ANALYZE webhook_ingest.sources;

-- Finished jobs that retention removes: done and cancelled (not dead).
CREATE INDEX jobs_finished ON webhook_ingest.jobs (finished_at)
    WHERE state <> ALL ('{pending,running,dead}'::webhook_ingest.job_state[]);
-- Dead jobs, per source: queue_stats counts them, retry_dead replays them.
CREATE INDEX jobs_dead ON webhook_ingest.jobs (source, finished_at)
    WHERE state = 'dead';

/*
 * Arm a wake-up of the worker for when the calling transaction commits.
 */
CREATE FUNCTION webhook_ingest._wake_worker_at_commit()
RETURNS void
AS 'MODULE_PATHNAME', 'webhook_ingest_wake_worker_at_commit'
LANGUAGE C VOLATILE STRICT;

/*
 * retry: run a finished job again (done, dead or cancelled), or a pending
 * one now rather than after its back-off.  A running job is left alone.
 * Guarded: only a job in one of those states changes, so a worker finishing
 * it at the same moment either wins (and this returns false) or loses.
 */
CREATE FUNCTION webhook_ingest.retry(job_id bigint)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    j webhook_ingest.jobs;
BEGIN
    IF job_id IS NULL THEN
        RAISE EXCEPTION 'job_id must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO j FROM webhook_ingest.jobs WHERE id = retry.job_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job % does not exist', job_id
            USING ERRCODE = 'no_data_found',
                  HINT = 'Finished jobs are removed after webhook_ingest.retention.';
    END IF;
    IF j.state = 'running' THEN
        RAISE NOTICE 'job % is running: not retried', job_id;
        RETURN false;
    END IF;
    IF j.state = 'pending' THEN
        UPDATE webhook_ingest.jobs
           SET next_attempt_at = CASE WHEN next_attempt_at = 'infinity' THEN next_attempt_at ELSE now() END,
               updated_at = now()
         WHERE id = job_id AND state = 'pending';
    ELSE
        BEGIN
            UPDATE webhook_ingest.jobs
               SET state = 'pending', attempts = 0, refetch = false, next_attempt_at = now(),
                   finished_at = NULL, done_lsn = NULL, last_error = NULL, last_status = NULL,
                   updated_at = now()
             WHERE id = job_id AND state IN ('done', 'dead', 'cancelled');
        EXCEPTION WHEN unique_violation THEN
            RAISE NOTICE 'job % not retried: job % is already active for %/%', job_id,
                (SELECT a.id FROM webhook_ingest.jobs a
                  WHERE a.source = j.source AND a.external_id = j.external_id
                    AND a.state IN ('pending', 'running')),
                j.source, j.external_id;
            RETURN false;
        END;
    END IF;
    PERFORM webhook_ingest._wake_worker_at_commit();
    RETURN true;
END
$fn$;
COMMENT ON FUNCTION webhook_ingest.retry(bigint) IS
    'run a done, dead or cancelled job again, or a pending one now; false if it is running or its object already has an active job';

/*
 * retry_dead: replay the dead jobs of a source that died at or after since,
 * one per object (its latest), skipping objects that have an active job.
 */
CREATE FUNCTION webhook_ingest.retry_dead(source text, since timestamptz DEFAULT '-infinity')
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    n bigint := 0;
    jid bigint;
BEGIN
    IF source IS NULL THEN
        RAISE EXCEPTION 'source must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT EXISTS (SELECT FROM webhook_ingest.sources s WHERE s.name = retry_dead.source) THEN
        RAISE EXCEPTION 'source "%" does not exist', source USING ERRCODE = 'undefined_object';
    END IF;
    FOR jid IN
        SELECT DISTINCT ON (d.external_id) d.id
          FROM webhook_ingest.jobs d
         WHERE d.source = retry_dead.source AND d.state = 'dead'
           AND d.finished_at >= coalesce(retry_dead.since, '-infinity')
         ORDER BY d.external_id, d.finished_at DESC, d.id DESC
    LOOP
        BEGIN
            UPDATE webhook_ingest.jobs
               SET state = 'pending', attempts = 0, refetch = false, next_attempt_at = now(),
                   finished_at = NULL, last_error = NULL, last_status = NULL, updated_at = now()
             WHERE id = jid AND state = 'dead';
            n := n + 1;
        EXCEPTION WHEN unique_violation THEN
            NULL;           -- the object is already queued: that job fetches it
        END;
    END LOOP;
    IF n > 0 THEN
        PERFORM webhook_ingest._wake_worker_at_commit();
    END IF;
    RETURN n;
END
$fn$;
COMMENT ON FUNCTION webhook_ingest.retry_dead(text, timestamptz) IS
    'replay the dead jobs of a source that died at or after since (latest per object); returns how many';

/*
 * cancel: call off a pending or running job.  A running job's fetch goes on,
 * but its result is dropped: the worker's completion is guarded by the
 * running state, so it never overwrites the cancel.
 */
CREATE FUNCTION webhook_ingest.cancel(job_id bigint)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF job_id IS NULL THEN
        RAISE EXCEPTION 'job_id must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    UPDATE webhook_ingest.jobs
       SET state = 'cancelled', finished_at = now(), updated_at = now(), refetch = false,
           lease_until = NULL, worker_pid = NULL,
           last_error = format('cancelled by %s', session_user)
     WHERE id = job_id AND state IN ('pending', 'running');
    IF FOUND THEN
        RETURN true;
    END IF;
    IF NOT EXISTS (SELECT FROM webhook_ingest.jobs WHERE id = job_id) THEN
        RAISE EXCEPTION 'job % does not exist', job_id
            USING ERRCODE = 'no_data_found',
                  HINT = 'Finished jobs are removed after webhook_ingest.retention.';
    END IF;
    RETURN false;
END
$fn$;
COMMENT ON FUNCTION webhook_ingest.cancel(bigint) IS
    'call off a pending or running job; false if it had already finished';

/*
 * pause_source / resume_source.  A paused source keeps accepting webhooks;
 * its pending jobs are parked (next_attempt_at = infinity) so claims never
 * scan past them, and the worker parks any that come due while it is
 * paused.  Fetches already in flight finish.  Resuming makes every parked
 * job due now.
 */
-- Both in one place: pausing parks the pending jobs, resuming makes them due now.
CREATE FUNCTION webhook_ingest._set_paused(name text, paused boolean)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    UPDATE webhook_ingest.sources s SET paused = _set_paused.paused, updated_at = now()
     WHERE s.name = _set_paused.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'source "%" does not exist', name USING ERRCODE = 'undefined_object';
    END IF;
    UPDATE webhook_ingest.jobs j
       SET next_attempt_at = CASE WHEN _set_paused.paused THEN 'infinity' ELSE now() END, updated_at = now()
     WHERE j.source = _set_paused.name AND j.state = 'pending'
       AND (j.next_attempt_at = 'infinity') <> _set_paused.paused;
    IF NOT _set_paused.paused THEN
        PERFORM webhook_ingest._wake_worker_at_commit();
    END IF;
END
$fn$;

CREATE FUNCTION webhook_ingest.pause_source(name text)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $fn$ SELECT webhook_ingest._set_paused(name, true) $fn$;
COMMENT ON FUNCTION webhook_ingest.pause_source(text) IS
    'stop fetching for a source; its webhooks are still accepted and wait';

CREATE FUNCTION webhook_ingest.resume_source(name text)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $fn$ SELECT webhook_ingest._set_paused(name, false) $fn$;
COMMENT ON FUNCTION webhook_ingest.resume_source(text) IS
    'fetch for a paused source again; its waiting jobs are due now';

/*
 * Replica read-your-writes (src/wait.c).
 */
-- SECURITY DEFINER: the application's role may wait without reading jobs.
CREATE FUNCTION webhook_ingest.wait_for_job(job_id bigint, timeout interval DEFAULT '30 seconds')
RETURNS boolean
AS 'MODULE_PATHNAME', 'webhook_ingest_wait_for_job'
LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION webhook_ingest.wait_for_job(bigint, interval) IS
    'on the primary: wait until the job is done and its done_lsn known (true), or until it is dead or cancelled or the timeout passes (false)';

-- A procedure: it must hold no snapshot while it waits (src/wait.c).
CREATE PROCEDURE webhook_ingest.wait_replayed(lsn pg_lsn, timeout interval DEFAULT '30 seconds')
AS 'MODULE_PATHNAME', 'webhook_ingest_wait_replayed'
LANGUAGE C;
COMMENT ON PROCEDURE webhook_ingest.wait_replayed(pg_lsn, interval) IS
    'on a standby: return once WAL is replayed up to lsn, raise query_canceled when the timeout passes; on a primary: once lsn is flushed';

/*
 * Monitoring.  Per-minute counts and latency histograms live in shared
 * memory (src/stats.c), filled by the worker; the views read no large table.
 */
CREATE FUNCTION webhook_ingest._recent_counts(minutes integer,
    OUT source text, OUT done bigint, OUT retried bigint, OUT dead bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'webhook_ingest_recent_counts'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION webhook_ingest._latency(minutes integer,
    OUT source text, OUT jobs bigint,
    OUT done_p50_ms double precision, OUT done_p95_ms double precision, OUT done_p99_ms double precision,
    OUT fetch_p50_ms double precision, OUT fetch_p95_ms double precision, OUT fetch_p99_ms double precision)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'webhook_ingest_latency'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION webhook_ingest._recent_failures(
    OUT failed_at timestamptz, OUT job_id bigint, OUT source text, OUT external_id text,
    OUT attempt integer, OUT http_status integer, OUT error text, OUT fetch_ms double precision,
    OUT outcome text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'webhook_ingest_recent_failures'
LANGUAGE C VOLATILE STRICT;

/*
 * queue_stats: the backlog per source, from the partial indexes on active
 * and dead jobs, and the worker's per-minute counts.
 */
CREATE VIEW webhook_ingest.queue_stats AS
SELECT s.name AS source,
       s.paused,
       coalesce(a.pending, 0) AS pending,
       coalesce(a.due_now, 0) AS due_now,
       coalesce(a.running, 0) AS running,
       coalesce(a.retry_waiting, 0) AS retry_waiting,
       coalesce(r.done, 0) AS done_last_hour,
       coalesce(r.retried, 0) AS retried_last_hour,
       coalesce(d.dead, 0) AS dead,
       now() - a.oldest AS backlog_age
  FROM webhook_ingest.sources s
  LEFT JOIN LATERAL (
       SELECT count(*) FILTER (WHERE j.state = 'pending') AS pending,
              count(*) FILTER (WHERE j.state = 'pending' AND j.next_attempt_at <= now() AND NOT s.paused) AS due_now,
              count(*) FILTER (WHERE j.state = 'running') AS running,
              count(*) FILTER (WHERE j.state = 'pending' AND j.next_attempt_at > now()
                                 AND j.next_attempt_at <> 'infinity') AS retry_waiting,
              min(j.created_at) AS oldest
         FROM webhook_ingest.jobs j
        WHERE j.source = s.name AND j.state = ANY ('{pending,running}'::webhook_ingest.job_state[])) a ON true
  LEFT JOIN LATERAL (
       SELECT count(*) AS dead FROM webhook_ingest.jobs j
        WHERE j.source = s.name AND j.state = 'dead') d ON true
  LEFT JOIN webhook_ingest._recent_counts(60) r ON r.source = s.name;
COMMENT ON VIEW webhook_ingest.queue_stats IS
    'per source: pending, due now, running, waiting to retry, done and retried in the last hour, dead, age of the oldest unfinished job';

CREATE VIEW webhook_ingest.latency AS
SELECT * FROM webhook_ingest._latency(5);
COMMENT ON VIEW webhook_ingest.latency IS
    'per source, over the last 5 minutes: enqueue-to-done and fetch duration percentiles, from fixed-size histograms in shared memory';

CREATE VIEW webhook_ingest.recent_failures AS
SELECT * FROM webhook_ingest._recent_failures() ORDER BY failed_at DESC;
COMMENT ON VIEW webhook_ingest.recent_failures IS
    'the latest failed attempts (up to 128, newest first): status, error, fetch time and whether it will be retried';

/*
 * Privileges: admins only, as before; a monitoring role may read the views.
 */
DO $do$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'webhook_ingest_monitor') THEN
        CREATE ROLE webhook_ingest_monitor NOLOGIN;
    END IF;
END
$do$;
REVOKE ALL ON ALL TABLES IN SCHEMA webhook_ingest FROM PUBLIC;
REVOKE ALL ON ALL ROUTINES IN SCHEMA webhook_ingest FROM PUBLIC;
-- The application may wait for its jobs and read their done_lsn (not their ids' contents).
GRANT EXECUTE ON FUNCTION webhook_ingest.wait_for_job(bigint, interval) TO webhook_ingest_enqueue;
GRANT EXECUTE ON PROCEDURE webhook_ingest.wait_replayed(pg_lsn, interval) TO webhook_ingest_enqueue;
GRANT SELECT (id, state, done_lsn) ON webhook_ingest.jobs TO webhook_ingest_enqueue;
GRANT USAGE ON SCHEMA webhook_ingest TO webhook_ingest_monitor;
GRANT SELECT ON webhook_ingest.queue_stats, webhook_ingest.worker_status,
                webhook_ingest.latency, webhook_ingest.recent_failures TO webhook_ingest_monitor;
GRANT EXECUTE ON FUNCTION webhook_ingest._recent_counts(integer), webhook_ingest._latency(integer),
                          webhook_ingest._recent_failures(), webhook_ingest._worker_status()
    TO webhook_ingest_monitor;
