/* webhook_ingest--0.2.0--0.3.0.sql: production-safe - handlers run as their owners, an admin role, per-source app access */

\echo Use "ALTER EXTENSION webhook_ingest UPDATE TO '0.3.0'" to load this file. \quit

/*
 * Nothing here rewrites or scans jobs, and no index is built: the
 * statements on jobs that lock it (the jobs_restored_running trigger, SHARE
 * ROW EXCLUSIVE; ENABLE ROW LEVEL SECURITY and its policies, ACCESS
 * EXCLUSIVE; catalog changes only) come last, so the lock is held only until
 * the update commits, milliseconds later.
 */

/*
 * The role that administers the extension without being superuser.  Roles
 * are cluster-wide and outlive the extension, so create it only once.
 */
DO $do$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'webhook_ingest_admin') THEN
        CREATE ROLE webhook_ingest_admin NOLOGIN;
    END IF;
END
$do$;

/*
 * Who may enqueue into a source: NULL, any member of webhook_ingest_enqueue
 * (as before); otherwise only roles with the privileges of one of these.
 * (No default: adding the column rewrites nothing.)
 */
ALTER TABLE webhook_ingest.sources ADD COLUMN enqueue_roles regrole[];
COMMENT ON COLUMN webhook_ingest.sources.enqueue_roles IS
    'roles whose members may enqueue into this source and see its jobs; NULL: every member of webhook_ingest_enqueue';

-- At most 64 bytes of an input, cut at a character, for messages (src/access.c).
CREATE FUNCTION webhook_ingest._clip(text)
RETURNS text
AS 'MODULE_PATHNAME', 'webhook_ingest_clip'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- May the current user enqueue into this source?  The app roles' row security on jobs (src/access.c).
CREATE FUNCTION webhook_ingest._may_enqueue(source text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'webhook_ingest_may_enqueue'
LANGUAGE C STABLE STRICT;

/*
 * Every row written to sources, by add_source, alter_source or a direct
 * write of an admin: valid as add_source requires, a handler only from a
 * role that has the privileges of the handler's owner (handlers run as their
 * owner: anything else would lend the owner's rights), and a sensible
 * enqueue_roles.  Not SECURITY DEFINER: current_user is whoever writes.
 */
CREATE FUNCTION webhook_ingest._guard_source()
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
CREATE TRIGGER sources_guard
    BEFORE INSERT OR UPDATE ON webhook_ingest.sources
    FOR EACH ROW EXECUTE FUNCTION webhook_ingest._guard_source();

/*
 * add_source and alter_source take enqueue_roles.  They stay SECURITY
 * INVOKER (the caller needs INSERT / UPDATE on sources: admins have it), so
 * that sources_guard checks the caller's own privileges.
 */
DROP FUNCTION webhook_ingest.add_source(text, text, regprocedure, jsonb, integer, integer);
CREATE FUNCTION webhook_ingest.add_source(
    name text,
    url_template text,
    handler regprocedure DEFAULT NULL,
    headers jsonb DEFAULT '{}',
    timeout_ms integer DEFAULT 10000,
    max_attempts integer DEFAULT 10,
    enqueue_roles regrole[] DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM webhook_ingest._check_source(name, url_template, handler, headers, timeout_ms, max_attempts);
    INSERT INTO webhook_ingest.sources AS s (name, url_template, handler, headers, timeout_ms, max_attempts,
                                             enqueue_roles)
    VALUES (add_source.name, add_source.url_template, add_source.handler,
            coalesce(add_source.headers, '{}'), add_source.timeout_ms, add_source.max_attempts,
            add_source.enqueue_roles)
    ON CONFLICT ON CONSTRAINT sources_pkey DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'source "%" already exists', webhook_ingest._clip(name)
            USING ERRCODE = 'duplicate_object',
                  HINT = 'Use webhook_ingest.alter_source() to change it.';
    END IF;
END
$fn$;
COMMENT ON FUNCTION webhook_ingest.add_source(text, text, regprocedure, jsonb, integer, integer, regrole[]) IS
    'register an upstream API; enqueue_roles NULL: every member of webhook_ingest_enqueue may enqueue into it';

DROP FUNCTION webhook_ingest.alter_source(text, text, regprocedure, jsonb, integer, integer, boolean);
CREATE FUNCTION webhook_ingest.alter_source(
    name text,
    url_template text DEFAULT NULL,
    handler regprocedure DEFAULT NULL,
    headers jsonb DEFAULT NULL,
    timeout_ms integer DEFAULT NULL,
    max_attempts integer DEFAULT NULL,
    drop_handler boolean DEFAULT false,
    enqueue_roles regrole[] DEFAULT NULL,
    reset_enqueue_roles boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    cur webhook_ingest.sources;
BEGIN
    SELECT * INTO cur FROM webhook_ingest.sources s WHERE s.name = alter_source.name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'source "%" does not exist', webhook_ingest._clip(name) USING ERRCODE = 'undefined_object';
    END IF;
    IF drop_handler AND alter_source.handler IS NOT NULL THEN
        RAISE EXCEPTION 'cannot both set and drop the handler' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF reset_enqueue_roles AND alter_source.enqueue_roles IS NOT NULL THEN
        RAISE EXCEPTION 'cannot both set and reset enqueue_roles' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    cur.url_template := coalesce(alter_source.url_template, cur.url_template);
    cur.handler := CASE WHEN drop_handler THEN NULL ELSE coalesce(alter_source.handler, cur.handler) END;
    cur.headers := coalesce(alter_source.headers, cur.headers);
    cur.timeout_ms := coalesce(alter_source.timeout_ms, cur.timeout_ms);
    cur.max_attempts := coalesce(alter_source.max_attempts, cur.max_attempts);
    cur.enqueue_roles := CASE WHEN reset_enqueue_roles THEN NULL
                              ELSE coalesce(alter_source.enqueue_roles, cur.enqueue_roles) END;
    PERFORM webhook_ingest._check_source(cur.name, cur.url_template, cur.handler, cur.headers,
                                         cur.timeout_ms, cur.max_attempts);
    UPDATE webhook_ingest.sources s
       SET url_template = cur.url_template, handler = cur.handler, headers = cur.headers,
           timeout_ms = cur.timeout_ms, max_attempts = cur.max_attempts, enqueue_roles = cur.enqueue_roles,
           updated_at = now()
     WHERE s.name = cur.name;
END
$fn$;
COMMENT ON FUNCTION webhook_ingest.alter_source(text, text, regprocedure, jsonb, integer, integer, boolean,
                                                regrole[], boolean) IS
    'change an upstream API; NULL arguments keep the current value (reset_enqueue_roles: back to every enqueuer)';

/*
 * The operations an admin runs without table privileges of its own:
 * SECURITY DEFINER, search_path pinned, inputs clipped in messages.
 */
CREATE OR REPLACE FUNCTION webhook_ingest.drop_source(name text, force boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    active bigint;
BEGIN
    /*
     * Wait for enqueue() calls in flight (they hold ROW EXCLUSIVE on jobs and
     * look the source up only after taking it), so none can add a job for
     * this source once it is gone.
     */
    LOCK TABLE webhook_ingest.jobs, webhook_ingest.events IN SHARE MODE;
    PERFORM FROM webhook_ingest.sources s WHERE s.name = drop_source.name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'source "%" does not exist', webhook_ingest._clip(name) USING ERRCODE = 'undefined_object';
    END IF;
    SELECT count(*) INTO active FROM webhook_ingest.jobs j
     WHERE j.source = drop_source.name AND j.state IN ('pending', 'running');
    IF active > 0 AND NOT force THEN
        RAISE EXCEPTION 'source "%" has % pending or running jobs', name, active
            USING ERRCODE = 'object_in_use',
                  HINT = 'Wait for them to finish, or pass force => true to discard them.';
    END IF;
    DELETE FROM webhook_ingest.jobs j WHERE j.source = drop_source.name;
    DELETE FROM webhook_ingest.events e WHERE e.source = drop_source.name;
    DELETE FROM webhook_ingest.documents d WHERE d.source = drop_source.name;
    DELETE FROM webhook_ingest.sources s WHERE s.name = drop_source.name;
END
$fn$;

CREATE OR REPLACE FUNCTION webhook_ingest._set_paused(name text, paused boolean)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    UPDATE webhook_ingest.sources s SET paused = _set_paused.paused, updated_at = now()
     WHERE s.name = _set_paused.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'source "%" does not exist', webhook_ingest._clip(name) USING ERRCODE = 'undefined_object';
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
ALTER FUNCTION webhook_ingest.pause_source(text) SECURITY DEFINER;
ALTER FUNCTION webhook_ingest.resume_source(text) SECURITY DEFINER;

CREATE OR REPLACE FUNCTION webhook_ingest.retry(job_id bigint)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
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
                j.source, webhook_ingest._clip(j.external_id);
            RETURN false;
        END;
    END IF;
    PERFORM webhook_ingest._wake_worker_at_commit();
    RETURN true;
END
$fn$;

CREATE OR REPLACE FUNCTION webhook_ingest.retry_dead(source text, since timestamptz DEFAULT '-infinity')
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
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
        RAISE EXCEPTION 'source "%" does not exist', webhook_ingest._clip(source) USING ERRCODE = 'undefined_object';
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

ALTER FUNCTION webhook_ingest.cancel(bigint) SECURITY DEFINER;
ALTER FUNCTION webhook_ingest.purge_events(integer) SECURITY DEFINER;

/*
 * enqueue and wait_for_job check their caller and switch to their owner
 * themselves (src/access.c): as SECURITY DEFINER functions they could not
 * tell who called them.
 */
ALTER FUNCTION webhook_ingest.enqueue(text, text, jsonb, text) SECURITY INVOKER;
ALTER FUNCTION webhook_ingest.wait_for_job(bigint, interval) SECURITY INVOKER;

/*
 * The workers, as the launcher keeps them: one row per database with a
 * worker (or one starting, or refused one by webhook_ingest.max_databases),
 * from shared memory, the same from any database.
 */
DROP VIEW webhook_ingest.worker_status;
DROP FUNCTION webhook_ingest._worker_status();
CREATE FUNCTION webhook_ingest._worker_status(
    OUT pid integer, OUT database text, OUT state text, OUT started_at timestamptz,
    OUT in_flight integer, OUT claimed bigint, OUT fetched bigint, OUT succeeded bigint,
    OUT retried bigint, OUT dead bigint, OUT handler_errors bigint, OUT bytes bigint,
    OUT last_error text, OUT last_error_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'webhook_ingest_worker_status_all'
LANGUAGE C VOLATILE STRICT;
CREATE VIEW webhook_ingest.worker_status AS SELECT * FROM webhook_ingest._worker_status();
COMMENT ON VIEW webhook_ingest.worker_status IS
    'one row per database worker of the cluster: pid, database, state, transfers in flight, counters since it started, last error';

/*
 * Privileges.  Nothing for PUBLIC.  The admin role reads every table and
 * view, writes sources (checked by sources_guard) and runs every operation;
 * it has no write privilege on jobs, events or documents.
 */
REVOKE ALL ON ALL TABLES IN SCHEMA webhook_ingest FROM PUBLIC;
REVOKE ALL ON ALL ROUTINES IN SCHEMA webhook_ingest FROM PUBLIC;
GRANT USAGE ON SCHEMA webhook_ingest TO webhook_ingest_admin;
GRANT SELECT ON ALL TABLES IN SCHEMA webhook_ingest TO webhook_ingest_admin;
-- ... and the job id sequence, so that an admin can take a pg_dump (it dumps the sequence's position).
GRANT SELECT ON SEQUENCE webhook_ingest.jobs_id_seq TO webhook_ingest_admin;
GRANT INSERT (name, url_template, handler, headers, timeout_ms, max_attempts, enqueue_roles),
      UPDATE (url_template, handler, headers, timeout_ms, max_attempts, enqueue_roles, updated_at)
    ON webhook_ingest.sources TO webhook_ingest_admin;
GRANT EXECUTE ON FUNCTION
    webhook_ingest.add_source(text, text, regprocedure, jsonb, integer, integer, regrole[]),
    webhook_ingest.alter_source(text, text, regprocedure, jsonb, integer, integer, boolean, regrole[], boolean),
    webhook_ingest.drop_source(text, boolean),
    webhook_ingest.pause_source(text),
    webhook_ingest.resume_source(text),
    webhook_ingest.retry(bigint),
    webhook_ingest.retry_dead(text, timestamptz),
    webhook_ingest.cancel(bigint),
    webhook_ingest.purge_events(integer),
    webhook_ingest.url_for(text, text),
    webhook_ingest.wait_for_job(bigint, interval),
    webhook_ingest._check_source(text, text, regprocedure, jsonb, integer, integer),
    webhook_ingest._clip(text),
    webhook_ingest._may_enqueue(text),
    webhook_ingest._recent_counts(integer),
    webhook_ingest._latency(integer),
    webhook_ingest._recent_failures(),
    webhook_ingest._worker_status()
    TO webhook_ingest_admin;
GRANT EXECUTE ON PROCEDURE webhook_ingest.wait_replayed(pg_lsn, interval) TO webhook_ingest_admin;
-- The application, as before; its row security policy on jobs calls _may_enqueue.
GRANT EXECUTE ON FUNCTION webhook_ingest.enqueue(text, text, jsonb, text),
                          webhook_ingest.wait_for_job(bigint, interval),
                          webhook_ingest._may_enqueue(text)
    TO webhook_ingest_enqueue;
GRANT EXECUTE ON PROCEDURE webhook_ingest.wait_replayed(pg_lsn, interval) TO webhook_ingest_enqueue;
GRANT SELECT (id, state, done_lsn) ON webhook_ingest.jobs TO webhook_ingest_enqueue;
-- The monitoring role, as before.
GRANT SELECT ON webhook_ingest.queue_stats, webhook_ingest.worker_status,
                webhook_ingest.latency, webhook_ingest.recent_failures TO webhook_ingest_monitor;
GRANT EXECUTE ON FUNCTION webhook_ingest._recent_counts(integer), webhook_ingest._latency(integer),
                          webhook_ingest._recent_failures(), webhook_ingest._worker_status()
    TO webhook_ingest_monitor;

/*
 * Backups: pg_dump dumps the rows of these tables (extension members are
 * otherwise dumped as CREATE EXTENSION alone), and the restore loads them
 * after CREATE EXTENSION has made the tables, their triggers and their
 * policies.  Restore as a superuser: sources_guard checks each source as it
 * is written (a superuser may register any handler), the enqueue caches
 * hear of the new sources through sources_changed, jobs_restored_running
 * (below) makes running jobs due, and row security does not apply.  Anyone
 * else has no INSERT on these tables: each COPY is refused, the rest of the
 * database is restored.  No foreign key ties jobs to sources, so the order
 * of the tables does not matter: a job whose source is not there yet is
 * simply not claimed.
 *
 * - sources, whole: every upstream API with its headers (credentials too).
 * - jobs, all but done: pending and running jobs are the queue, dead ones
 *   the operator's list for retry_dead, cancelled ones objects never fetched
 *   (retry() can still run them; retention deletes them on schedule, by
 *   their finished_at).  Done jobs are history that retention deletes
 *   anyway, their effects are in the handlers' tables or in documents, and
 *   their done_lsn names a position in this server's WAL, meaningless to a
 *   restored copy elsewhere.
 * - jobs_id_seq: new job ids after a restore follow the restored ones.
 * - events, whole: the dedup memory, with received_at, so a redelivery is
 *   still a duplicate for the rest of webhook_ingest.dedup_window.
 * - documents, whole: the fetched documents of sources without a handler.
 * - Not purge_position: a page number in this copy of events, whose heap the
 *   restore lays out anew; CREATE EXTENSION makes its row, and the walk
 *   starts at the first page.
 *
 * The filter is pasted into pg_dump's query, which runs with an empty
 * search_path: everything in it is qualified.
 */
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.sources', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.jobs',
    $$WHERE state OPERATOR(pg_catalog.<>) 'done'::webhook_ingest.job_state$$);
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.jobs_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.events', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.documents', '');

/*
 * A job inserted as running was claimed by a worker of another database (a
 * dump of a running job, restored): no worker here holds it, its lease and
 * worker_pid are someone else's (the pid may even be this database's
 * worker's, and the lease may run for minutes), and this database's worker
 * may have taken back what was left running long before the restore.  So it
 * is due again at once, as a reclaim would make it: the interrupted attempt
 * does not count.  Only rows inserted as running: the worker's claims are
 * updates, and enqueue inserts pending rows only (which is why its direct
 * writes, which fire no trigger, may pass this one by: queue_write.c).
 */
CREATE FUNCTION webhook_ingest._jobs_restored_running()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    NEW.state := 'pending';
    NEW.attempts := greatest(NEW.attempts - 1, 0);
    NEW.next_attempt_at := now();
    NEW.lease_until := NULL;
    NEW.worker_pid := NULL;
    NEW.updated_at := now();
    NEW.last_error := 'reclaimed: restored while it was running';
    RETURN NEW;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._jobs_restored_running() FROM PUBLIC;
CREATE TRIGGER jobs_restored_running
    BEFORE INSERT ON webhook_ingest.jobs
    FOR EACH ROW WHEN (NEW.state OPERATOR(pg_catalog.=) 'running'::webhook_ingest.job_state)
    EXECUTE FUNCTION webhook_ingest._jobs_restored_running();

/*
 * Row security on jobs: an app role sees the jobs of the sources it may
 * enqueue into; admins see all.  The tables' owner (the views, enqueue and
 * wait_for_job when they act as it, the SECURITY DEFINER operations) and
 * superusers (the worker) are not subject to it.  Any other role granted
 * SELECT on jobs sees no rows: make it a member of webhook_ingest_admin.
 */
ALTER TABLE webhook_ingest.jobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY jobs_admin ON webhook_ingest.jobs TO webhook_ingest_admin USING (true) WITH CHECK (true);
CREATE POLICY jobs_app ON webhook_ingest.jobs FOR SELECT TO webhook_ingest_enqueue
    USING (webhook_ingest._may_enqueue(source));
