/* webhook_ingest--0.6.0--0.7.0.sql: upstreams over TLS - a source's CA and client certificate, proxies */

\echo Use "ALTER EXTENSION webhook_ingest UPDATE TO '0.7.0'" to load this file. \quit

/*
 * A source may name the certificate authorities its upstream's certificate
 * is checked against (tls_ca, instead of the system's bundle), a client
 * certificate to present (tls_client_cert, with its key), and a proxy for its
 * fetches (proxy, over webhook_ingest.proxy).  The key is a secret: it lives
 * in source_tls_keys, which no role but the extension's owner (a superuser)
 * may read, and is written only through _set_tls_client.  Every PEM is
 * parsed when it is set; one that does not parse is refused (22023).
 *
 * worker_status gains the connections the worker opened (all, and over TLS),
 * so an operator sees connection reuse and HTTP/2 multiplexing at work.
 */

/* ---- the settings, and their checks (src/tls_check.c, src/egress.c) ---- */

ALTER TABLE webhook_ingest.sources
    ADD COLUMN tls_ca text,
    ADD COLUMN tls_client_cert text,
    ADD COLUMN proxy text;
COMMENT ON COLUMN webhook_ingest.sources.tls_ca IS
    'PEM certificates of the authorities the upstream''s certificate is checked against, instead of the system''s bundle; NULL: the system''s bundle';
COMMENT ON COLUMN webhook_ingest.sources.tls_client_cert IS
    'PEM client certificate (and its chain) presented to the upstream; its key is in source_tls_keys; NULL: none';
COMMENT ON COLUMN webhook_ingest.sources.proxy IS
    'http(s) proxy for this source''s fetches (http://host:port); empty: none; NULL: webhook_ingest.proxy; set by superusers only';

CREATE FUNCTION webhook_ingest._check_tls_ca(tls_ca text) RETURNS void
AS 'MODULE_PATHNAME', 'webhook_ingest_check_tls_ca'
LANGUAGE C IMMUTABLE STRICT;
-- (need_key false: the certificate alone, as sources_guard sees it)
CREATE FUNCTION webhook_ingest._check_tls_client(tls_client_cert text, tls_client_key text,
                                                 need_key boolean DEFAULT true) RETURNS void
AS 'MODULE_PATHNAME', 'webhook_ingest_check_tls_client'
LANGUAGE C IMMUTABLE;
CREATE FUNCTION webhook_ingest._check_proxy(proxy text) RETURNS void
AS 'MODULE_PATHNAME', 'webhook_ingest_check_proxy'
LANGUAGE C IMMUTABLE STRICT;

/*
 * The client keys: no privilege for anyone but the owner; the worker (a
 * superuser) reads them, pg_dump (as a superuser) keeps them.
 */
CREATE TABLE webhook_ingest.source_tls_keys (
    source          text COLLATE "C" PRIMARY KEY
                    REFERENCES webhook_ingest.sources (name) ON UPDATE CASCADE ON DELETE CASCADE,
    tls_client_key  text NOT NULL
);
COMMENT ON TABLE webhook_ingest.source_tls_keys IS
    'the private key of each source''s tls_client_cert; readable by superusers only';
REVOKE ALL ON webhook_ingest.source_tls_keys FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.source_tls_keys', '');
-- A change of a key is one of its source for every backend and the worker.
CREATE TRIGGER source_tls_keys_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON webhook_ingest.source_tls_keys
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_ingest._sources_changed();

/*
 * Set (both non-NULL) or clear (both NULL) a source's client certificate and
 * key.  SECURITY DEFINER: an admin writes the key it cannot read.
 */
CREATE FUNCTION webhook_ingest._set_tls_client(source text, tls_client_cert text, tls_client_key text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM webhook_ingest._check_tls_client(tls_client_cert, tls_client_key);
    IF tls_client_key IS NULL THEN
        DELETE FROM webhook_ingest.source_tls_keys k WHERE k.source = _set_tls_client.source;
    ELSE
        INSERT INTO webhook_ingest.source_tls_keys AS k (source, tls_client_key)
        VALUES (_set_tls_client.source, _set_tls_client.tls_client_key)
        ON CONFLICT ON CONSTRAINT source_tls_keys_pkey DO UPDATE SET tls_client_key = EXCLUDED.tls_client_key;
    END IF;
    UPDATE webhook_ingest.sources s SET tls_client_cert = _set_tls_client.tls_client_cert
     WHERE s.name = _set_tls_client.source;
END
$fn$;

/*
 * sources_guard checks the TLS and proxy settings too, whoever writes the
 * row (an admin sets a client certificate only with its key, through
 * _set_tls_client).
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

/* ---- add_source and alter_source take them ---- */

DROP FUNCTION webhook_ingest.add_source(text, text, regprocedure, jsonb, integer, integer, regrole[],
                                        text, text[], interval, jsonpath, jsonpath,
                                        integer, real, integer, integer, interval);
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
BEGIN
    PERFORM webhook_ingest._check_source(name, url_template, handler, headers, timeout_ms, max_attempts);
    PERFORM webhook_ingest._check_intake(signature_scheme, signing_secrets, signature_tolerance,
                                         external_id_path, event_id_path);
    PERFORM webhook_ingest._check_keep_payloads(keep_payloads);
    PERFORM webhook_ingest._check_tls_client(tls_client_cert, tls_client_key);
    INSERT INTO webhook_ingest.sources AS s (name, url_template, handler, headers, timeout_ms, max_attempts,
                                             enqueue_roles, signature_scheme, signing_secrets,
                                             signature_tolerance, external_id_path, event_id_path,
                                             weight, rate_limit, rate_burst, max_in_flight, keep_payloads,
                                             tls_ca, proxy)
    VALUES (add_source.name, add_source.url_template, add_source.handler,
            coalesce(add_source.headers, '{}'), add_source.timeout_ms, add_source.max_attempts,
            add_source.enqueue_roles, add_source.signature_scheme, add_source.signing_secrets,
            coalesce(add_source.signature_tolerance, '5 minutes'), add_source.external_id_path,
            add_source.event_id_path, coalesce(add_source.weight, 1), add_source.rate_limit,
            add_source.rate_burst, add_source.max_in_flight, add_source.keep_payloads,
            add_source.tls_ca, add_source.proxy)
    ON CONFLICT ON CONSTRAINT sources_pkey DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'source "%" already exists', webhook_ingest._clip(name)
            USING ERRCODE = 'duplicate_object',
                  HINT = 'Use webhook_ingest.alter_source() to change it.';
    END IF;
    IF tls_client_cert IS NOT NULL THEN
        PERFORM webhook_ingest._set_tls_client(add_source.name, add_source.tls_client_cert, add_source.tls_client_key);
    END IF;
END
$fn$;
COMMENT ON FUNCTION webhook_ingest.add_source(text, text, regprocedure, jsonb, integer, integer, regrole[],
                                              text, text[], interval, jsonpath, jsonpath,
                                              integer, real, integer, integer, interval, text, text, text, text) IS
    'register an upstream API; for receive(): signature_scheme, signing_secrets and external_id_path; '
    'for the scheduler: weight, rate_limit, rate_burst, max_in_flight; keep_payloads: how long done jobs keep theirs; '
    'tls_ca, tls_client_cert and tls_client_key (PEM), proxy: how the upstream is reached';

DROP FUNCTION webhook_ingest.alter_source(text, text, regprocedure, jsonb, integer, integer, boolean,
                                          regrole[], boolean, text, text[], interval, jsonpath, jsonpath,
                                          boolean, boolean, integer, real, integer, integer, boolean,
                                          interval, boolean);
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
    IF reset_keep_payloads AND alter_source.keep_payloads IS NOT NULL THEN
        RAISE EXCEPTION 'cannot both set and reset keep_payloads' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF reset_tls_ca AND alter_source.tls_ca IS NOT NULL THEN
        RAISE EXCEPTION 'cannot both set and reset tls_ca' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF reset_tls_client AND (alter_source.tls_client_cert IS NOT NULL OR alter_source.tls_client_key IS NOT NULL) THEN
        RAISE EXCEPTION 'cannot both set and reset the client certificate' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF reset_proxy AND alter_source.proxy IS NOT NULL THEN
        RAISE EXCEPTION 'cannot both set and reset proxy' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM webhook_ingest._check_tls_client(alter_source.tls_client_cert, alter_source.tls_client_key);
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
    cur.keep_payloads := CASE WHEN reset_keep_payloads THEN NULL
                              ELSE coalesce(alter_source.keep_payloads, cur.keep_payloads) END;
    cur.tls_ca := CASE WHEN reset_tls_ca THEN NULL ELSE coalesce(alter_source.tls_ca, cur.tls_ca) END;
    cur.proxy := CASE WHEN reset_proxy THEN NULL ELSE coalesce(alter_source.proxy, cur.proxy) END;
    PERFORM webhook_ingest._check_source(cur.name, cur.url_template, cur.handler, cur.headers,
                                         cur.timeout_ms, cur.max_attempts);
    PERFORM webhook_ingest._check_intake(cur.signature_scheme, cur.signing_secrets, cur.signature_tolerance,
                                         cur.external_id_path, cur.event_id_path);
    IF alter_source.keep_payloads IS NOT NULL THEN
        PERFORM webhook_ingest._check_keep_payloads(cur.keep_payloads);
    END IF;
    UPDATE webhook_ingest.sources s
       SET url_template = cur.url_template, handler = cur.handler, headers = cur.headers,
           timeout_ms = cur.timeout_ms, max_attempts = cur.max_attempts, enqueue_roles = cur.enqueue_roles,
           signature_scheme = cur.signature_scheme, signing_secrets = cur.signing_secrets,
           signature_tolerance = cur.signature_tolerance, external_id_path = cur.external_id_path,
           event_id_path = cur.event_id_path, weight = cur.weight, rate_limit = cur.rate_limit,
           rate_burst = cur.rate_burst, max_in_flight = cur.max_in_flight, keep_payloads = cur.keep_payloads,
           tls_ca = cur.tls_ca, proxy = cur.proxy, updated_at = now()
     WHERE s.name = cur.name;
    IF reset_tls_client OR alter_source.tls_client_cert IS NOT NULL THEN
        PERFORM webhook_ingest._set_tls_client(cur.name, alter_source.tls_client_cert, alter_source.tls_client_key);
    END IF;
    -- Limits loosened or a throttle ended: the worker looks again now.
    PERFORM webhook_ingest._wake_worker_at_commit();
END
$fn$;
COMMENT ON FUNCTION webhook_ingest.alter_source(text, text, regprocedure, jsonb, integer, integer, boolean,
                                                regrole[], boolean, text, text[], interval, jsonpath, jsonpath,
                                                boolean, boolean, integer, real, integer, integer, boolean,
                                                interval, boolean, text, boolean, text, text, boolean,
                                                text, boolean) IS
    'change an upstream API; NULL arguments keep the current value (drop_signature: receive() refuses until set '
    'again; reset_limits: no rate_limit, rate_burst, max_in_flight; reset_keep_payloads: payloads dropped when done; '
    'reset_tls_ca: the system''s bundle; reset_tls_client: no client certificate; reset_proxy: webhook_ingest.proxy); '
    'ends a throttle of the source';

/* ---- worker_status: connections opened ---- */

DROP VIEW webhook_ingest.worker_status;
DROP FUNCTION webhook_ingest._worker_status();
CREATE FUNCTION webhook_ingest._worker_status(
    OUT pid integer, OUT database text, OUT state text, OUT started_at timestamptz,
    OUT in_flight integer, OUT claimed bigint, OUT fetched bigint, OUT succeeded bigint,
    OUT retried bigint, OUT dead bigint, OUT handler_errors bigint, OUT bytes bigint,
    OUT last_error text, OUT last_error_at timestamptz,
    OUT connections_opened bigint, OUT tls_connections_opened bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'webhook_ingest_worker_status_all'
LANGUAGE C VOLATILE STRICT;
CREATE VIEW webhook_ingest.worker_status AS SELECT * FROM webhook_ingest._worker_status();
COMMENT ON VIEW webhook_ingest.worker_status IS
    'one row per database worker of the cluster: pid, database, state, transfers in flight, counters since it started '
    '(connections_opened: new connections, tls_connections_opened: of which over TLS), last error';

/* ---- privileges ---- */

REVOKE ALL ON FUNCTION webhook_ingest._check_tls_ca(text), webhook_ingest._check_tls_client(text, text, boolean),
                       webhook_ingest._check_proxy(text), webhook_ingest._set_tls_client(text, text, text),
                       webhook_ingest._worker_status(),
                       webhook_ingest.add_source(text, text, regprocedure, jsonb, integer, integer, regrole[],
                                                 text, text[], interval, jsonpath, jsonpath,
                                                 integer, real, integer, integer, interval, text, text, text, text),
                       webhook_ingest.alter_source(text, text, regprocedure, jsonb, integer, integer, boolean,
                                                   regrole[], boolean, text, text[], interval, jsonpath, jsonpath,
                                                   boolean, boolean, integer, real, integer, integer, boolean,
                                                   interval, boolean, text, boolean, text, text, boolean,
                                                   text, boolean)
    FROM PUBLIC;
REVOKE ALL ON webhook_ingest.worker_status FROM PUBLIC;
-- tls_client_cert only through _set_tls_client, with its key.
GRANT INSERT (tls_ca, proxy), UPDATE (tls_ca, proxy) ON webhook_ingest.sources TO webhook_ingest_admin;
GRANT SELECT ON webhook_ingest.worker_status TO webhook_ingest_admin, webhook_ingest_monitor;
GRANT EXECUTE ON FUNCTION
    webhook_ingest._check_tls_ca(text),
    webhook_ingest._check_tls_client(text, text, boolean),
    webhook_ingest._check_proxy(text),
    webhook_ingest._set_tls_client(text, text, text),
    webhook_ingest.add_source(text, text, regprocedure, jsonb, integer, integer, regrole[],
                              text, text[], interval, jsonpath, jsonpath, integer, real, integer, integer, interval,
                              text, text, text, text),
    webhook_ingest.alter_source(text, text, regprocedure, jsonb, integer, integer, boolean,
                                regrole[], boolean, text, text[], interval, jsonpath, jsonpath, boolean, boolean,
                                integer, real, integer, integer, boolean, interval, boolean,
                                text, boolean, text, text, boolean, text, boolean)
    TO webhook_ingest_admin;
GRANT EXECUTE ON FUNCTION webhook_ingest._worker_status() TO webhook_ingest_admin, webhook_ingest_monitor;
