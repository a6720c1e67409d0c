/* webhook_ingest_router--0.2.0.sql: the router database in front of N webhook_ingest shards.
 *
 * Owns: the routing rule (shard_hash, shard_of, router job ids), the routed intake (enqueue, receive),
 * the job operations by router id (wait_for_job, retry, cancel, job), source administration fanned out
 * to every shard (add_source, alter_source, drop_source, pause_source, resume_source) with the router's
 * copy of each source's external_id_path, check_shards, the intake switch (close_intake, open_intake),
 * moving a partition to a new shard (move_partition), and the monitoring views aggregated over the shards.  SQL and PL/Proxy only: no C.
 *
 * The shards are the PL/Proxy cluster webhook_ingest_shards (SQL/MED server, partitions p0..pN-1, N a
 * power of two), defined by the operator after CREATE EXTENSION (router/README.md).  Every remote
 * call runs on the shard as the calling role (a user mapping without a user option: PL/Proxy appends
 * user=current_user), so the shard's grants, enqueue_roles and the jobs row filter apply to the caller,
 * and every remote call goes through one function, _remote, the one place its errors are caught.
 */

\echo Use "CREATE EXTENSION webhook_ingest_router" to load this file. \quit

-- The roles mean what they mean on a shard (same names on the router and on every shard).
DO $do$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'webhook_ingest_enqueue') THEN
        CREATE ROLE webhook_ingest_enqueue NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'webhook_ingest_admin') THEN
        CREATE ROLE webhook_ingest_admin NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'webhook_ingest_monitor') THEN
        CREATE ROLE webhook_ingest_monitor NOLOGIN;
    END IF;
END
$do$;
GRANT USAGE ON SCHEMA webhook_ingest TO webhook_ingest_enqueue, webhook_ingest_admin, webhook_ingest_monitor;

/* ---------------------------------------------------------------- routing rule */

-- The hash of an object: the first 4 bytes of md5(source || E'\n' || external_id) as a signed int4.
-- Fixed forever (md5 is not hashtext, whose values PostgreSQL does not promise across majors); ids
-- hold no control characters, so the newline cannot be part of either.
CREATE FUNCTION webhook_ingest.shard_hash(source text, external_id text) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN ('x' || substr(md5(source || E'\n' || external_id), 1, 8))::bit(32)::integer;

-- The number of partitions of the cluster: its server's p0, p1, ... options.  PL/pgSQL, not SQL: every
-- routed call asks (twice), and a SQL function with a SET clause is never inlined, so its body was
-- parsed and planned again at each call (a quarter of a millisecond); PL/pgSQL keeps the plan.
CREATE FUNCTION webhook_ingest.shard_count() RETURNS integer
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN (SELECT count(*)::integer
              FROM pg_catalog.pg_foreign_server s, pg_catalog.unnest(s.srvoptions) o
             WHERE s.srvname = 'webhook_ingest_shards' AND o ~ '^p[0-9]+=');
END
$fn$;

-- The partition that holds an object: PL/Proxy's own mapping of a hash (hash & (N - 1)).
CREATE FUNCTION webhook_ingest.shard_of(source text, external_id text) RETURNS integer
LANGUAGE sql STABLE STRICT PARALLEL SAFE
RETURN webhook_ingest.shard_hash(source, external_id) & greatest(webhook_ingest.shard_count() - 1, 0);

-- Router job ids: (partition << 48) | the shard's job id.
CREATE FUNCTION webhook_ingest.router_job_id(shard integer, shard_job_id bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (shard::bigint << 48) | shard_job_id;

CREATE FUNCTION webhook_ingest.job_shard(job_id bigint) RETURNS integer
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    part bigint := job_id >> 48;
BEGIN
    IF job_id IS NULL THEN
        RAISE EXCEPTION 'job id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF job_id < 0 OR part >= webhook_ingest.shard_count() THEN
        RAISE EXCEPTION 'job % does not exist', job_id USING ERRCODE = 'no_data_found',
            DETAIL = format('Its shard number, %s, is not a partition of webhook_ingest_shards (%s).',
                            part, webhook_ingest.shard_count());
    END IF;
    RETURN part;
END
$fn$;

CREATE FUNCTION webhook_ingest.shard_job_id(job_id bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN job_id & 281474976710655;  -- 2^48 - 1

-- An object with a NULL part goes to partition 0, whose shard raises the error the shard would (22004).
CREATE FUNCTION webhook_ingest._route(source text, external_id text) RETURNS integer
LANGUAGE sql STABLE PARALLEL SAFE
RETURN coalesce(webhook_ingest.shard_of(source, external_id), 0);

/* ---------------------------------------------------------------- errors */

-- A remote call failed: a shard that cannot be reached (PL/Proxy's own XX000 for a failed connect or a
-- lost connection, or the shard's 57P0x while it shuts down or starts) becomes 08006 naming the shard,
-- with no connection string in it; so does the router session's statement timeout during a call to a
-- known shard (PL/Proxy 2.10 does not bound a connect: libpq ignores connect_timeout in its
-- asynchronous connect, so a shard that accepts and never answers is bounded only by statement_timeout,
-- router/README.md); anything the shard itself raised passes through unchanged.
CREATE FUNCTION webhook_ingest._shard_error(shard integer, sqlstate text, message text, detail text, hint text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    why text;
BEGIN
    IF sqlstate = '57014' AND message = 'canceling statement due to statement timeout' AND shard IS NOT NULL THEN
        RAISE EXCEPTION 'shard % of webhook_ingest_shards is unreachable', shard USING ERRCODE = 'connection_failure',
            DETAIL = format('It did not answer within statement_timeout (%s).', current_setting('statement_timeout')),
            HINT = 'Answer 503 so that the sender retries.';
    END IF;
    IF (sqlstate = 'XX000' AND message LIKE 'PL/Proxy function %' AND message !~ '\] REMOTE '
        AND message ~ '(PQconnect|PQconsumeInput|PQflush|PQsendQuery|connect timeout|query timeout|check_old_conn)')
       OR (sqlstate IN ('57P01', '57P02', '57P03') AND message ~ '\] REMOTE ')
       OR sqlstate LIKE '08%' THEN
        why := regexp_replace(message, '^PL/Proxy function [^:]*: ', '');
        why := regexp_replace(why, 'connect timeout to: .*', 'connect timeout');
        why := regexp_replace(why, 'password\s*=\s*(''[^'']*''|\S+)', 'password=***', 'gi');
        why := left(why, 300);
        IF shard IS NULL THEN
            RAISE EXCEPTION 'a shard of webhook_ingest_shards is unreachable' USING ERRCODE = 'connection_failure',
                DETAIL = why, HINT = 'Answer 503 so that the sender retries; webhook_ingest.check_shards() says which.';
        END IF;
        RAISE EXCEPTION 'shard % of webhook_ingest_shards is unreachable', shard USING ERRCODE = 'connection_failure',
            DETAIL = why, HINT = 'Answer 503 so that the sender retries.';
    END IF;
    -- The shard's own error: its message after the shard's number (PL/Proxy's "fn(n): [db] REMOTE
    -- ERROR: " and "Remote detail: " taken off), its SQLSTATE unchanged.
    IF message ~ '^[^ ]+\(\d+\): \[[^]]*\] REMOTE [A-Z]+: ' THEN
        message := regexp_replace(message, '^[^ ]+\(\d+\): \[[^]]*\] REMOTE [A-Z]+: ', '');
        IF shard IS NOT NULL THEN
            message := format('shard %s: %s', shard, message);
        END IF;
        detail := regexp_replace(detail, '^Remote detail: ', '');
        hint := regexp_replace(hint, '^Remote hint: ', '');
    END IF;
    IF detail IS NOT NULL AND detail <> '' AND hint IS NOT NULL AND hint <> '' THEN
        RAISE EXCEPTION USING ERRCODE = sqlstate, MESSAGE = message, DETAIL = detail, HINT = hint;
    ELSIF detail IS NOT NULL AND detail <> '' THEN
        RAISE EXCEPTION USING ERRCODE = sqlstate, MESSAGE = message, DETAIL = detail;
    ELSIF hint IS NOT NULL AND hint <> '' THEN
        RAISE EXCEPTION USING ERRCODE = sqlstate, MESSAGE = message, HINT = hint;
    END IF;
    RAISE EXCEPTION USING ERRCODE = sqlstate, MESSAGE = message;
END
$fn$;

-- Every remote call goes through here, the one place its errors are caught: the caller opens the call
-- as a cursor over its PL/Proxy function (PL/Proxy runs it at the first fetch, inside this block) and
-- gives its column list; what the call raises becomes the router's error: _shard_error for a call on
-- one partition, _fan_out_error for a call on every shard (part NULL).
CREATE FUNCTION webhook_ingest._remote(part integer, call refcursor) RETURNS SETOF record
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    r record;
    st text; msg text; det text; hin text;
BEGIN
    LOOP
        FETCH call INTO r;
        EXIT WHEN NOT FOUND;
        RETURN NEXT r;
    END LOOP;
    CLOSE call;
EXCEPTION WHEN OTHERS OR query_canceled THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL,
                            hin = PG_EXCEPTION_HINT;
    IF part IS NULL THEN
        PERFORM webhook_ingest._fan_out_error(st, msg, det, hin);
    END IF;
    PERFORM webhook_ingest._shard_error(part, st, msg, det, hin);
END
$fn$;

/* ---------------------------------------------------------------- the intake switch */

-- A row here closes the router's intake (while partitions move: router/README.md, Adding a shard).
CREATE TABLE webhook_ingest.intake_closed (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    closed_at timestamptz NOT NULL DEFAULT now(),
    reason    text NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.intake_closed', '');

CREATE FUNCTION webhook_ingest._check_intake() RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    why text;
BEGIN
    SELECT c.reason INTO why FROM webhook_ingest.intake_closed c;
    IF FOUND THEN
        RAISE EXCEPTION 'the router''s intake is closed: %', why USING ERRCODE = 'cannot_connect_now',
            HINT = 'Answer 503 so that the sender retries.';
    END IF;
END
$fn$;

CREATE FUNCTION webhook_ingest.close_intake(reason text) RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    INSERT INTO webhook_ingest.intake_closed (reason) VALUES (coalesce(reason, 'closed by an admin'))
    ON CONFLICT (singleton) DO UPDATE SET reason = EXCLUDED.reason;
END;

CREATE FUNCTION webhook_ingest.open_intake() RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    DELETE FROM webhook_ingest.intake_closed;
END;

-- The limit the shards apply to a body before its signature: webhook_ingest.max_payload_size (kB, or with
-- a unit), set on the router too when the shards' is not the default, 1024 kB.  A body over it is
-- refused with the shard's 54000, unparsed.
CREATE FUNCTION webhook_ingest._check_body_size(body text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    setting text := coalesce(nullif(current_setting('webhook_ingest.max_payload_size', true), ''), '1024');
    limit_kb bigint;
BEGIN
    limit_kb := CASE WHEN setting ~ '^\d{1,9}$' THEN setting::bigint ELSE pg_size_bytes(setting) / 1024 END;
    IF octet_length(body) > limit_kb * 1024 THEN
        RAISE EXCEPTION 'body of % bytes exceeds webhook_ingest.max_payload_size (% kB)', octet_length(body), limit_kb
            USING ERRCODE = 'program_limit_exceeded',
            HINT = 'Raise webhook_ingest.max_payload_size on the shards and on the router.';
    END IF;
END
$fn$;

/* ---------------------------------------------------------------- the router's copy of the sources */

-- What the router needs of each source: its name and external_id_path (receive routes by the object
-- id that path finds).  Written only by the router's source administration, after every shard took
-- the change; check_shards compares it with the shards'.
CREATE TABLE webhook_ingest.sources (
    name             text COLLATE "C" PRIMARY KEY,
    external_id_path jsonpath,
    updated_at       timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.sources', '');

-- The partition of a webhook for receive: the object id found with the router's copy of the source's
-- external_id_path, as the shard finds it (jsonb_path_query_first with silent => true, as the shard
-- calls it: a strict path's structural error after a first item still finds that item; a string, or a
-- number as JSON writes it).  NULL when it finds none (a source the copy does not have or has without a
-- path, a body that is not JSON, no such id, not a string or number): receive then lets partition 0's
-- shard raise its error for it (42704, 55000 before the signature, as on a shard; 28000, 22P02, 22023
-- after it), but never take it (_receive_unrouted_on): a source the copy lacks may be one whose
-- add_source has not committed on the router yet, which shard 0 would otherwise keep.  Before anything: the intake
-- switch (it is PL/Proxy's RUN ON function, so a direct call of _receive_on is switched off too), and a
-- body over webhook_ingest.max_payload_size is refused as the shard refuses it, before it is parsed
-- (54000): an unsigned sender's 20 MB body cost the router two jsonb parses, 5.6 s, where the shard
-- spends 0.1 s.
CREATE FUNCTION webhook_ingest._receive_route(source text, body text) RETURNS integer
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    path jsonpath;
    v jsonb;
BEGIN
    PERFORM webhook_ingest._check_intake();
    PERFORM webhook_ingest._check_body_size(body);
    SELECT s.external_id_path INTO path FROM webhook_ingest.sources s WHERE s.name = source;
    IF path IS NULL OR body IS NULL THEN
        RETURN NULL;
    END IF;
    BEGIN
        v := jsonb_path_query_first(body::jsonb, path, '{}', true);
    EXCEPTION WHEN OTHERS THEN
        RETURN NULL;
    END;
    IF v IS NULL OR jsonb_typeof(v) NOT IN ('string', 'number') THEN
        RETURN NULL;
    END IF;
    RETURN webhook_ingest._route(source, v #>> '{}');
END
$fn$;

-- When receive (or add_source, alter_source: a client key may be among their arguments) fails, the
-- router's log gets the message without the statement, as a shard's does: a driver
-- that interpolates parameters would otherwise put every forged request's headers and body into the log.
-- log_min_error_statement is a superuser's setting: set here, for the rest of the caller's transaction, by
-- a SECURITY DEFINER function that does nothing else (receive itself runs as the caller, and so do its
-- connections to the shards).
CREATE FUNCTION webhook_ingest._hide_statement_on_error() RETURNS void
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT pg_catalog.set_config('log_min_error_statement', 'panic', true);
END;

/* ---------------------------------------------------------------- every remote call: as the caller */

-- PL/Proxy connects as current_user only when no user mapping names a user: a role with USAGE on the
-- server (every app, admin and monitor: PL/Proxy requires it) may CREATE USER MAPPING FOR itself
-- OPTIONS (user 'postgres'), and then reached every shard as that role (a superuser where the shards
-- trust the router's host): enqueue into any source, every job, a source's proxy set by an admin.
-- Every remote call's RUN ON function (PL/Proxy evaluates it before it connects) refuses a caller
-- whose own mapping names another user (42501).  Not SECURITY DEFINER: current_user is the caller,
-- and pg_user_mappings shows a role its own mapping's options.
CREATE FUNCTION webhook_ingest._check_caller() RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    named text;
BEGIN
    SELECT substr(o, 6) INTO named
      FROM pg_catalog.pg_user_mappings m, pg_catalog.unnest(m.umoptions) o
     WHERE m.srvname = 'webhook_ingest_shards' AND m.usename = current_user::text AND o LIKE 'user=%'
       AND substr(o, 6) <> current_user::text;
    IF FOUND THEN
        RAISE EXCEPTION 'the user mapping of role % on webhook_ingest_shards names user %', current_user, left(named, 100)
            USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'The router reaches the shards only as the calling role.',
            HINT = 'DROP USER MAPPING FOR CURRENT_USER SERVER webhook_ingest_shards (or give it no user option).';
    END IF;
END
$fn$;

-- The RUN ON functions of the calls by partition number and of the fan-outs.
CREATE FUNCTION webhook_ingest._part(shard integer) RETURNS integer
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM webhook_ingest._check_caller();
    RETURN shard;
END
$fn$;

CREATE FUNCTION webhook_ingest._job_part(job_id bigint) RETURNS integer
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM webhook_ingest._check_caller();
    RETURN webhook_ingest.job_shard(job_id);
END
$fn$;

CREATE FUNCTION webhook_ingest._all_parts() RETURNS SETOF integer
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM webhook_ingest._check_caller();
    RETURN QUERY SELECT g FROM generate_series(0, webhook_ingest.shard_count() - 1) g;
END
$fn$;

/* ---------------------------------------------------------------- remote calls (PL/Proxy) */

-- The RUN ON functions of the intake's remote calls check the intake switch: an app may call
-- _enqueue_on and _receive_on itself (it needs EXECUTE on them: PL/Proxy connects as current_user, so
-- no wrapper may be SECURITY DEFINER), and close_intake must hold for those calls too.
CREATE FUNCTION webhook_ingest._enqueue_route(source text, external_id text) RETURNS integer
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM webhook_ingest._check_caller();
    PERFORM webhook_ingest._check_intake();
    RETURN webhook_ingest._route(source, external_id);
END
$fn$;

CREATE FUNCTION webhook_ingest._receive_part(source text, body text) RETURNS integer
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM webhook_ingest._check_caller();
    RETURN webhook_ingest._receive_route(source, body);
END
$fn$;

CREATE FUNCTION webhook_ingest._unrouted_route() RETURNS integer
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM webhook_ingest._check_caller();
    PERFORM webhook_ingest._check_intake();
    RETURN 0;
END
$fn$;

CREATE FUNCTION webhook_ingest._enqueue_on(source text, external_id text, payload jsonb, event_id text)
RETURNS TABLE (job_id bigint, outcome text)
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON webhook_ingest._enqueue_route(source, external_id);
    SELECT e.job_id, e.outcome FROM webhook_ingest.enqueue(source, external_id, payload, event_id) e;
$fn$;

CREATE FUNCTION webhook_ingest._receive_on(source text, headers jsonb, body text)
RETURNS TABLE (job_id bigint, outcome text)
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON webhook_ingest._receive_part(source, body);
    SELECT r.job_id, r.outcome FROM webhook_ingest.receive(source, headers, body) r;
$fn$;

-- A webhook the router could not route, on partition 0 for the shard's own checks and errors (42704,
-- 55000, 54000, 28000, 22P02, 22023, in the shard's order): if the shard takes it instead (its
-- definition of the source finds an id the router's copy does not: the copy is behind the shards), the
-- remote statement fails after receive() returned, so nothing of it commits, with an error no setting
-- can prevent (no parameter has that name) that receive turns into 57P03.  Shard 0 must never keep a
-- webhook whose partition the router did not know: the same object would be on two shards.
CREATE FUNCTION webhook_ingest._receive_unrouted_on(source text, headers jsonb, body text)
RETURNS TABLE (job_id bigint, outcome text)
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON webhook_ingest._unrouted_route();
    SELECT r.job_id, r.outcome FROM webhook_ingest.receive(source, headers, body) r
     WHERE pg_catalog.current_setting('webhook_ingest_router.unrouted webhook refused: ' || r.outcome) IS NULL;
$fn$;

CREATE FUNCTION webhook_ingest._wait_for_job_on(job_id bigint, timeout interval) RETURNS boolean
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON webhook_ingest._job_part(job_id);
    SELECT webhook_ingest.wait_for_job(job_id & 281474976710655, timeout) AS _wait_for_job_on;
$fn$;

CREATE FUNCTION webhook_ingest._retry_on(job_id bigint) RETURNS boolean
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON webhook_ingest._job_part(job_id);
    SELECT webhook_ingest.retry(job_id & 281474976710655) AS _retry_on;
$fn$;

CREATE FUNCTION webhook_ingest._cancel_on(job_id bigint) RETURNS boolean
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON webhook_ingest._job_part(job_id);
    SELECT webhook_ingest.cancel(job_id & 281474976710655) AS _cancel_on;
$fn$;

CREATE FUNCTION webhook_ingest._job_on(job_id bigint) RETURNS TABLE (id bigint, state text, done_lsn pg_lsn)
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON webhook_ingest._job_part(job_id);
    SELECT j.id, j.state::text AS state, j.done_lsn FROM webhook_ingest.jobs j
     WHERE j.id = job_id & 281474976710655;
$fn$;

/* ---------------------------------------------------------------- the intake and the jobs, routed */

CREATE FUNCTION webhook_ingest.enqueue(source text, external_id text, payload jsonb DEFAULT NULL,
                                       event_id text DEFAULT NULL)
RETURNS TABLE (job_id bigint, outcome text)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    part integer := webhook_ingest._route(source, external_id);
    call refcursor;
BEGIN
    -- The intake switch is checked by _enqueue_on's RUN ON function, before it connects.
    OPEN call FOR SELECT webhook_ingest.router_job_id(part, e.job_id), e.outcome
                    FROM webhook_ingest._enqueue_on(source, external_id, payload, event_id) e;
    RETURN QUERY SELECT * FROM webhook_ingest._remote(part, call) AS r (id bigint, result text);
END
$fn$;

-- A webhook the router could not route (receive below): partition 0's shard raises its error for it,
-- or, where it would take it instead, _receive_unrouted_on's remote statement fails and this raises
-- 57P03.  Never returns.
CREATE FUNCTION webhook_ingest._receive_unrouted(source text, headers jsonb, body text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    call refcursor;
BEGIN
    OPEN call FOR SELECT r.job_id FROM webhook_ingest._receive_unrouted_on(source, headers, body) r;
    BEGIN
        PERFORM FROM webhook_ingest._remote(0, call) AS r (id bigint);
    EXCEPTION WHEN undefined_object THEN
        IF SQLERRM ~ 'unrecognized configuration parameter "webhook_ingest_router\.unrouted webhook refused: ' THEN
            RAISE EXCEPTION 'the router cannot route this webhook of source "%"', left(source, 100)
                USING ERRCODE = 'cannot_connect_now',
                DETAIL = 'Shard 0 would have taken it, but the router''s copy of the source (webhook_ingest.sources) '
                         'finds no object id in it: the copy is behind the shards (an add_source or alter_source '
                         'not finished or not committed yet), and the object''s shard is unknown.',
                HINT = 'Answer 503 so that the sender retries; webhook_ingest.check_shards() shows what differs.';
        END IF;
        RAISE;
    END;
    RAISE EXCEPTION 'webhook_ingest._receive_unrouted_on returned' USING ERRCODE = 'internal_error';
END
$fn$;

CREATE FUNCTION webhook_ingest.receive(source text, headers jsonb, body text)
RETURNS TABLE (job_id bigint, outcome text)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    part integer;
    call refcursor;
BEGIN
    -- First, and in no block of this function: a subtransaction would take the setting back with the error.
    PERFORM webhook_ingest._hide_statement_on_error();
    -- _receive_route checks the intake switch (and the body's size) first.
    part := webhook_ingest._receive_route(source, body);
    IF part IS NULL THEN
        PERFORM webhook_ingest._receive_unrouted(source, headers, body);
    END IF;
    OPEN call FOR SELECT webhook_ingest.router_job_id(part, r.job_id), r.outcome
                    FROM webhook_ingest._receive_on(source, headers, body) r;
    RETURN QUERY SELECT * FROM webhook_ingest._remote(part, call) AS r (id bigint, result text);
END
$fn$;

CREATE FUNCTION webhook_ingest.wait_for_job(job_id bigint, timeout interval DEFAULT '30 seconds')
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    part integer := webhook_ingest.job_shard(job_id);
    call refcursor;
    answer boolean;
BEGIN
    OPEN call FOR SELECT webhook_ingest._wait_for_job_on(job_id, timeout);
    SELECT r.answer INTO answer FROM webhook_ingest._remote(part, call) AS r (answer boolean);
    RETURN answer;
END
$fn$;

CREATE FUNCTION webhook_ingest.retry(job_id bigint) RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    part integer := webhook_ingest.job_shard(job_id);
    call refcursor;
    answer boolean;
BEGIN
    OPEN call FOR SELECT webhook_ingest._retry_on(job_id);
    SELECT r.answer INTO answer FROM webhook_ingest._remote(part, call) AS r (answer boolean);
    RETURN answer;
END
$fn$;

CREATE FUNCTION webhook_ingest.cancel(job_id bigint) RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    part integer := webhook_ingest.job_shard(job_id);
    call refcursor;
    answer boolean;
BEGIN
    OPEN call FOR SELECT webhook_ingest._cancel_on(job_id);
    SELECT r.answer INTO answer FROM webhook_ingest._remote(part, call) AS r (answer boolean);
    RETURN answer;
END
$fn$;

-- A job by router id: its id, shard, the shard's job id, state and done_lsn, as the shard's jobs view
-- shows them to the caller (no row: no such job, or one of a source the caller may not enqueue into).
CREATE FUNCTION webhook_ingest.job(job_id bigint)
RETURNS TABLE (id bigint, shard integer, shard_job_id bigint, state text, done_lsn pg_lsn)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    part integer := webhook_ingest.job_shard(job.job_id);
    call refcursor;
BEGIN
    OPEN call FOR SELECT job.job_id, part, j.id, j.state, j.done_lsn FROM webhook_ingest._job_on(job.job_id) j;
    RETURN QUERY SELECT * FROM webhook_ingest._remote(part, call)
                     AS r (router_id bigint, part integer, shard_id bigint, job_state text, lsn pg_lsn);
END
$fn$;

/* ---------------------------------------------------------------- source administration, fanned out */

-- Each runs on every shard at once (RUN ON ALL), each shard in its own remote transaction that commits
-- when its call returns: a shard that fails leaves the others changed.  add_source and drop_source
-- skip the shards where that was already done, so re-running the call after a failure completes it;
-- alter_source, pause_source and resume_source are idempotent.  The router's copy changes last, in the
-- caller's transaction, only once every shard took the change.
CREATE FUNCTION webhook_ingest._add_source_all(
    name text, url_template text, handler text, headers jsonb, timeout_ms integer, max_attempts integer,
    enqueue_roles regrole[], signature_scheme text, signing_secrets text[], signature_tolerance interval,
    external_id_path jsonpath, event_id_path jsonpath, weight integer, rate_limit real, rate_burst integer,
    max_in_flight integer, keep_payloads interval, tls_ca text, tls_client_cert text, tls_client_key text,
    proxy text)
RETURNS SETOF integer
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON webhook_ingest._all_parts();
    SELECT count(*)::integer AS _add_source_all FROM (
        SELECT webhook_ingest.add_source(name, url_template, handler::regprocedure, headers, timeout_ms,
                                         max_attempts, enqueue_roles, signature_scheme, signing_secrets,
                                         signature_tolerance, external_id_path, event_id_path, weight,
                                         rate_limit, rate_burst, max_in_flight, keep_payloads, tls_ca,
                                         tls_client_cert, tls_client_key, proxy)
          FROM (SELECT) one
         WHERE NOT EXISTS (SELECT FROM webhook_ingest.sources s WHERE s.name = name)) added;
$fn$;

CREATE FUNCTION webhook_ingest._alter_source_all(
    name text, url_template text, handler text, headers jsonb, timeout_ms integer, max_attempts integer,
    drop_handler boolean, enqueue_roles regrole[], reset_enqueue_roles boolean, signature_scheme text,
    signing_secrets text[], signature_tolerance interval, external_id_path jsonpath, event_id_path jsonpath,
    drop_signature boolean, reset_event_id_path boolean, weight integer, rate_limit real, rate_burst integer,
    max_in_flight integer, reset_limits boolean, keep_payloads interval, reset_keep_payloads boolean,
    tls_ca text, reset_tls_ca boolean, tls_client_cert text, tls_client_key text, reset_tls_client boolean,
    proxy text, reset_proxy boolean)
RETURNS SETOF integer
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON webhook_ingest._all_parts();
    SELECT 1 AS _alter_source_all FROM (
        SELECT webhook_ingest.alter_source(name, url_template, handler::regprocedure, headers, timeout_ms,
                                           max_attempts, drop_handler, enqueue_roles, reset_enqueue_roles,
                                           signature_scheme, signing_secrets, signature_tolerance,
                                           external_id_path, event_id_path, drop_signature, reset_event_id_path,
                                           weight, rate_limit, rate_burst, max_in_flight, reset_limits,
                                           keep_payloads, reset_keep_payloads, tls_ca, reset_tls_ca,
                                           tls_client_cert, tls_client_key, reset_tls_client, proxy,
                                           reset_proxy)) altered;
$fn$;

CREATE FUNCTION webhook_ingest._drop_source_all(name text, force boolean) RETURNS SETOF integer
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON webhook_ingest._all_parts();
    SELECT count(*)::integer AS _drop_source_all FROM (
        SELECT webhook_ingest.drop_source(name, force)
          FROM (SELECT) one
         WHERE EXISTS (SELECT FROM webhook_ingest.sources s WHERE s.name = name)) dropped;
$fn$;

CREATE FUNCTION webhook_ingest._pause_source_all(name text) RETURNS SETOF integer
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON webhook_ingest._all_parts();
    SELECT 1 AS _pause_source_all FROM (SELECT webhook_ingest.pause_source(name)) paused;
$fn$;

CREATE FUNCTION webhook_ingest._resume_source_all(name text) RETURNS SETOF integer
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON webhook_ingest._all_parts();
    SELECT 1 AS _resume_source_all FROM (SELECT webhook_ingest.resume_source(name)) resumed;
$fn$;

-- The router's side of every fan-out: the remote calls, then (only if all of them succeeded) the
-- caller's own transaction, which writes the router's copy.
CREATE FUNCTION webhook_ingest._fan_out_error(st text, msg text, det text, hin text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF det IS NULL OR det = '' THEN
        det := 'PL/Proxy ran it on every shard in its own transaction: some shards may have taken the change.';
    END IF;
    IF hin IS NULL OR hin = '' THEN
        hin := 'Fix the cause and run the same call again; webhook_ingest.check_shards() lists the disagreements.';
    END IF;
    PERFORM webhook_ingest._shard_error(NULL, st, msg, det, hin);
END
$fn$;

CREATE FUNCTION webhook_ingest.add_source(
    name text,
    url_template text,
    handler text DEFAULT NULL,
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
    max_in_flight integer DEFAULT NULL,
    keep_payloads interval DEFAULT NULL,
    tls_ca text DEFAULT NULL,
    tls_client_cert text DEFAULT NULL,
    tls_client_key text DEFAULT NULL,
    proxy text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    call refcursor;
BEGIN
    PERFORM webhook_ingest._hide_statement_on_error();  -- a client key may be among the arguments
    IF EXISTS (SELECT FROM webhook_ingest.sources s WHERE s.name = add_source.name) THEN
        RAISE EXCEPTION 'source "%" already exists', left(name, 100) USING ERRCODE = 'duplicate_object',
            HINT = 'Use webhook_ingest.alter_source() to change it.';
    END IF;
    OPEN call FOR SELECT n FROM webhook_ingest._add_source_all(name, url_template, handler, headers, timeout_ms,
        max_attempts, enqueue_roles, signature_scheme, signing_secrets, signature_tolerance, external_id_path,
        event_id_path, weight, rate_limit, rate_burst, max_in_flight, keep_payloads, tls_ca,
        tls_client_cert, tls_client_key, proxy) n;
    PERFORM FROM webhook_ingest._remote(NULL, call) AS r (n integer);
    INSERT INTO webhook_ingest.sources (name, external_id_path) VALUES (add_source.name, add_source.external_id_path);
END
$fn$;

CREATE FUNCTION webhook_ingest.alter_source(
    name text,
    url_template text DEFAULT NULL,
    handler text DEFAULT NULL,
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
    reset_limits boolean DEFAULT false,
    keep_payloads interval DEFAULT NULL,
    reset_keep_payloads boolean DEFAULT false,
    tls_ca text DEFAULT NULL,
    reset_tls_ca boolean DEFAULT false,
    tls_client_cert text DEFAULT NULL,
    tls_client_key text DEFAULT NULL,
    reset_tls_client boolean DEFAULT false,
    proxy text DEFAULT NULL,
    reset_proxy boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    call refcursor;
BEGIN
    PERFORM webhook_ingest._hide_statement_on_error();  -- a client key may be among the arguments
    OPEN call FOR SELECT n FROM webhook_ingest._alter_source_all(name, url_template, handler, headers, timeout_ms,
        max_attempts, drop_handler, enqueue_roles, reset_enqueue_roles, signature_scheme, signing_secrets,
        signature_tolerance, external_id_path, event_id_path, drop_signature, reset_event_id_path, weight,
        rate_limit, rate_burst, max_in_flight, reset_limits, keep_payloads, reset_keep_payloads, tls_ca,
        reset_tls_ca, tls_client_cert, tls_client_key, reset_tls_client, proxy, reset_proxy) n;
    PERFORM FROM webhook_ingest._remote(NULL, call) AS r (n integer);
    -- Every shard has it now (alter_source raised 42704 on any that had not): so does the router's copy.
    -- A copy missing here (an add_source that failed midway) takes the path partition 0 now has.
    UPDATE webhook_ingest.sources s SET external_id_path = coalesce(alter_source.external_id_path, s.external_id_path),
                                        updated_at = now()
     WHERE s.name = alter_source.name;
    IF NOT FOUND THEN
        INSERT INTO webhook_ingest.sources (name, external_id_path)
        SELECT alter_source.name, coalesce(alter_source.external_id_path, o.external_id_path::jsonpath)
          FROM (SELECT) one LEFT JOIN webhook_ingest._sources_on(0) o ON o.name = alter_source.name;
    END IF;
END
$fn$;

CREATE FUNCTION webhook_ingest.drop_source(name text, force boolean DEFAULT false) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    call refcursor;
    dropped bigint;
BEGIN
    OPEN call FOR SELECT sum(n)::bigint FROM webhook_ingest._drop_source_all(name, force) n;
    SELECT r.n INTO dropped FROM webhook_ingest._remote(NULL, call) AS r (n bigint);
    DELETE FROM webhook_ingest.sources s WHERE s.name = drop_source.name;
    IF NOT FOUND AND dropped = 0 THEN
        RAISE EXCEPTION 'source "%" does not exist', left(name, 100) USING ERRCODE = 'undefined_object';
    END IF;
END
$fn$;

CREATE FUNCTION webhook_ingest.pause_source(name text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    call refcursor;
BEGIN
    OPEN call FOR SELECT n FROM webhook_ingest._pause_source_all(name) n;
    PERFORM FROM webhook_ingest._remote(NULL, call) AS r (n integer);
END
$fn$;

CREATE FUNCTION webhook_ingest.resume_source(name text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    call refcursor;
BEGIN
    OPEN call FOR SELECT n FROM webhook_ingest._resume_source_all(name) n;
    PERFORM FROM webhook_ingest._remote(NULL, call) AS r (n integer);
END
$fn$;

/* ---------------------------------------------------------------- per-shard reads (one partition each) */

-- A source's definition on one shard, as a digest of every column but id and the timestamps (the
-- client key lives in source_tls_keys, which only a superuser reads: not compared).
CREATE FUNCTION webhook_ingest._sources_on(shard integer)
RETURNS TABLE (name text, digest text, external_id_path text)
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON webhook_ingest._part(shard);
    SELECT s.name::text AS name,
           md5((to_jsonb(s) - 'id' - 'created_at' - 'updated_at')::text) AS digest,
           s.external_id_path::text AS external_id_path
      FROM webhook_ingest.sources s;
$fn$;

-- The role a shard sees for the caller: it must be the caller (no user in the pN options or the user
-- mapping, no default_user option), or every role would act there with one role's rights.
CREATE FUNCTION webhook_ingest._role_on(shard integer) RETURNS text
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON webhook_ingest._part(shard);
    SELECT current_user::text AS _role_on;
$fn$;

CREATE FUNCTION webhook_ingest._queue_stats_on(shard integer)
RETURNS TABLE (source text, paused boolean, pending bigint, due_now bigint, running bigint,
               retry_waiting bigint, done_last_hour bigint, retried_last_hour bigint, dead bigint,
               backlog_age interval, in_flight integer, throttled_until timestamptz, throttled_by text)
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON webhook_ingest._part(shard);
    SELECT q.source::text AS source, q.paused, q.pending, q.due_now, q.running, q.retry_waiting,
           q.done_last_hour, q.retried_last_hour, q.dead, q.backlog_age, q.in_flight, q.throttled_until,
           q.throttled_by
      FROM webhook_ingest.queue_stats q;
$fn$;

CREATE FUNCTION webhook_ingest._worker_status_on(shard integer)
RETURNS TABLE (pid integer, database text, state text, started_at timestamptz, in_flight integer,
               claimed bigint, fetched bigint, succeeded bigint, retried bigint, dead bigint,
               handler_errors bigint, bytes bigint, last_error text, last_error_at timestamptz,
               connections_opened bigint, tls_connections_opened bigint)
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON webhook_ingest._part(shard);
    SELECT w.pid, w.database, w.state, w.started_at, w.in_flight, w.claimed, w.fetched, w.succeeded,
           w.retried, w.dead, w.handler_errors, w.bytes, w.last_error, w.last_error_at,
           w.connections_opened, w.tls_connections_opened
      FROM webhook_ingest.worker_status w
     -- the shard's worker: from webhook_ingest 0.10.0 on the view has a row per apply worker too
     WHERE w.database = current_database() AND to_jsonb(w) ->> 'role' IS DISTINCT FROM 'applier';
$fn$;

CREATE FUNCTION webhook_ingest._latency_on(shard integer)
RETURNS TABLE (source text, jobs bigint, done_p50_ms double precision, done_p95_ms double precision,
               done_p99_ms double precision, fetch_p50_ms double precision, fetch_p95_ms double precision,
               fetch_p99_ms double precision)
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON webhook_ingest._part(shard);
    SELECT l.source, l.jobs, l.done_p50_ms, l.done_p95_ms, l.done_p99_ms, l.fetch_p50_ms, l.fetch_p95_ms,
           l.fetch_p99_ms
      FROM webhook_ingest.latency l;
$fn$;

CREATE FUNCTION webhook_ingest._recent_failures_on(shard integer)
RETURNS TABLE (failed_at timestamptz, job_id bigint, source text, external_id text, attempt integer,
               http_status integer, error text, fetch_ms double precision, outcome text)
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON webhook_ingest._part(shard);
    SELECT f.failed_at, f.job_id, f.source, f.external_id, f.attempt, f.http_status, f.error, f.fetch_ms,
           f.outcome
      FROM webhook_ingest.recent_failures f;
$fn$;

-- Every shard's rows of one of the reads above, each a jsonb object with the shard's number in "shard";
-- a shard that cannot be reached adds no rows and a WARNING, but for worker_status a row of state
-- 'unreachable' with why in last_error (check_shards shows it as a row too).
CREATE FUNCTION webhook_ingest._shard_rows(what text) RETURNS SETOF jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    part integer;
    call refcursor;
    why text;
BEGIN
    IF what NOT IN ('queue_stats', 'worker_status', 'latency', 'recent_failures') THEN
        RAISE EXCEPTION 'no such per-shard read: %', what USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR part IN 0 .. webhook_ingest.shard_count() - 1 LOOP
        BEGIN
            call := NULL;
            OPEN call FOR EXECUTE format('SELECT jsonb_build_object(''shard'', $1) || to_jsonb(r) FROM webhook_ingest.%I($1) r',
                                         '_' || what || '_on') USING part;
            RETURN QUERY SELECT r.shard_row FROM webhook_ingest._remote(part, call) AS r (shard_row jsonb);
        EXCEPTION WHEN connection_failure THEN
            IF what = 'worker_status' THEN
                GET STACKED DIAGNOSTICS why = PG_EXCEPTION_DETAIL;
                RETURN NEXT jsonb_build_object('shard', part, 'state', 'unreachable', 'last_error', why,
                                               'last_error_at', now());
            ELSE
                RAISE WARNING '%: its rows are missing from webhook_ingest.%', SQLERRM, what;
            END IF;
        END;
    END LOOP;
END
$fn$;

/* ---------------------------------------------------------------- the views, over all shards */

CREATE VIEW webhook_ingest.queue_stats_by_shard AS
SELECT r.* FROM webhook_ingest._shard_rows('queue_stats') s, jsonb_to_record(s) AS r (
    shard integer, source text, paused boolean, pending bigint, due_now bigint, running bigint,
    retry_waiting bigint, done_last_hour bigint, retried_last_hour bigint, dead bigint, backlog_age interval,
    in_flight integer, throttled_until timestamptz, throttled_by text);

-- One row per source, summed over the shards; paused if any shard has it paused (pause_source and
-- resume_source run on all), the oldest backlog, the latest throttle.
CREATE VIEW webhook_ingest.queue_stats AS
SELECT q.source, bool_or(q.paused) AS paused, sum(q.pending)::bigint AS pending,
       sum(q.due_now)::bigint AS due_now, sum(q.running)::bigint AS running,
       sum(q.retry_waiting)::bigint AS retry_waiting, sum(q.done_last_hour)::bigint AS done_last_hour,
       sum(q.retried_last_hour)::bigint AS retried_last_hour, sum(q.dead)::bigint AS dead,
       max(q.backlog_age) AS backlog_age, sum(q.in_flight)::integer AS in_flight,
       max(q.throttled_until) AS throttled_until,
       string_agg(DISTINCT q.throttled_by, ', ') AS throttled_by,
       count(*)::integer AS shards
  FROM webhook_ingest.queue_stats_by_shard q
 GROUP BY q.source;

-- One row per shard: its database's worker, or state 'unreachable' with why in last_error.
CREATE VIEW webhook_ingest.worker_status AS
SELECT r.* FROM webhook_ingest._shard_rows('worker_status') s, jsonb_to_record(s) AS r (
    shard integer, pid integer, database text, state text, started_at timestamptz, in_flight integer,
    claimed bigint, fetched bigint, succeeded bigint, retried bigint, dead bigint, handler_errors bigint,
    bytes bigint, last_error text, last_error_at timestamptz, connections_opened bigint,
    tls_connections_opened bigint);

CREATE VIEW webhook_ingest.latency_by_shard AS
SELECT r.* FROM webhook_ingest._shard_rows('latency') s, jsonb_to_record(s) AS r (
    shard integer, source text, jobs bigint, done_p50_ms double precision, done_p95_ms double precision,
    done_p99_ms double precision, fetch_p50_ms double precision, fetch_p95_ms double precision,
    fetch_p99_ms double precision);

-- Per source: jobs summed; each percentile the highest of the shards' (with at least one job), an upper
-- bound of the combined percentile (the true one lies between the lowest and the highest shard's).
CREATE VIEW webhook_ingest.latency AS
SELECT l.source, sum(l.jobs)::bigint AS jobs,
       max(l.done_p50_ms) FILTER (WHERE l.jobs > 0) AS done_p50_ms,
       max(l.done_p95_ms) FILTER (WHERE l.jobs > 0) AS done_p95_ms,
       max(l.done_p99_ms) FILTER (WHERE l.jobs > 0) AS done_p99_ms,
       max(l.fetch_p50_ms) FILTER (WHERE l.jobs > 0) AS fetch_p50_ms,
       max(l.fetch_p95_ms) FILTER (WHERE l.jobs > 0) AS fetch_p95_ms,
       max(l.fetch_p99_ms) FILTER (WHERE l.jobs > 0) AS fetch_p99_ms,
       count(*)::integer AS shards
  FROM webhook_ingest.latency_by_shard l
 GROUP BY l.source;

-- The latest 128 failed attempts over all shards, newest first, with router job ids.
CREATE VIEW webhook_ingest.recent_failures AS
SELECT f.shard, f.failed_at, webhook_ingest.router_job_id(f.shard, f.job_id) AS job_id, f.source, f.external_id,
       f.attempt, f.http_status, f.error, f.fetch_ms, f.outcome
  FROM webhook_ingest._shard_rows('recent_failures') s, jsonb_to_record(s) AS f (
    shard integer, failed_at timestamptz, job_id bigint, source text, external_id text, attempt integer,
    http_status integer, error text, fetch_ms double precision, outcome text)
 ORDER BY f.failed_at DESC
 LIMIT 128;

/* ---------------------------------------------------------------- do the shards agree? */

-- Every disagreement: a shard that cannot be reached; a shard that sees the caller as another role; a
-- source missing on some shard; a source whose
-- definition differs between shards (the shards that differ from the majority's definition, or every
-- shard holding it when no definition has a majority); a source missing from the router's copy, or whose
-- external_id_path there is not the shards'; one in the router's copy that no shard has.  No rows:
-- they all agree.
CREATE FUNCTION webhook_ingest.check_shards() RETURNS TABLE (shard integer, source text, problem text)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    part integer;
    n integer := webhook_ingest.shard_count();
    seen jsonb := '[]';      -- every reached shard's sources: {shard, name, digest, path}
    reached integer[] := '{}';
    who text;
    call refcursor;
    st text; msg text; det text;
BEGIN
    IF n = 0 THEN
        RETURN QUERY SELECT NULL::integer, NULL::text,
            'no partitions: the server webhook_ingest_shards has no p0 option'::text;
        RETURN;
    END IF;
    FOR part IN 0 .. n - 1 LOOP
        BEGIN
            call := NULL;
            OPEN call FOR SELECT coalesce(jsonb_agg(jsonb_build_object('shard', part, 'name', s.name,
                                                                       'digest', s.digest,
                                                                       'path', s.external_id_path)), '[]')
                            FROM webhook_ingest._sources_on(part) s;
            seen := seen || (SELECT r.found FROM webhook_ingest._remote(part, call) AS r (found jsonb));
            reached := reached || part;
            call := NULL;
            OPEN call FOR SELECT webhook_ingest._role_on(part);
            who := (SELECT r.who FROM webhook_ingest._remote(part, call) AS r (who text));
            IF who IS DISTINCT FROM current_user::text THEN
                RETURN QUERY SELECT part, NULL::text,
                    format('connects as role %s, not as the calling role %s: a user in its pN option or in the '
                           'user mapping, or a default_user option (every role then acts on the shard as that one)',
                           coalesce(who, 'NULL'), current_user);
            END IF;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
            RETURN QUERY SELECT part, NULL::text,
                CASE WHEN st = '08006' THEN 'unreachable: ' || coalesce(det, msg)
                     ELSE format('cannot read its sources (%s): %s', st, msg) END;
        END;
    END LOOP;
    RETURN QUERY
    WITH c AS (SELECT * FROM jsonb_to_recordset(seen) AS c (shard integer, name text, digest text, path text)),
         names AS (SELECT c.name FROM c UNION SELECT r.name::text FROM webhook_ingest.sources r),
         digests AS (SELECT c.name, c.digest, count(*) AS shards,
                            sum(count(*)) OVER (PARTITION BY c.name) AS holders
                       FROM c GROUP BY c.name, c.digest),
         -- the definition a strict majority of the shards holding the source have, if any
         common AS (SELECT d.name, d.digest FROM digests d WHERE d.shards * 2 > d.holders),
         common_path AS (SELECT DISTINCT ON (c.name) c.name, c.path FROM c
                           JOIN common m ON m.name = c.name AND m.digest = c.digest ORDER BY c.name, c.shard)
    SELECT x.shard, x.source, x.problem FROM (
        SELECT g AS shard, nm.name AS source, 'missing on this shard'::text AS problem
          FROM names nm CROSS JOIN unnest(reached) g
         WHERE NOT EXISTS (SELECT FROM c WHERE c.shard = g AND c.name = nm.name)
        UNION ALL
        SELECT c.shard, c.name, 'definition differs from the other shards'''
          FROM c JOIN common m ON m.name = c.name
         WHERE c.digest <> m.digest
        UNION ALL
        SELECT c.shard, c.name, 'definitions differ between shards, none held by a majority'
          FROM c
         WHERE NOT EXISTS (SELECT FROM common m WHERE m.name = c.name)
           AND (SELECT count(DISTINCT c2.digest) FROM c c2 WHERE c2.name = c.name) > 1
        UNION ALL
        SELECT NULL::integer, d.name, 'missing from the router''s copy'
          FROM (SELECT DISTINCT c.name FROM c) d
         WHERE NOT EXISTS (SELECT FROM webhook_ingest.sources r WHERE r.name = d.name)
        UNION ALL
        SELECT NULL::integer, r.name::text, 'in the router''s copy but on no shard'
          FROM webhook_ingest.sources r
         WHERE NOT EXISTS (SELECT FROM c WHERE c.name = r.name)
        UNION ALL
        SELECT NULL::integer, r.name::text,
               format('the router''s external_id_path (%s) is not the shards'' (%s)',
                      coalesce(r.external_id_path::text, 'NULL'), coalesce(p.path, 'NULL'))
          FROM webhook_ingest.sources r JOIN common_path p ON p.name = r.name
         WHERE r.external_id_path::text IS DISTINCT FROM p.path
    ) x ORDER BY x.source, x.shard NULLS FIRST;
END
$fn$;

/* ---------------------------------------------------------------- adding a shard: moving a partition */

-- The remote halves of move_partition: on the old database, the pending and running jobs of the objects
-- whose hash & mask is target (shard_hash's expression, run on the shard), its dedup ledger and its
-- job id sequence; on the new database, enqueue and ledger inserts in bulk, and the sequence set.
CREATE FUNCTION webhook_ingest._moving_jobs_on(shard integer, target integer, mask integer)
RETURNS TABLE (id bigint, source text, external_id text, payload jsonb, running boolean)
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON shard;
    SELECT q.id, q.source::text AS source, q.external_id::text AS external_id, q.payload,
           q.state = 'running' AS running
      FROM webhook_ingest.queue q
     WHERE q.state IN ('pending', 'running')
       AND (('x' || substr(md5(q.source || E'\n' || q.external_id), 1, 8))::bit(32)::integer & mask) = target;
$fn$;

CREATE FUNCTION webhook_ingest._ledger_on(shard integer)
RETURNS TABLE (source text, event_id text, received_at timestamptz)
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON shard;
    SELECT e.source::text AS source, e.event_id::text AS event_id, e.received_at FROM webhook_ingest.events e;
$fn$;

CREATE FUNCTION webhook_ingest._last_job_id_on(shard integer) RETURNS bigint
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON shard;
    SELECT s.last_value AS _last_job_id_on FROM webhook_ingest.jobs_id_seq s;
$fn$;

CREATE FUNCTION webhook_ingest._start_job_ids_on(shard integer, above bigint) RETURNS bigint
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON shard;
    SELECT setval('webhook_ingest.jobs_id_seq', greatest(above, s.last_value)) AS _start_job_ids_on
      FROM webhook_ingest.jobs_id_seq s;
$fn$;

CREATE FUNCTION webhook_ingest._enqueue_many_on(shard integer, sources text[], external_ids text[], payloads jsonb[])
RETURNS bigint
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON shard;
    SELECT count(*) AS _enqueue_many_on
      FROM unnest(sources, external_ids, payloads) AS u (s, x, p),
           LATERAL webhook_ingest.enqueue(u.s, u.x, u.p, NULL) e;
$fn$;

-- webhook_ingest.import_events() comes with webhook_ingest 0.9.0.
CREATE FUNCTION webhook_ingest._insert_ledger_on(shard integer, sources text[], event_ids text[], received timestamptz[])
RETURNS bigint
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON shard;
    SELECT webhook_ingest.import_events(sources, event_ids, received) AS _insert_ledger_on;
$fn$;

CREATE FUNCTION webhook_ingest._cancel_many_on(shard integer, ids bigint[]) RETURNS bigint
LANGUAGE plproxy AS $fn$
    CLUSTER 'webhook_ingest_shards';
    RUN ON shard;
    SELECT count(*) AS _cancel_many_on FROM unnest(ids) AS u (i) WHERE webhook_ingest.cancel(u.i);
$fn$;

-- Step 2 of adding a shard (router/README.md, Adding a shard): partition part's objects still live on the database
-- of partition from_shard (they shared its connection string until the operator pointed p<part> at the
-- new database).  With the intake closed and none of those objects' jobs running, their pending jobs (with
-- their payloads) are enqueued on the new database and cancelled on the old one, the old database's whole
-- dedup ledger is copied (event ids carry no object; the others never reach the new database), and the new
-- database's job ids start above the old one's, so that a router id of a job left behind never names
-- another job.  Dead and cancelled jobs and the history stay on the old database.  Idempotent: run it
-- again after a failure.  The caller must be a superuser on both databases (it sets the new one's job id
-- sequence and writes its ledger with webhook_ingest.import_events, webhook_ingest 0.9.0), and the new
-- database must have every source of the old one.
CREATE FUNCTION webhook_ingest.move_partition(part integer, from_shard integer,
                                              OUT jobs_moved bigint, OUT events_copied bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    n integer := webhook_ingest.shard_count();
    opts text[];
    busy bigint;
    ids bigint[];
    srcs text[]; xids text[]; pays jsonb[];
    evs text[]; evids text[]; evat timestamptz[];
BEGIN
    IF part IS NULL OR from_shard IS NULL OR part NOT BETWEEN 0 AND n - 1 OR from_shard NOT BETWEEN 0 AND n - 1
       OR part = from_shard THEN
        RAISE EXCEPTION 'move_partition(%, %): both must be different partitions of webhook_ingest_shards (0 to %)',
            part, from_shard, n - 1 USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT FROM webhook_ingest.intake_closed) THEN
        RAISE EXCEPTION 'the router''s intake is open' USING ERRCODE = 'object_not_in_prerequisite_state',
            HINT = 'Close it first: SELECT webhook_ingest.close_intake(''moving a partition'').';
    END IF;
    SELECT array_agg(o ORDER BY o) INTO opts
      FROM pg_catalog.pg_foreign_server s, pg_catalog.unnest(s.srvoptions) o
     WHERE s.srvname = 'webhook_ingest_shards' AND (o LIKE format('p%s=%%', part) OR o LIKE format('p%s=%%', from_shard));
    IF substr(opts[1], strpos(opts[1], '=') + 1) = substr(opts[2], strpos(opts[2], '=') + 1) THEN
        RAISE EXCEPTION 'partitions % and % name the same database', part, from_shard
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = format('Point p%s at the new database first: ALTER SERVER webhook_ingest_shards OPTIONS (SET p%s ''...'').',
                                part, part);
    END IF;
    SELECT count(*) FILTER (WHERE m.running), array_agg(m.id) FILTER (WHERE NOT m.running),
           array_agg(m.source) FILTER (WHERE NOT m.running), array_agg(m.external_id) FILTER (WHERE NOT m.running),
           array_agg(m.payload) FILTER (WHERE NOT m.running)
      INTO busy, ids, srcs, xids, pays
      FROM webhook_ingest._moving_jobs_on(from_shard, part, n - 1) m;
    IF busy > 0 THEN
        RAISE EXCEPTION '% jobs of partition % are running on shard %', busy, part, from_shard
            USING ERRCODE = 'object_in_use', HINT = 'Wait until they finish (the intake is closed) and run it again.';
    END IF;
    PERFORM webhook_ingest._start_job_ids_on(part, webhook_ingest._last_job_id_on(from_shard) + 1000);
    SELECT array_agg(l.source), array_agg(l.event_id), array_agg(l.received_at) INTO evs, evids, evat
      FROM webhook_ingest._ledger_on(from_shard) l;
    events_copied := coalesce(webhook_ingest._insert_ledger_on(part, coalesce(evs, '{}'), coalesce(evids, '{}'),
                                                                coalesce(evat, '{}')), 0);
    jobs_moved := coalesce(webhook_ingest._enqueue_many_on(part, coalesce(srcs, '{}'), coalesce(xids, '{}'),
                                                            coalesce(pays, '{}')), 0);
    PERFORM webhook_ingest._cancel_many_on(from_shard, coalesce(ids, '{}'));
END
$fn$;

/* ---------------------------------------------------------------- privileges */

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA webhook_ingest FROM PUBLIC;
REVOKE ALL ON webhook_ingest.sources, webhook_ingest.intake_closed FROM PUBLIC;
-- Pure helpers: anyone.
GRANT EXECUTE ON FUNCTION webhook_ingest.shard_hash(text, text), webhook_ingest.shard_count(),
    webhook_ingest.shard_of(text, text), webhook_ingest.router_job_id(integer, bigint),
    webhook_ingest.job_shard(bigint), webhook_ingest.shard_job_id(bigint), webhook_ingest._route(text, text),
    webhook_ingest._shard_error(integer, text, text, text, text),
    webhook_ingest._fan_out_error(text, text, text, text), webhook_ingest._remote(integer, refcursor),
    webhook_ingest._check_intake(), webhook_ingest._receive_route(text, text)
    TO PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._hide_statement_on_error() TO webhook_ingest_enqueue, webhook_ingest_admin;
GRANT SELECT ON webhook_ingest.intake_closed TO PUBLIC;
-- Applications: what they may call on a shard, here routed (the shard checks them again).
GRANT EXECUTE ON FUNCTION webhook_ingest.enqueue(text, text, jsonb, text), webhook_ingest.receive(text, jsonb, text),
    webhook_ingest.wait_for_job(bigint, interval), webhook_ingest.job(bigint),
    webhook_ingest._enqueue_on(text, text, jsonb, text), webhook_ingest._receive_on(text, jsonb, text),
    webhook_ingest._receive_unrouted(text, jsonb, text), webhook_ingest._receive_unrouted_on(text, jsonb, text),
    webhook_ingest._enqueue_route(text, text),
    webhook_ingest._unrouted_route(), webhook_ingest._check_body_size(text), webhook_ingest._check_caller(),
    webhook_ingest._receive_part(text, text), webhook_ingest._job_part(bigint),
    webhook_ingest._wait_for_job_on(bigint, interval), webhook_ingest._job_on(bigint)
    TO webhook_ingest_enqueue, webhook_ingest_admin;
-- Admins.
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA webhook_ingest TO webhook_ingest_admin;
GRANT SELECT, INSERT, UPDATE, DELETE ON webhook_ingest.sources TO webhook_ingest_admin;
GRANT INSERT, UPDATE, DELETE ON webhook_ingest.intake_closed TO webhook_ingest_admin;
-- Monitors: the views (each shard checks the role again).
GRANT EXECUTE ON FUNCTION webhook_ingest._shard_rows(text), webhook_ingest._check_caller(),
    webhook_ingest._part(integer),
    webhook_ingest._queue_stats_on(integer), webhook_ingest._worker_status_on(integer),
    webhook_ingest._latency_on(integer), webhook_ingest._recent_failures_on(integer)
    TO webhook_ingest_monitor;
GRANT SELECT ON webhook_ingest.queue_stats, webhook_ingest.queue_stats_by_shard, webhook_ingest.worker_status,
    webhook_ingest.latency, webhook_ingest.latency_by_shard, webhook_ingest.recent_failures
    TO webhook_ingest_monitor, webhook_ingest_admin;
