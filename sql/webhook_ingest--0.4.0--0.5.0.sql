/* webhook_ingest--0.4.0--0.5.0.sql: upstream-aware scheduling - fair claims, per-source limits, throttles */

\echo Use "ALTER EXTENSION webhook_ingest UPDATE TO '0.5.0'" to load this file. \quit

/*
 * Nothing here rewrites a table: the new columns of sources have no default
 * or a constant one (catalog-only).  One statement scans jobs: the rebuild
 * of jobs_due (SHARE on jobs until the update commits, as the 0.4.0 rebuild
 * of jobs_active_object; only pending rows are indexed).
 */

/*
 * Per-source scheduling settings (src/scheduler.c): the source's share of
 * free fetch slots against other sources with due work (weight), a token
 * bucket of requests per second (rate_limit, rate_burst) and a cap on its
 * fetches in flight (max_in_flight).  NULL limits: none beyond the worker's
 * own settings.
 */
ALTER TABLE webhook_ingest.sources
    ADD COLUMN weight integer NOT NULL DEFAULT 1,
    ADD COLUMN rate_limit real,
    ADD COLUMN rate_burst integer,
    ADD COLUMN max_in_flight integer;
COMMENT ON COLUMN webhook_ingest.sources.weight IS
    'share of free fetch slots against other sources with due work (1 to 1000)';
COMMENT ON COLUMN webhook_ingest.sources.rate_limit IS
    'most fetches started per second (a token bucket); NULL: no limit';
COMMENT ON COLUMN webhook_ingest.sources.rate_burst IS
    'fetches the bucket holds; NULL: max(1, ceil(rate_limit / 10)), a tenth of a second''s worth';
COMMENT ON COLUMN webhook_ingest.sources.max_in_flight IS
    'most fetches of the source in flight at once; NULL: no limit beyond max_host_connections';

-- Validation of the scheduling settings, for sources_guard.
CREATE FUNCTION webhook_ingest._check_limits(weight integer, rate_limit real, rate_burst integer,
                                             max_in_flight integer)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF weight IS NULL OR weight NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'weight must be between 1 and 1000' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF rate_limit IS NOT NULL AND NOT (rate_limit >= 0.001 AND rate_limit <= 1000000) THEN
        RAISE EXCEPTION 'rate_limit must be between 0.001 and 1000000 requests per second'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'NULL (reset_limits => true in alter_source) means no limit.';
    END IF;
    IF rate_burst IS NOT NULL AND rate_limit IS NULL THEN
        RAISE EXCEPTION 'rate_burst needs a rate_limit' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF rate_burst IS NOT NULL AND rate_burst NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'rate_burst must be between 1 and 1000000' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_in_flight IS NOT NULL AND max_in_flight NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'max_in_flight must be between 1 and 100000'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'NULL (reset_limits => true in alter_source) means no limit.';
    END IF;
END
$fn$;

/*
 * sources_guard checks the scheduling settings too, whoever writes the row,
 * and stamps updated_at on every update (the worker ends a source's throttle
 * when its row changes).
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

/*
 * add_source and alter_source take the scheduling settings (checked by
 * sources_guard).  alter_source's reset_limits sets rate_limit, rate_burst
 * and max_in_flight back to NULL; any change of a source (this, resume_source)
 * also ends a throttle the worker keeps for it.
 */
DROP FUNCTION webhook_ingest.add_source(text, text, regprocedure, jsonb, integer, integer, regrole[],
                                        text, text[], interval, jsonpath, jsonpath);
CREATE FUNCTION webhook_ingest.add_source(
    name text,
    url_template text,
    handler regprocedure DEFAULT NULL,
    headers jsonb DEFAULT '{}',
    timeout_ms integer DEFAULT 10000,
    max_attempts integer DEFAULT 10,
    enqueue_roles regrole[] DEFAULT NULL,
    signature_scheme text DEFAULT NULL,
    signing_secrets text[] DEFAULT NULL,
    signature_tolerance interval DEFAULT '5 minutes',
    external_id_path jsonpath DEFAULT NULL,
    event_id_path jsonpath DEFAULT NULL,
    weight integer DEFAULT 1,
    rate_limit real DEFAULT NULL,
    rate_burst integer DEFAULT NULL,
    max_in_flight integer DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM webhook_ingest._check_source(name, url_template, handler, headers, timeout_ms, max_attempts);
    PERFORM webhook_ingest._check_intake(signature_scheme, signing_secrets, signature_tolerance,
                                         external_id_path, event_id_path);
    INSERT INTO webhook_ingest.sources AS s (name, url_template, handler, headers, timeout_ms, max_attempts,
                                             enqueue_roles, signature_scheme, signing_secrets,
                                             signature_tolerance, external_id_path, event_id_path,
                                             weight, rate_limit, rate_burst, max_in_flight)
    VALUES (add_source.name, add_source.url_template, add_source.handler,
            coalesce(add_source.headers, '{}'), add_source.timeout_ms, add_source.max_attempts,
            add_source.enqueue_roles, add_source.signature_scheme, add_source.signing_secrets,
            coalesce(add_source.signature_tolerance, '5 minutes'), add_source.external_id_path,
            add_source.event_id_path, coalesce(add_source.weight, 1), add_source.rate_limit,
            add_source.rate_burst, add_source.max_in_flight)
    ON CONFLICT ON CONSTRAINT sources_pkey DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'source "%" already exists', webhook_ingest._clip(name)
            USING ERRCODE = 'duplicate_object',
                  HINT = 'Use webhook_ingest.alter_source() to change it.';
    END IF;
END
$fn$;
COMMENT ON FUNCTION webhook_ingest.add_source(text, text, regprocedure, jsonb, integer, integer, regrole[],
                                              text, text[], interval, jsonpath, jsonpath,
                                              integer, real, integer, integer) IS
    'register an upstream API; for receive(): signature_scheme, signing_secrets and external_id_path; '
    'for the scheduler: weight, rate_limit, rate_burst, max_in_flight';

DROP FUNCTION webhook_ingest.alter_source(text, text, regprocedure, jsonb, integer, integer, boolean,
                                          regrole[], boolean, text, text[], interval, jsonpath, jsonpath,
                                          boolean, boolean);
CREATE FUNCTION webhook_ingest.alter_source(
    name text,
    url_template text DEFAULT NULL,
    handler regprocedure DEFAULT NULL,
    headers jsonb DEFAULT NULL,
    timeout_ms integer DEFAULT NULL,
    max_attempts integer DEFAULT NULL,
    drop_handler boolean DEFAULT false,
    enqueue_roles regrole[] DEFAULT NULL,
    reset_enqueue_roles boolean DEFAULT false,
    signature_scheme text DEFAULT NULL,
    signing_secrets text[] DEFAULT NULL,
    signature_tolerance interval DEFAULT NULL,
    external_id_path jsonpath DEFAULT NULL,
    event_id_path jsonpath DEFAULT NULL,
    drop_signature boolean DEFAULT false,
    reset_event_id_path boolean DEFAULT false,
    weight integer DEFAULT NULL,
    rate_limit real DEFAULT NULL,
    rate_burst integer DEFAULT NULL,
    max_in_flight integer DEFAULT NULL,
    reset_limits boolean DEFAULT false)
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
    IF drop_signature AND (alter_source.signature_scheme IS NOT NULL OR alter_source.signing_secrets IS NOT NULL) THEN
        RAISE EXCEPTION 'cannot both set and drop the signature settings' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF reset_event_id_path AND alter_source.event_id_path IS NOT NULL THEN
        RAISE EXCEPTION 'cannot both set and reset event_id_path' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF reset_limits AND (alter_source.rate_limit IS NOT NULL OR alter_source.rate_burst IS NOT NULL
                         OR alter_source.max_in_flight IS NOT NULL) THEN
        RAISE EXCEPTION 'cannot both set and reset the limits' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    cur.url_template := coalesce(alter_source.url_template, cur.url_template);
    cur.handler := CASE WHEN drop_handler THEN NULL ELSE coalesce(alter_source.handler, cur.handler) END;
    cur.headers := coalesce(alter_source.headers, cur.headers);
    cur.timeout_ms := coalesce(alter_source.timeout_ms, cur.timeout_ms);
    cur.max_attempts := coalesce(alter_source.max_attempts, cur.max_attempts);
    cur.enqueue_roles := CASE WHEN reset_enqueue_roles THEN NULL
                              ELSE coalesce(alter_source.enqueue_roles, cur.enqueue_roles) END;
    cur.signature_scheme := CASE WHEN drop_signature THEN NULL
                                 ELSE coalesce(alter_source.signature_scheme, cur.signature_scheme) END;
    cur.signing_secrets := CASE WHEN drop_signature THEN NULL
                                ELSE coalesce(alter_source.signing_secrets, cur.signing_secrets) END;
    cur.signature_tolerance := coalesce(alter_source.signature_tolerance, cur.signature_tolerance);
    cur.external_id_path := coalesce(alter_source.external_id_path, cur.external_id_path);
    cur.event_id_path := CASE WHEN reset_event_id_path THEN NULL
                              ELSE coalesce(alter_source.event_id_path, cur.event_id_path) END;
    cur.weight := coalesce(alter_source.weight, cur.weight);
    cur.rate_limit := CASE WHEN reset_limits THEN NULL ELSE coalesce(alter_source.rate_limit, cur.rate_limit) END;
    -- A new rate_limit without a rate_burst gets the default burst of the new rate.
    cur.rate_burst := CASE WHEN reset_limits THEN NULL
                           WHEN alter_source.rate_limit IS NOT NULL THEN alter_source.rate_burst
                           ELSE coalesce(alter_source.rate_burst, cur.rate_burst) END;
    cur.max_in_flight := CASE WHEN reset_limits THEN NULL
                              ELSE coalesce(alter_source.max_in_flight, cur.max_in_flight) END;
    PERFORM webhook_ingest._check_source(cur.name, cur.url_template, cur.handler, cur.headers,
                                         cur.timeout_ms, cur.max_attempts);
    PERFORM webhook_ingest._check_intake(cur.signature_scheme, cur.signing_secrets, cur.signature_tolerance,
                                         cur.external_id_path, cur.event_id_path);
    UPDATE webhook_ingest.sources s
       SET url_template = cur.url_template, handler = cur.handler, headers = cur.headers,
           timeout_ms = cur.timeout_ms, max_attempts = cur.max_attempts, enqueue_roles = cur.enqueue_roles,
           signature_scheme = cur.signature_scheme, signing_secrets = cur.signing_secrets,
           signature_tolerance = cur.signature_tolerance, external_id_path = cur.external_id_path,
           event_id_path = cur.event_id_path, weight = cur.weight, rate_limit = cur.rate_limit,
           rate_burst = cur.rate_burst, max_in_flight = cur.max_in_flight, updated_at = now()
     WHERE s.name = cur.name;
    -- Limits loosened or a throttle ended: the worker looks again now.
    PERFORM webhook_ingest._wake_worker_at_commit();
END
$fn$;
COMMENT ON FUNCTION webhook_ingest.alter_source(text, text, regprocedure, jsonb, integer, integer, boolean,
                                                regrole[], boolean, text, text[], interval, jsonpath, jsonpath,
                                                boolean, boolean, integer, real, integer, integer, boolean) IS
    'change an upstream API; NULL arguments keep the current value (drop_signature: receive() refuses until set '
    'again; reset_limits: no rate_limit, rate_burst, max_in_flight); ends a throttle of the source';

REVOKE ALL ON FUNCTION webhook_ingest._check_limits(integer, real, integer, integer),
                       webhook_ingest.add_source(text, text, regprocedure, jsonb, integer, integer, regrole[],
                                                 text, text[], interval, jsonpath, jsonpath,
                                                 integer, real, integer, integer),
                       webhook_ingest.alter_source(text, text, regprocedure, jsonb, integer, integer, boolean,
                                                   regrole[], boolean, text, text[], interval, jsonpath, jsonpath,
                                                   boolean, boolean, integer, real, integer, integer, boolean)
    FROM PUBLIC;
GRANT INSERT (weight, rate_limit, rate_burst, max_in_flight),
      UPDATE (weight, rate_limit, rate_burst, max_in_flight)
    ON webhook_ingest.sources TO webhook_ingest_admin;
GRANT EXECUTE ON FUNCTION
    webhook_ingest._check_limits(integer, real, integer, integer),
    webhook_ingest._wake_worker_at_commit(),
    webhook_ingest.add_source(text, text, regprocedure, jsonb, integer, integer, regrole[],
                              text, text[], interval, jsonpath, jsonpath, integer, real, integer, integer),
    webhook_ingest.alter_source(text, text, regprocedure, jsonb, integer, integer, boolean,
                                regrole[], boolean, text, text[], interval, jsonpath, jsonpath, boolean, boolean,
                                integer, real, integer, integer, boolean)
    TO webhook_ingest_admin;

/*
 * Claims walk the due jobs of each source on its own (fair shares, see
 * src/scheduler.c), so jobs_due leads with the source.  Rebuilt as 0.4.0
 * rebuilt jobs_active_object: the new index beside the old one under a
 * SHARE lock on jobs, indexing only pending rows; then the swap.
 */
CREATE INDEX jobs_due_new ON webhook_ingest.jobs (source, next_attempt_at)
    WHERE state = 'pending';
DROP INDEX webhook_ingest.jobs_due;
ALTER INDEX webhook_ingest.jobs_due_new RENAME TO jobs_due;

/*
 * What the worker's scheduler holds for each source (src/shmem.c,
 * from shared memory): fetches in flight, and a throttle the upstream asked
 * for.  queue_stats shows them.
 */
CREATE FUNCTION webhook_ingest._scheduler_state(
    OUT source text, OUT in_flight integer, OUT throttled_until timestamptz, OUT throttled_by text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'webhook_ingest_scheduler_state'
LANGUAGE C STABLE ROWS 10;
COMMENT ON FUNCTION webhook_ingest._scheduler_state() IS
    'per source, from the worker of this database: fetches in flight, and until when the upstream throttled it';
REVOKE ALL ON FUNCTION webhook_ingest._scheduler_state() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._scheduler_state() TO webhook_ingest_admin, webhook_ingest_monitor;

CREATE OR REPLACE VIEW webhook_ingest.queue_stats AS
SELECT q.source COLLATE "C" AS source, q.paused, q.pending, q.due_now, q.running, q.retry_waiting,
       q.done_last_hour, q.retried_last_hour, q.dead, q.backlog_age,
       coalesce(t.in_flight, 0) AS in_flight, t.throttled_until, t.throttled_by
  FROM webhook_ingest._queue_stats() q
  LEFT JOIN webhook_ingest._scheduler_state() t ON t.source = q.source;

/*
 * cancel() wakes the job's wait_for_job() callers at commit (they slept
 * until their next recheck, up to a second).
 */
CREATE FUNCTION webhook_ingest._job_finished_at_commit(job_id bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'webhook_ingest_job_finished_at_commit'
LANGUAGE C VOLATILE STRICT;
REVOKE ALL ON FUNCTION webhook_ingest._job_finished_at_commit(bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION webhook_ingest.cancel(job_id bigint)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
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
        PERFORM webhook_ingest._job_finished_at_commit(job_id);
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
