/* webhook_ingest_router--0.1.0--0.2.0.sql: router 0.1.0 to 0.2.0.
 *
 * No change of behaviour: every remote call now goes through one function, _remote, the one place its
 * errors are caught and turned into the router's (0.1.0 repeated that exception block in each of 17
 * places).  Each routed function opens its PL/Proxy call as a cursor and hands it to _remote; the
 * views over all shards read through _shard_rows (the rows as jsonb, turned back into the views'
 * columns), which replaces _each_shard and _worker_status_all.  A fresh install of 0.2.0 runs
 * webhook_ingest_router--0.2.0.sql; TAP 140 checks that both give the same catalog.
 */

\echo Use "ALTER EXTENSION webhook_ingest_router UPDATE TO '0.2.0'" to load this file. \quit

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

CREATE OR REPLACE FUNCTION webhook_ingest.enqueue(source text, external_id text, payload jsonb DEFAULT NULL,
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

CREATE OR REPLACE FUNCTION webhook_ingest.receive(source text, headers jsonb, body text)
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

CREATE OR REPLACE FUNCTION webhook_ingest.wait_for_job(job_id bigint, timeout interval DEFAULT '30 seconds')
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

CREATE OR REPLACE FUNCTION webhook_ingest.retry(job_id bigint) RETURNS boolean
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

CREATE OR REPLACE FUNCTION webhook_ingest.cancel(job_id bigint) RETURNS boolean
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

CREATE OR REPLACE FUNCTION webhook_ingest.job(job_id bigint)
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

CREATE OR REPLACE FUNCTION webhook_ingest.add_source(
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

CREATE OR REPLACE FUNCTION webhook_ingest.alter_source(
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

CREATE OR REPLACE FUNCTION webhook_ingest.drop_source(name text, force boolean DEFAULT false) RETURNS void
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

CREATE OR REPLACE FUNCTION webhook_ingest.pause_source(name text) RETURNS void
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

CREATE OR REPLACE FUNCTION webhook_ingest.resume_source(name text) RETURNS void
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

CREATE OR REPLACE FUNCTION webhook_ingest.check_shards() RETURNS TABLE (shard integer, source text, problem text)
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

CREATE OR REPLACE VIEW webhook_ingest.queue_stats_by_shard AS
SELECT r.* FROM webhook_ingest._shard_rows('queue_stats') s, jsonb_to_record(s) AS r (
    shard integer, source text, paused boolean, pending bigint, due_now bigint, running bigint,
    retry_waiting bigint, done_last_hour bigint, retried_last_hour bigint, dead bigint, backlog_age interval,
    in_flight integer, throttled_until timestamptz, throttled_by text);

CREATE OR REPLACE VIEW webhook_ingest.worker_status AS
SELECT r.* FROM webhook_ingest._shard_rows('worker_status') s, jsonb_to_record(s) AS r (
    shard integer, pid integer, database text, state text, started_at timestamptz, in_flight integer,
    claimed bigint, fetched bigint, succeeded bigint, retried bigint, dead bigint, handler_errors bigint,
    bytes bigint, last_error text, last_error_at timestamptz, connections_opened bigint,
    tls_connections_opened bigint);

CREATE OR REPLACE VIEW webhook_ingest.latency_by_shard AS
SELECT r.* FROM webhook_ingest._shard_rows('latency') s, jsonb_to_record(s) AS r (
    shard integer, source text, jobs bigint, done_p50_ms double precision, done_p95_ms double precision,
    done_p99_ms double precision, fetch_p50_ms double precision, fetch_p95_ms double precision,
    fetch_p99_ms double precision);

CREATE OR REPLACE VIEW webhook_ingest.recent_failures AS
SELECT f.shard, f.failed_at, webhook_ingest.router_job_id(f.shard, f.job_id) AS job_id, f.source, f.external_id,
       f.attempt, f.http_status, f.error, f.fetch_ms, f.outcome
  FROM webhook_ingest._shard_rows('recent_failures') s, jsonb_to_record(s) AS f (
    shard integer, failed_at timestamptz, job_id bigint, source text, external_id text, attempt integer,
    http_status integer, error text, fetch_ms double precision, outcome text)
 ORDER BY f.failed_at DESC
 LIMIT 128;

DROP FUNCTION webhook_ingest._each_shard(text);
DROP FUNCTION webhook_ingest._worker_status_all();

-- The new functions' privileges, as webhook_ingest_router--0.2.0.sql grants them.
REVOKE ALL ON FUNCTION webhook_ingest._remote(integer, refcursor), webhook_ingest._receive_unrouted(text, jsonb, text),
    webhook_ingest._shard_rows(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._remote(integer, refcursor) TO PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._receive_unrouted(text, jsonb, text) TO webhook_ingest_enqueue, webhook_ingest_admin;
GRANT EXECUTE ON FUNCTION webhook_ingest._remote(integer, refcursor), webhook_ingest._receive_unrouted(text, jsonb, text),
    webhook_ingest._shard_rows(text) TO webhook_ingest_admin;
GRANT EXECUTE ON FUNCTION webhook_ingest._shard_rows(text) TO webhook_ingest_monitor;

/*
 * The shard's worker only: from webhook_ingest 0.10.0 on, a shard's worker_status has a row per
 * apply worker too.
 */
CREATE OR REPLACE FUNCTION webhook_ingest._worker_status_on(shard integer)
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
