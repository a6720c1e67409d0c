/* webhook_ingest--0.3.0--0.4.0.sql: intake from real frameworks - signatures, receive() */

\echo Use "ALTER EXTENSION webhook_ingest UPDATE TO '0.4.0'" to load this file. \quit

/*
 * Nothing here rewrites a table: the new columns of sources have no default
 * or a constant one (catalog-only since PostgreSQL 11).  One statement scans
 * jobs: the rebuild of jobs_active_object at the end (SHARE on jobs until the
 * update commits, see there).
 */

/*
 * Per-source intake settings, for receive(): how the sender signs (the
 * scheme and the secrets to try, several during a rotation), how far a
 * signed timestamp may be from now, and where in the body the object id
 * and the event id are.  Secrets are in sources, which app roles cannot
 * read (as headers).
 */
ALTER TABLE webhook_ingest.sources
    ADD COLUMN signature_scheme text,
    ADD COLUMN signing_secrets text[],
    ADD COLUMN signature_tolerance interval NOT NULL DEFAULT '5 minutes',
    ADD COLUMN external_id_path jsonpath,
    ADD COLUMN event_id_path jsonpath;
COMMENT ON COLUMN webhook_ingest.sources.signature_scheme IS
    'how the sender signs its webhooks: standard-webhooks, stripe, github, shopify or slack; NULL: receive() refuses';
COMMENT ON COLUMN webhook_ingest.sources.signing_secrets IS
    'the secrets receive() tries, any one may match (rotation); as secret as headers';
COMMENT ON COLUMN webhook_ingest.sources.signature_tolerance IS
    'how far a signed timestamp may be from now, either way (schemes that sign one)';
COMMENT ON COLUMN webhook_ingest.sources.external_id_path IS
    'where receive() finds the object id in the body (a string or number); NULL: receive() refuses';
COMMENT ON COLUMN webhook_ingest.sources.event_id_path IS
    'where receive() finds the event id in the body; NULL: the scheme''s delivery id';

-- Validation of the intake settings (src/intake.c): a known scheme, at most 16 usable secrets, a sane
-- tolerance, paths that name no jsonpath variable.
CREATE FUNCTION webhook_ingest._check_intake(
    signature_scheme text, signing_secrets text[], signature_tolerance interval,
    external_id_path jsonpath, event_id_path jsonpath)
RETURNS void
AS 'MODULE_PATHNAME', 'webhook_ingest_check_intake'
LANGUAGE C STABLE;

/* sources_guard checks the intake settings too, whoever writes the row. */
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

/*
 * add_source and alter_source take the intake settings.  Still SECURITY
 * INVOKER: sources_guard checks the caller's own privileges.
 */
DROP FUNCTION webhook_ingest.add_source(text, text, regprocedure, jsonb, integer, integer, regrole[]);
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
    event_id_path jsonpath DEFAULT NULL)
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
                                             signature_tolerance, external_id_path, event_id_path)
    VALUES (add_source.name, add_source.url_template, add_source.handler,
            coalesce(add_source.headers, '{}'), add_source.timeout_ms, add_source.max_attempts,
            add_source.enqueue_roles, add_source.signature_scheme, add_source.signing_secrets,
            coalesce(add_source.signature_tolerance, '5 minutes'), add_source.external_id_path,
            add_source.event_id_path)
    ON CONFLICT ON CONSTRAINT sources_pkey DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'source "%" already exists', webhook_ingest._clip(name)
            USING ERRCODE = 'duplicate_object',
                  HINT = 'Use webhook_ingest.alter_source() to change it.';
    END IF;
END
$fn$;
COMMENT ON FUNCTION webhook_ingest.add_source(text, text, regprocedure, jsonb, integer, integer, regrole[],
                                              text, text[], interval, jsonpath, jsonpath) IS
    'register an upstream API; for receive(): signature_scheme, signing_secrets and external_id_path';

DROP FUNCTION webhook_ingest.alter_source(text, text, regprocedure, jsonb, integer, integer, boolean,
                                          regrole[], boolean);
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
    reset_event_id_path boolean DEFAULT false)
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
    PERFORM webhook_ingest._check_source(cur.name, cur.url_template, cur.handler, cur.headers,
                                         cur.timeout_ms, cur.max_attempts);
    PERFORM webhook_ingest._check_intake(cur.signature_scheme, cur.signing_secrets, cur.signature_tolerance,
                                         cur.external_id_path, cur.event_id_path);
    UPDATE webhook_ingest.sources s
       SET url_template = cur.url_template, handler = cur.handler, headers = cur.headers,
           timeout_ms = cur.timeout_ms, max_attempts = cur.max_attempts, enqueue_roles = cur.enqueue_roles,
           signature_scheme = cur.signature_scheme, signing_secrets = cur.signing_secrets,
           signature_tolerance = cur.signature_tolerance, external_id_path = cur.external_id_path,
           event_id_path = cur.event_id_path, updated_at = now()
     WHERE s.name = cur.name;
END
$fn$;
COMMENT ON FUNCTION webhook_ingest.alter_source(text, text, regprocedure, jsonb, integer, integer, boolean,
                                                regrole[], boolean, text, text[], interval, jsonpath, jsonpath,
                                                boolean, boolean) IS
    'change an upstream API; NULL arguments keep the current value (drop_signature: receive() refuses until set again)';

/*
 * receive: the application's endpoint in one call (src/receive.c).  Checks
 * the sender's signature with the source's scheme and secrets, takes the
 * event id and the object id from the request, and then does what enqueue
 * does.  Not SECURITY DEFINER, as enqueue (see src/access.c).
 */
CREATE FUNCTION webhook_ingest.receive(source text, headers jsonb, body text)
RETURNS TABLE (job_id bigint, outcome text)
AS 'MODULE_PATHNAME', 'webhook_ingest_receive'
LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION webhook_ingest.receive(text, jsonb, text) IS
    'accept a signed webhook as sent (headers and raw body): 28000 if the signature does not verify, else as enqueue';

/*
 * verify_signature: the check receive() makes, on its own (src/signature_sql.c).
 * Reads no table.
 */
CREATE FUNCTION webhook_ingest.verify_signature(scheme text, secret text, headers jsonb, body text,
                                                tolerance interval DEFAULT '5 minutes')
RETURNS boolean
AS 'MODULE_PATHNAME', 'webhook_ingest_verify_signature'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION webhook_ingest.verify_signature(text, text, jsonb, text, interval) IS
    'does this request carry a valid signature of the scheme made with this secret, within the tolerance?';

/* Privileges: the new columns for the admin role, receive and verify_signature for the app. */
REVOKE ALL ON FUNCTION webhook_ingest._check_intake(text, text[], interval, jsonpath, jsonpath),
                       webhook_ingest.receive(text, jsonb, text),
                       webhook_ingest.verify_signature(text, text, jsonb, text, interval),
                       webhook_ingest.add_source(text, text, regprocedure, jsonb, integer, integer, regrole[],
                                                 text, text[], interval, jsonpath, jsonpath),
                       webhook_ingest.alter_source(text, text, regprocedure, jsonb, integer, integer, boolean,
                                                   regrole[], boolean, text, text[], interval, jsonpath, jsonpath,
                                                   boolean, boolean)
    FROM PUBLIC;
GRANT INSERT (signature_scheme, signing_secrets, signature_tolerance, external_id_path, event_id_path),
      UPDATE (signature_scheme, signing_secrets, signature_tolerance, external_id_path, event_id_path)
    ON webhook_ingest.sources TO webhook_ingest_admin;
GRANT EXECUTE ON FUNCTION
    webhook_ingest.add_source(text, text, regprocedure, jsonb, integer, integer, regrole[],
                              text, text[], interval, jsonpath, jsonpath),
    webhook_ingest.alter_source(text, text, regprocedure, jsonb, integer, integer, boolean,
                                regrole[], boolean, text, text[], interval, jsonpath, jsonpath, boolean, boolean),
    webhook_ingest._check_intake(text, text[], interval, jsonpath, jsonpath),
    webhook_ingest.receive(text, jsonb, text),
    webhook_ingest.verify_signature(text, text, jsonb, text, interval)
    TO webhook_ingest_admin;
GRANT EXECUTE ON FUNCTION webhook_ingest.receive(text, jsonb, text),
                          webhook_ingest.verify_signature(text, text, jsonb, text, interval)
    TO webhook_ingest_enqueue;

/*
 * queue_stats at scale (issue 11): index-only and JIT-free.  The 0.2.0 view
 * counted the backlog through jobs_active_object, which held neither state
 * nor next_attempt_at nor created_at: it read the heap row of every pending
 * and running job (milliseconds per 10 000 of backlog), and from about
 * 100 000 pending the plan's cost crossed jit_above_cost, adding JIT
 * compilation to every look.  jobs_active_object now carries those columns
 * (INCLUDE), so the counts come from an index-only scan (as far as the
 * visibility map, which autovacuum keeps, allows) at no extra index insertion
 * per job (a separate index cost new-object enqueues 5-15 %); the view reads
 * a function that runs with jit = off.  The function is SECURITY DEFINER: a
 * view's functions run as the caller, and webhook_ingest_monitor may not
 * read jobs (the view read them as its owner).
 *
 * The index is rebuilt here, in the update's transaction (an extension
 * script cannot CREATE INDEX CONCURRENTLY): the new one is built beside the
 * old one under a SHARE lock on jobs (reads go on; enqueue and the worker's
 * writes wait) while it scans the table once, indexing only the pending and
 * running rows; then the old one is dropped (ACCESS EXCLUSIVE until the
 * update commits, a moment later) and the new one takes its name.  Measured
 * with bench/upgrade (see README, Upgrades).
 */
CREATE UNIQUE INDEX jobs_active_object_new ON webhook_ingest.jobs (source, external_id)
    INCLUDE (state, next_attempt_at, created_at)
    WHERE state IN ('pending', 'running');
DROP INDEX webhook_ingest.jobs_active_object;
ALTER INDEX webhook_ingest.jobs_active_object_new RENAME TO jobs_active_object;

CREATE FUNCTION webhook_ingest._queue_stats(
    OUT source text, OUT paused boolean, OUT pending bigint, OUT due_now bigint, OUT running bigint,
    OUT retry_waiting bigint, OUT done_last_hour bigint, OUT retried_last_hour bigint, OUT dead bigint,
    OUT backlog_age interval)
RETURNS SETOF record
LANGUAGE sql STABLE SECURITY DEFINER ROWS 10
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
SELECT s.name,
       s.paused,
       coalesce(a.pending, 0),
       coalesce(a.due_now, 0),
       coalesce(a.running, 0),
       coalesce(a.retry_waiting, 0),
       coalesce(r.done, 0),
       coalesce(r.retried, 0),
       coalesce(d.dead, 0),
       now() - a.oldest
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
  LEFT JOIN webhook_ingest._recent_counts(60) r ON r.source = s.name
$$;
COMMENT ON FUNCTION webhook_ingest._queue_stats() IS
    'the rows of queue_stats, counted from jobs_active_object and jobs_dead by index-only scans, with jit = off';

-- source COLLATE "C": the column keeps the collation of sources.name.
CREATE OR REPLACE VIEW webhook_ingest.queue_stats AS
SELECT q.source COLLATE "C" AS source, q.paused, q.pending, q.due_now, q.running, q.retry_waiting,
       q.done_last_hour, q.retried_last_hour, q.dead, q.backlog_age
  FROM webhook_ingest._queue_stats() q;

REVOKE ALL ON FUNCTION webhook_ingest._queue_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._queue_stats() TO webhook_ingest_admin, webhook_ingest_monitor;
