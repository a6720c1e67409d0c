/* webhook_ingest--0.9.0--0.10.0.sql: apply workers, hardening (third pass), history lookups, reconciliation */

\echo Use "ALTER EXTENSION webhook_ingest UPDATE TO '0.10.0'" to load this file. \quit

/* ==== issue 26: apply workers ==== */

/*
 * worker_status: a row for each database's worker (its fetcher, as before,
 * with the database's totals) and, after it, one per apply worker; the new
 * columns say which (role, applier), how many of the jobs in flight are
 * fetched and held for an apply worker (applying), how many jobs it
 * completed (applied), the time spent in handlers (handler_ms) and, for the
 * fetcher, which handlers it hands over alone after a crash, and why
 * (alone_handlers).
 */
DROP VIEW webhook_ingest.worker_status;
DROP FUNCTION webhook_ingest._worker_status();
CREATE FUNCTION webhook_ingest._worker_status(
    OUT pid integer, OUT database text, OUT state text, OUT started_at timestamptz,
    OUT in_flight integer, OUT claimed bigint, OUT fetched bigint, OUT succeeded bigint,
    OUT retried bigint, OUT dead bigint, OUT handler_errors bigint, OUT bytes bigint,
    OUT last_error text, OUT last_error_at timestamptz,
    OUT connections_opened bigint, OUT tls_connections_opened bigint,
    OUT role text, OUT applier integer, OUT applying integer, OUT applied bigint,
    OUT handler_ms double precision, OUT alone_handlers text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'webhook_ingest_worker_status_all'
LANGUAGE C VOLATILE STRICT;
CREATE VIEW webhook_ingest.worker_status AS SELECT * FROM webhook_ingest._worker_status();
COMMENT ON VIEW webhook_ingest.worker_status IS
    'one row per database worker of the cluster (role fetcher: claims and fetches, the database''s totals) and one '
    'per apply worker (role applier: completes what the fetcher hands over, runs the handlers): pid, database, state, '
    'jobs in flight, of them applying (fetched, held for an apply worker), counters since it started, handler_ms, '
    'alone_handlers (handlers completed one per batch after a crash, and why), last error';
REVOKE ALL ON FUNCTION webhook_ingest._worker_status() FROM PUBLIC;
REVOKE ALL ON webhook_ingest.worker_status FROM PUBLIC;
GRANT SELECT ON webhook_ingest.worker_status TO webhook_ingest_admin, webhook_ingest_monitor;
GRANT EXECUTE ON FUNCTION webhook_ingest._worker_status() TO webhook_ingest_admin, webhook_ingest_monitor;

/*
 * What this database's fetcher holds per source: jobs in flight, a throttle,
 * and of the jobs in flight those fetched and waiting for an apply worker.
 * queue_stats shows it (waiting_for_applier); it replaces _scheduler_state().
 */
CREATE FUNCTION webhook_ingest._fetcher_state(
    OUT source text, OUT in_flight integer, OUT throttled_until timestamptz, OUT throttled_by text,
    OUT waiting_for_applier integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'webhook_ingest_scheduler_state'
LANGUAGE C STABLE ROWS 10;
COMMENT ON FUNCTION webhook_ingest._fetcher_state() IS
    'per source, from the fetcher of this database: jobs in flight, until when the upstream throttled it, results '
    'waiting for an apply worker';
REVOKE ALL ON FUNCTION webhook_ingest._fetcher_state() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._fetcher_state() TO webhook_ingest_admin, webhook_ingest_monitor;

CREATE OR REPLACE VIEW webhook_ingest.queue_stats AS
SELECT q.source COLLATE "C" AS source, q.paused, q.pending, q.due_now, q.running, q.retry_waiting,
       q.done_last_hour, q.retried_last_hour, q.dead, q.backlog_age,
       coalesce(t.in_flight, 0) AS in_flight, t.throttled_until, t.throttled_by,
       coalesce(t.waiting_for_applier, 0) AS waiting_for_applier
  FROM webhook_ingest._queue_stats() q
  LEFT JOIN webhook_ingest._fetcher_state() t ON t.source = q.source;
DROP FUNCTION webhook_ingest._scheduler_state();
