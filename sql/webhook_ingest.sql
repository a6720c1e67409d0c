/*
 * webhook_ingest: the schema of a fresh install (CREATE EXTENSION webhook_ingest)
 *
 * The one hand-kept description of the current schema: each table, view,
 * function, trigger, grant and comment once, as it is now, in the order a
 * reader meets them.  make copies this file to webhook_ingest--<version>.sql.
 *
 * How it relates to the other scripts in sql/:
 * - webhook_ingest--0.1.0.sql and the update scripts are the history: an
 *   installed database updates through them (ALTER EXTENSION webhook_ingest
 *   UPDATE), and the landed ones are frozen.  A change to the schema goes
 *   into this file AND into the update script of the version being built.
 * - The fresh installs of landed versions (0.3.0 ... 0.9.0) are generated
 *   from their chains (sql/fresh_install.awk): the tests install them as
 *   they were, then update.
 * - test/t/041_install_scripts.pl checks that this file and every updated
 *   database have the same catalog (columns in the same order, function
 *   bodies to the byte, grants, comments, what pg_dump keeps).
 *
 * Conventions: every object is schema-qualified and every function sets
 * its search_path (pg_catalog, pg_temp); nothing is granted to PUBLIC; the
 * three roles below get what each needs.  A function's body may call one
 * defined further down: bodies are checked when first called.
 */
\echo Use "CREATE EXTENSION webhook_ingest" to load this file. \quit

SET check_function_bodies = false;

/* ==========================================================================
 * Roles and the schema
 *
 * Three roles, made once per cluster and shared by its databases:
 * webhook_ingest_enqueue (the application: enqueue, receive, its own jobs),
 * webhook_ingest_monitor (the monitoring views) and webhook_ingest_admin
 * (sources, every job, the history).  The owner (who ran CREATE EXTENSION)
 * and superusers have everything.
 */

DO $do$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'webhook_ingest_enqueue') THEN
        CREATE ROLE webhook_ingest_enqueue NOLOGIN;
    END IF;
END
$do$;

DO $do$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'webhook_ingest_monitor') THEN
        CREATE ROLE webhook_ingest_monitor NOLOGIN;
    END IF;
END
$do$;

DO $do$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'webhook_ingest_admin') THEN
        CREATE ROLE webhook_ingest_admin NOLOGIN;
    END IF;
END
$do$;

GRANT USAGE ON SCHEMA webhook_ingest TO webhook_ingest_enqueue, webhook_ingest_monitor, webhook_ingest_admin;

/* ==========================================================================
 * Small helpers every part uses
 *
 * The states of a job, message clipping, the ledger's time (integer seconds
 * since 2000-01-01 UTC) and its keyed hash (SipHash-2-4 under a key of the
 * database's, src/ledger_key.c), used by every part below.
 */

CREATE TYPE webhook_ingest.job_state AS ENUM (
    'pending',
    'running',
    'done',
    'dead',
    'cancelled'
);

-- At most 64 bytes of an input, cut at a character, for messages (src/access.c).
CREATE FUNCTION webhook_ingest._clip(text)
RETURNS text
AS 'MODULE_PATHNAME', 'webhook_ingest_clip'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
REVOKE ALL ON FUNCTION webhook_ingest._clip(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._clip(text) TO webhook_ingest_admin;

-- Does a partition of parent take rows of time t?
CREATE FUNCTION webhook_ingest._covers(parent regclass, t timestamptz)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT EXISTS (SELECT FROM webhook_ingest._partitions(parent) p WHERE p.lower_bound <= t AND t < p.upper_bound)
$$;
REVOKE ALL ON FUNCTION webhook_ingest._covers(parent regclass, t timestamp with time zone) FROM PUBLIC;

/*
 * The ledger's time: integer seconds since 2000-01-01 UTC (_seconds), and
 * back (_at, for the events view).  _seconds() is event_ledger.received's
 * default, evaluated for every accepted event id, so its body is built of
 * immutable parts only (timestamptz minus timestamptz is an interval of
 * days and seconds; its epoch is exact) and the planner inlines it: with
 * extract(epoch FROM timestamptz), only STABLE, it ran through the SQL
 * function executor at every statement, a sixth of enqueue's time
 * (bench/enqueue, issue 17).
 */
CREATE FUNCTION webhook_ingest._seconds(t timestamptz)
RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN extract(epoch FROM t - timestamptz '2000-01-01 00:00:00+00')::integer;
REVOKE ALL ON FUNCTION webhook_ingest._seconds(t timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._seconds(t timestamp with time zone) TO webhook_ingest_admin;

CREATE FUNCTION webhook_ingest._at(seconds integer)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN pg_catalog.to_timestamp(seconds::double precision + 946684800);
REVOKE ALL ON FUNCTION webhook_ingest._at(seconds integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._at(seconds integer) TO webhook_ingest_admin;

CREATE FUNCTION webhook_ingest._ledger_hash(text)
RETURNS integer
AS 'MODULE_PATHNAME', 'webhook_ingest_ledger_hash'
LANGUAGE C IMMUTABLE STRICT PARALLEL RESTRICTED;
REVOKE ALL ON FUNCTION webhook_ingest._ledger_hash(text) FROM PUBLIC;

-- A payload's size as max_payload_size measures it (uncompressed), however it is stored (src/enqueue.c).
CREATE FUNCTION webhook_ingest._payload_size(payload jsonb)
RETURNS bigint
AS 'MODULE_PATHNAME', 'webhook_ingest_payload_size'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
REVOKE ALL ON FUNCTION webhook_ingest._payload_size(payload jsonb) FROM PUBLIC;

CREATE OPERATOR CLASS webhook_ingest.ledger_ops FOR TYPE text USING hash AS
    OPERATOR 1 pg_catalog.= (text, text),
    FUNCTION 1 webhook_ingest._ledger_hash(text);

/* ==========================================================================
 * Sources: the upstream APIs
 *
 * A source is one upstream API: where an object is fetched (url_template),
 * what is done with it (a handler, or documents), how its webhooks are
 * checked (signature_*, *_path), scheduled (weight, rate_limit,
 * max_in_flight) and kept (keep_payloads), its TLS and proxy.  Admins change
 * it through add_source/alter_source or by hand: the sources_guard trigger
 * validates either way, and every change reaches each backend's cache
 * (sources_changed).  The name is the key users see; id is the number the
 * ledger and the history store.
 */

CREATE TABLE webhook_ingest.sources (
    name text NOT NULL COLLATE pg_catalog."C",
    url_template text NOT NULL,
    handler regprocedure,
    headers jsonb DEFAULT '{}'::jsonb NOT NULL,
    timeout_ms integer DEFAULT 10000 NOT NULL,
    max_attempts integer DEFAULT 10 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    paused boolean DEFAULT false NOT NULL,
    enqueue_roles regrole[],
    signature_scheme text,
    signing_secrets text[],
    signature_tolerance interval DEFAULT '00:05:00'::interval NOT NULL,
    external_id_path jsonpath,
    event_id_path jsonpath,
    weight integer DEFAULT 1 NOT NULL,
    rate_limit real,
    rate_burst integer,
    max_in_flight integer,
    id integer NOT NULL,
    keep_payloads interval,
    tls_ca text,
    tls_client_cert text,
    proxy text,
    CONSTRAINT sources_keep_payloads_check CHECK (((keep_payloads > '00:00:00'::interval) AND (keep_payloads <= '1000 days'::interval))),
    CONSTRAINT sources_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 1000))),
    CONSTRAINT sources_timeout_ms_check CHECK (((timeout_ms >= 1) AND (timeout_ms <= 3600000))),
    CONSTRAINT sources_id_key UNIQUE (id),
    CONSTRAINT sources_pkey PRIMARY KEY (name)
)
WITH (autovacuum_analyze_threshold='1', autovacuum_analyze_scale_factor='0');
COMMENT ON TABLE webhook_ingest.sources IS 'upstream APIs that webhooks refer to (admins only)';
COMMENT ON COLUMN webhook_ingest.sources.enqueue_roles IS 'roles whose members may enqueue into this source and see its jobs; NULL: every member of webhook_ingest_enqueue';
COMMENT ON COLUMN webhook_ingest.sources.signature_scheme IS 'how the sender signs its webhooks: standard-webhooks, stripe, github, shopify or slack; NULL: receive() refuses';
COMMENT ON COLUMN webhook_ingest.sources.signing_secrets IS 'the secrets receive() tries, any one may match (rotation); as secret as headers';
COMMENT ON COLUMN webhook_ingest.sources.signature_tolerance IS 'how far a signed timestamp may be from now, either way (schemes that sign one)';
COMMENT ON COLUMN webhook_ingest.sources.external_id_path IS 'where receive() finds the object id in the body (a string or number); NULL: receive() refuses';
COMMENT ON COLUMN webhook_ingest.sources.event_id_path IS 'where receive() finds the event id in the body; NULL: the scheme''s delivery id';
COMMENT ON COLUMN webhook_ingest.sources.weight IS 'share of free fetch slots against other sources with due work (1 to 1000)';
COMMENT ON COLUMN webhook_ingest.sources.rate_limit IS 'most fetches started per second (a token bucket); NULL: no limit';
COMMENT ON COLUMN webhook_ingest.sources.rate_burst IS 'fetches the bucket holds; NULL: max(1, ceil(rate_limit / 10)), a tenth of a second''s worth';
COMMENT ON COLUMN webhook_ingest.sources.max_in_flight IS 'most fetches of the source in flight at once; NULL: no limit beyond max_host_connections';
COMMENT ON COLUMN webhook_ingest.sources.id IS 'the number the ledger and the history store instead of the name';
COMMENT ON COLUMN webhook_ingest.sources.keep_payloads IS 'how long a done job keeps its payload (for retry); NULL: dropped when the job is done';
COMMENT ON COLUMN webhook_ingest.sources.tls_ca IS 'PEM certificates of the authorities the upstream''s certificate is checked against, instead of the system''s bundle; NULL: the system''s bundle';
COMMENT ON COLUMN webhook_ingest.sources.tls_client_cert IS 'PEM client certificate (and its chain) presented to the upstream; its key is in source_tls_keys; NULL: none';
COMMENT ON COLUMN webhook_ingest.sources.proxy IS 'http(s) proxy for this source''s fetches (http://host:port); empty: none; NULL: webhook_ingest.proxy; set by superusers only';
GRANT SELECT ON TABLE webhook_ingest.sources TO webhook_ingest_admin;
GRANT INSERT(name) ON TABLE webhook_ingest.sources TO webhook_ingest_admin;
GRANT INSERT(url_template),UPDATE(url_template) ON TABLE webhook_ingest.sources TO webhook_ingest_admin;
GRANT INSERT(handler),UPDATE(handler) ON TABLE webhook_ingest.sources TO webhook_ingest_admin;
GRANT INSERT(headers),UPDATE(headers) ON TABLE webhook_ingest.sources TO webhook_ingest_admin;
GRANT INSERT(timeout_ms),UPDATE(timeout_ms) ON TABLE webhook_ingest.sources TO webhook_ingest_admin;
GRANT INSERT(max_attempts),UPDATE(max_attempts) ON TABLE webhook_ingest.sources TO webhook_ingest_admin;
GRANT UPDATE(updated_at) ON TABLE webhook_ingest.sources TO webhook_ingest_admin;
GRANT INSERT(enqueue_roles),UPDATE(enqueue_roles) ON TABLE webhook_ingest.sources TO webhook_ingest_admin;
GRANT INSERT(signature_scheme),UPDATE(signature_scheme) ON TABLE webhook_ingest.sources TO webhook_ingest_admin;
GRANT INSERT(signing_secrets),UPDATE(signing_secrets) ON TABLE webhook_ingest.sources TO webhook_ingest_admin;
GRANT INSERT(signature_tolerance),UPDATE(signature_tolerance) ON TABLE webhook_ingest.sources TO webhook_ingest_admin;
GRANT INSERT(external_id_path),UPDATE(external_id_path) ON TABLE webhook_ingest.sources TO webhook_ingest_admin;
GRANT INSERT(event_id_path),UPDATE(event_id_path) ON TABLE webhook_ingest.sources TO webhook_ingest_admin;
GRANT INSERT(weight),UPDATE(weight) ON TABLE webhook_ingest.sources TO webhook_ingest_admin;
GRANT INSERT(rate_limit),UPDATE(rate_limit) ON TABLE webhook_ingest.sources TO webhook_ingest_admin;
GRANT INSERT(rate_burst),UPDATE(rate_burst) ON TABLE webhook_ingest.sources TO webhook_ingest_admin;
GRANT INSERT(max_in_flight),UPDATE(max_in_flight) ON TABLE webhook_ingest.sources TO webhook_ingest_admin;
GRANT INSERT(keep_payloads),UPDATE(keep_payloads) ON TABLE webhook_ingest.sources TO webhook_ingest_admin;
GRANT INSERT(tls_ca),UPDATE(tls_ca) ON TABLE webhook_ingest.sources TO webhook_ingest_admin;
GRANT INSERT(proxy),UPDATE(proxy) ON TABLE webhook_ingest.sources TO webhook_ingest_admin;

CREATE TABLE webhook_ingest.source_tls_keys (
    source text NOT NULL COLLATE pg_catalog."C",
    tls_client_key text NOT NULL,
    CONSTRAINT source_tls_keys_pkey PRIMARY KEY (source)
);
COMMENT ON TABLE webhook_ingest.source_tls_keys IS 'the private key of each source''s tls_client_cert; readable by superusers only';
REVOKE ALL ON webhook_ingest.source_tls_keys FROM PUBLIC;

ALTER TABLE webhook_ingest.sources ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME webhook_ingest.sources_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

ALTER TABLE ONLY webhook_ingest.source_tls_keys
    ADD CONSTRAINT source_tls_keys_source_fkey FOREIGN KEY (source) REFERENCES webhook_ingest.sources(name) ON UPDATE CASCADE ON DELETE CASCADE;

-- Every change to sources reaches the per-backend cache of enqueue() (src/source_cache.c).
CREATE FUNCTION webhook_ingest._sources_changed() RETURNS trigger
AS 'MODULE_PATHNAME', 'webhook_ingest_sources_changed'
LANGUAGE C;
REVOKE ALL ON FUNCTION webhook_ingest._sources_changed() FROM PUBLIC;

/*
 * url_for: the URL the worker fetches for an object (src/url.c).
 */
CREATE FUNCTION webhook_ingest.url_for(source text, external_id text)
RETURNS text
AS 'MODULE_PATHNAME', 'webhook_ingest_url_for'
LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION webhook_ingest.url_for(source text, external_id text) IS 'the URL fetched for an object: the source''s url_template with the id percent-encoded as one path segment';
REVOKE ALL ON FUNCTION webhook_ingest.url_for(source text, external_id text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest.url_for(source text, external_id text) TO webhook_ingest_admin;

-- Validation shared by add_source and alter_source (src/validate.c).
CREATE FUNCTION webhook_ingest._check_source(
    name text, url_template text, handler regprocedure, headers jsonb,
    timeout_ms integer, max_attempts integer)
RETURNS void
AS 'MODULE_PATHNAME', 'webhook_ingest_check_source'
LANGUAGE C STABLE;
REVOKE ALL ON FUNCTION webhook_ingest._check_source(name text, url_template text, handler regprocedure, headers jsonb, timeout_ms integer, max_attempts integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._check_source(name text, url_template text, handler regprocedure, headers jsonb, timeout_ms integer, max_attempts integer) TO webhook_ingest_admin;

CREATE FUNCTION webhook_ingest.pause_source(name text)
RETURNS void
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$ SELECT webhook_ingest._set_paused(name, true) $fn$;
COMMENT ON FUNCTION webhook_ingest.pause_source(name text) IS 'stop fetching for a source; its webhooks are still accepted and wait';
REVOKE ALL ON FUNCTION webhook_ingest.pause_source(name text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest.pause_source(name text) TO webhook_ingest_admin;

CREATE FUNCTION webhook_ingest.resume_source(name text)
RETURNS void
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$ SELECT webhook_ingest._set_paused(name, false) $fn$;
COMMENT ON FUNCTION webhook_ingest.resume_source(name text) IS 'fetch for a paused source again; its waiting jobs are due now';
REVOKE ALL ON FUNCTION webhook_ingest.resume_source(name text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest.resume_source(name text) TO webhook_ingest_admin;

-- May the current user enqueue into this source?  The app roles' row security on jobs (src/access.c).
CREATE FUNCTION webhook_ingest._may_enqueue(source text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'webhook_ingest_may_enqueue'
LANGUAGE C STABLE STRICT;
REVOKE ALL ON FUNCTION webhook_ingest._may_enqueue(source text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._may_enqueue(source text) TO webhook_ingest_admin;
GRANT EXECUTE ON FUNCTION webhook_ingest._may_enqueue(source text) TO webhook_ingest_enqueue;

-- Validation of the intake settings (src/intake.c): a known scheme, at most 16 usable secrets, a sane
-- tolerance, paths that name no jsonpath variable.
CREATE FUNCTION webhook_ingest._check_intake(
    signature_scheme text, signing_secrets text[], signature_tolerance interval,
    external_id_path jsonpath, event_id_path jsonpath)
RETURNS void
AS 'MODULE_PATHNAME', 'webhook_ingest_check_intake'
LANGUAGE C STABLE;
REVOKE ALL ON FUNCTION webhook_ingest._check_intake(signature_scheme text, signing_secrets text[], signature_tolerance interval, external_id_path jsonpath, event_id_path jsonpath) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._check_intake(signature_scheme text, signing_secrets text[], signature_tolerance interval, external_id_path jsonpath, event_id_path jsonpath) TO webhook_ingest_admin;

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
REVOKE ALL ON FUNCTION webhook_ingest._check_limits(weight integer, rate_limit real, rate_burst integer, max_in_flight integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._check_limits(weight integer, rate_limit real, rate_burst integer, max_in_flight integer) TO webhook_ingest_admin;

/*
 * May the current user see the jobs of this source?  The admin role (and
 * whoever has its privileges: the owner, superusers) all of them; an app
 * role those of the sources it may enqueue into.  0.5.0's row security on
 * jobs, for the view.
 */
CREATE FUNCTION webhook_ingest._may_read_jobs(source text)
RETURNS boolean
LANGUAGE sql STABLE
RETURN pg_catalog.pg_has_role('webhook_ingest_admin', 'USAGE') OR webhook_ingest._may_enqueue(source);
REVOKE ALL ON FUNCTION webhook_ingest._may_read_jobs(source text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._may_read_jobs(source text) TO webhook_ingest_admin;
GRANT EXECUTE ON FUNCTION webhook_ingest._may_read_jobs(source text) TO webhook_ingest_enqueue;

CREATE FUNCTION webhook_ingest._set_paused(name text, paused boolean)
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
    UPDATE webhook_ingest.queue j
       SET next_attempt_at = CASE WHEN _set_paused.paused THEN 'infinity' ELSE now() END, updated_at = now()
     WHERE j.source = _set_paused.name AND j.state = 'pending'
       AND (j.next_attempt_at = 'infinity') <> _set_paused.paused;
    IF NOT _set_paused.paused THEN
        PERFORM webhook_ingest._wake_worker_at_commit();
    END IF;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._set_paused(name text, paused boolean) FROM PUBLIC;

-- keep_payloads: more than 0, and no longer than retention (a payload needs its job's history row).
CREATE FUNCTION webhook_ingest._check_keep_payloads(keep_payloads interval)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF keep_payloads IS NULL THEN
        RETURN;
    END IF;
    IF keep_payloads <= interval '0' OR keep_payloads > coalesce(webhook_ingest._retention(), interval '1000 days')
       OR keep_payloads > interval '1000 days' THEN
        RAISE EXCEPTION 'keep_payloads must be more than 0 and at most webhook_ingest.retention (%)',
                        coalesce(webhook_ingest._retention()::text, 'forever')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'NULL (reset_keep_payloads => true in alter_source) drops payloads when jobs are done.';
    END IF;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._check_keep_payloads(keep_payloads interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._check_keep_payloads(keep_payloads interval) TO webhook_ingest_admin;

CREATE FUNCTION webhook_ingest._check_tls_ca(tls_ca text) RETURNS void
AS 'MODULE_PATHNAME', 'webhook_ingest_check_tls_ca'
LANGUAGE C IMMUTABLE STRICT;
REVOKE ALL ON FUNCTION webhook_ingest._check_tls_ca(tls_ca text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._check_tls_ca(tls_ca text) TO webhook_ingest_admin;

-- (need_key false: the certificate alone, as sources_guard sees it)
CREATE FUNCTION webhook_ingest._check_tls_client(tls_client_cert text, tls_client_key text,
                                                 need_key boolean DEFAULT true) RETURNS void
AS 'MODULE_PATHNAME', 'webhook_ingest_check_tls_client'
LANGUAGE C IMMUTABLE;
REVOKE ALL ON FUNCTION webhook_ingest._check_tls_client(tls_client_cert text, tls_client_key text, need_key boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._check_tls_client(tls_client_cert text, tls_client_key text, need_key boolean) TO webhook_ingest_admin;

CREATE FUNCTION webhook_ingest._check_proxy(proxy text) RETURNS void
AS 'MODULE_PATHNAME', 'webhook_ingest_check_proxy'
LANGUAGE C IMMUTABLE STRICT;
REVOKE ALL ON FUNCTION webhook_ingest._check_proxy(proxy text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._check_proxy(proxy text) TO webhook_ingest_admin;

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
REVOKE ALL ON FUNCTION webhook_ingest._set_tls_client(source text, tls_client_cert text, tls_client_key text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._set_tls_client(source text, tls_client_cert text, tls_client_key text) TO webhook_ingest_admin;

/*
 * Only a superuser may give a source its own proxy (or '' for none), because
 * it goes around webhook_ingest.proxy.  A webhook_ingest_admin could
 * otherwise change the url_template of a source a superuser gave one, and
 * so send fetches to any host through it (with proxy '': directly, past the
 * egress proxy the superuser meant as the SSRF barrier): _guard_source
 * refuses that (42501) unless the same change clears the proxy
 * (test/audit/FINDINGS-0.7.0-second.md, TAP 117).
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
REVOKE ALL ON FUNCTION webhook_ingest._guard_source() FROM PUBLIC;

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
    proxy text DEFAULT NULL,
    reconcile jsonb DEFAULT NULL)
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
    IF add_source.reconcile IS NOT NULL THEN
        PERFORM webhook_ingest._set_reconcile(add_source.name, add_source.reconcile);
    END IF;
END
$fn$;
COMMENT ON FUNCTION webhook_ingest.add_source(name text, url_template text, handler regprocedure, headers jsonb, timeout_ms integer, max_attempts integer, enqueue_roles regrole[], signature_scheme text, signing_secrets text[], signature_tolerance interval, external_id_path jsonpath, event_id_path jsonpath, weight integer, rate_limit real, rate_burst integer, max_in_flight integer, keep_payloads interval, tls_ca text, tls_client_cert text, tls_client_key text, proxy text, reconcile jsonb) IS 'register an upstream API; for receive(): signature_scheme, signing_secrets and external_id_path; for the scheduler: weight, rate_limit, rate_burst, max_in_flight; keep_payloads: how long done jobs keep theirs; tls_ca, tls_client_cert and tls_client_key (PEM), proxy: how the upstream is reached; reconcile: how its list endpoint is swept for changes no webhook announced (_reconcile_keys)';
REVOKE ALL ON FUNCTION webhook_ingest.add_source(name text, url_template text, handler regprocedure, headers jsonb, timeout_ms integer, max_attempts integer, enqueue_roles regrole[], signature_scheme text, signing_secrets text[], signature_tolerance interval, external_id_path jsonpath, event_id_path jsonpath, weight integer, rate_limit real, rate_burst integer, max_in_flight integer, keep_payloads interval, tls_ca text, tls_client_cert text, tls_client_key text, proxy text, reconcile jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest.add_source(name text, url_template text, handler regprocedure, headers jsonb, timeout_ms integer, max_attempts integer, enqueue_roles regrole[], signature_scheme text, signing_secrets text[], signature_tolerance interval, external_id_path jsonpath, event_id_path jsonpath, weight integer, rate_limit real, rate_burst integer, max_in_flight integer, keep_payloads interval, tls_ca text, tls_client_cert text, tls_client_key text, proxy text, reconcile jsonb) TO webhook_ingest_admin;

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
    reset_proxy boolean DEFAULT false,
    reconcile jsonb DEFAULT NULL,
    drop_reconcile boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    cur webhook_ingest.sources;
    conflict text;
BEGIN
    SELECT * INTO cur FROM webhook_ingest.sources s WHERE s.name = alter_source.name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'source "%" does not exist', webhook_ingest._clip(name) USING ERRCODE = 'undefined_object';
    END IF;
    -- a setting both given and reset (or dropped) in one call: the first, in this order
    SELECT c.message INTO conflict
      FROM (VALUES (1, drop_handler AND alter_source.handler IS NOT NULL, 'cannot both set and drop the handler'),
                   (2, reset_enqueue_roles AND alter_source.enqueue_roles IS NOT NULL,
                    'cannot both set and reset enqueue_roles'),
                   (3, drop_signature AND (alter_source.signature_scheme IS NOT NULL
                                           OR alter_source.signing_secrets IS NOT NULL),
                    'cannot both set and drop the signature settings'),
                   (4, reset_event_id_path AND alter_source.event_id_path IS NOT NULL,
                    'cannot both set and reset event_id_path'),
                   (5, reset_limits AND (alter_source.rate_limit IS NOT NULL OR alter_source.rate_burst IS NOT NULL
                                         OR alter_source.max_in_flight IS NOT NULL),
                    'cannot both set and reset the limits'),
                   (6, reset_keep_payloads AND alter_source.keep_payloads IS NOT NULL,
                    'cannot both set and reset keep_payloads'),
                   (7, reset_tls_ca AND alter_source.tls_ca IS NOT NULL, 'cannot both set and reset tls_ca'),
                   (8, reset_tls_client AND (alter_source.tls_client_cert IS NOT NULL
                                             OR alter_source.tls_client_key IS NOT NULL),
                    'cannot both set and reset the client certificate'),
                   (9, reset_proxy AND alter_source.proxy IS NOT NULL, 'cannot both set and reset proxy'),
                   (10, drop_reconcile AND alter_source.reconcile IS NOT NULL, 'cannot both set and drop reconcile'))
           AS c(n, given_twice, message)
     WHERE c.given_twice ORDER BY c.n LIMIT 1;
    IF conflict IS NOT NULL THEN
        RAISE EXCEPTION '%', conflict USING ERRCODE = 'invalid_parameter_value';
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
    IF drop_reconcile OR alter_source.reconcile IS NOT NULL THEN
        PERFORM webhook_ingest._set_reconcile(cur.name, alter_source.reconcile, drop_reconcile);
    END IF;
    -- Limits loosened or a throttle ended: the worker looks again now.
    PERFORM webhook_ingest._wake_worker_at_commit();
END
$fn$;
COMMENT ON FUNCTION webhook_ingest.alter_source(name text, url_template text, handler regprocedure, headers jsonb, timeout_ms integer, max_attempts integer, drop_handler boolean, enqueue_roles regrole[], reset_enqueue_roles boolean, signature_scheme text, signing_secrets text[], signature_tolerance interval, external_id_path jsonpath, event_id_path jsonpath, drop_signature boolean, reset_event_id_path boolean, weight integer, rate_limit real, rate_burst integer, max_in_flight integer, reset_limits boolean, keep_payloads interval, reset_keep_payloads boolean, tls_ca text, reset_tls_ca boolean, tls_client_cert text, tls_client_key text, reset_tls_client boolean, proxy text, reset_proxy boolean, reconcile jsonb, drop_reconcile boolean) IS 'change an upstream API; NULL arguments keep the current value (drop_signature: receive() refuses until set again; reset_limits: no rate_limit, rate_burst, max_in_flight; reset_keep_payloads: payloads dropped when done; reset_tls_ca: the system''s bundle; reset_tls_client: no client certificate; reset_proxy: webhook_ingest.proxy; reconcile: the settings given change, a key given null goes back to its default; drop_reconcile: no sweeps); ends a throttle of the source';
REVOKE ALL ON FUNCTION webhook_ingest.alter_source(name text, url_template text, handler regprocedure, headers jsonb, timeout_ms integer, max_attempts integer, drop_handler boolean, enqueue_roles regrole[], reset_enqueue_roles boolean, signature_scheme text, signing_secrets text[], signature_tolerance interval, external_id_path jsonpath, event_id_path jsonpath, drop_signature boolean, reset_event_id_path boolean, weight integer, rate_limit real, rate_burst integer, max_in_flight integer, reset_limits boolean, keep_payloads interval, reset_keep_payloads boolean, tls_ca text, reset_tls_ca boolean, tls_client_cert text, tls_client_key text, reset_tls_client boolean, proxy text, reset_proxy boolean, reconcile jsonb, drop_reconcile boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest.alter_source(name text, url_template text, handler regprocedure, headers jsonb, timeout_ms integer, max_attempts integer, drop_handler boolean, enqueue_roles regrole[], reset_enqueue_roles boolean, signature_scheme text, signing_secrets text[], signature_tolerance interval, external_id_path jsonpath, event_id_path jsonpath, drop_signature boolean, reset_event_id_path boolean, weight integer, rate_limit real, rate_burst integer, max_in_flight integer, reset_limits boolean, keep_payloads interval, reset_keep_payloads boolean, tls_ca text, reset_tls_ca boolean, tls_client_cert text, tls_client_key text, reset_tls_client boolean, proxy text, reset_proxy boolean, reconcile jsonb, drop_reconcile boolean) TO webhook_ingest_admin;

CREATE FUNCTION webhook_ingest.drop_source(name text, force boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    active bigint;
BEGIN
    /*
     * Wait for enqueue() calls in flight (they hold ROW EXCLUSIVE on queue and
     * look the source up only after taking it), so none can add a job for
     * this source once it is gone.  Its history and event ids stay until
     * retention and dedup_window: they carry its number, which no later
     * source gets, and the jobs view shows no history without a source.
     */
    LOCK TABLE webhook_ingest.queue, webhook_ingest.event_ledger IN SHARE MODE;
    PERFORM FROM webhook_ingest.sources s WHERE s.name = drop_source.name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'source "%" does not exist', webhook_ingest._clip(name) USING ERRCODE = 'undefined_object';
    END IF;
    SELECT count(*) INTO active FROM webhook_ingest.queue j
     WHERE j.source = drop_source.name AND j.state IN ('pending', 'running');
    IF active > 0 AND NOT force THEN
        RAISE EXCEPTION 'source "%" has % pending or running jobs', name, active
            USING ERRCODE = 'object_in_use',
                  HINT = 'Wait for them to finish, or pass force => true to discard them.';
    END IF;
    DELETE FROM webhook_ingest.queue j WHERE j.source = drop_source.name;
    DELETE FROM webhook_ingest.documents d WHERE d.source = drop_source.name;
    DELETE FROM webhook_ingest.sources s WHERE s.name = drop_source.name;
END
$fn$;
COMMENT ON FUNCTION webhook_ingest.drop_source(name text, force boolean) IS 'remove an upstream API with its jobs and remembered event ids';
REVOKE ALL ON FUNCTION webhook_ingest.drop_source(name text, force boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest.drop_source(name text, force boolean) TO webhook_ingest_admin;

CREATE TRIGGER sources_changed AFTER INSERT OR DELETE OR UPDATE OR TRUNCATE ON webhook_ingest.sources FOR EACH STATEMENT EXECUTE FUNCTION webhook_ingest._sources_changed();

CREATE TRIGGER sources_guard BEFORE INSERT OR UPDATE ON webhook_ingest.sources FOR EACH ROW EXECUTE FUNCTION webhook_ingest._guard_source();

CREATE TRIGGER source_tls_keys_changed AFTER INSERT OR DELETE OR UPDATE OR TRUNCATE ON webhook_ingest.source_tls_keys FOR EACH STATEMENT EXECUTE FUNCTION webhook_ingest._sources_changed();

GRANT SELECT ON SEQUENCE webhook_ingest.sources_id_seq TO webhook_ingest_admin;

/* ==========================================================================
 * The queue and the states of a job
 *
 * queue holds the jobs not finished (pending, running) and those kept
 * there (dead, cancelled): one active job per object (queue_active_object),
 * which new webhooks coalesce into.  A dead job keeps its payload within
 * dead_payload_limit per source (dead_payloads counts the bytes).  documents
 * holds the latest fetched document per object of sources without a handler.
 */

CREATE TABLE webhook_ingest.documents (
    source text NOT NULL COLLATE pg_catalog."C",
    external_id text NOT NULL COLLATE pg_catalog."C",
    details jsonb,
    fetched_at timestamp with time zone NOT NULL,
    CONSTRAINT documents_pkey PRIMARY KEY (source, external_id)
);
COMMENT ON TABLE webhook_ingest.documents IS 'the latest fetched document per object, for sources without a handler (details NULL: gone)';
GRANT SELECT ON TABLE webhook_ingest.documents TO webhook_ingest_admin;

CREATE TABLE webhook_ingest.queue (
    id bigint NOT NULL,
    source text NOT NULL COLLATE pg_catalog."C",
    external_id text NOT NULL COLLATE pg_catalog."C",
    state webhook_ingest.job_state DEFAULT 'pending'::webhook_ingest.job_state NOT NULL,
    payload jsonb,
    events integer DEFAULT 1 NOT NULL,
    refetch boolean DEFAULT false NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    last_error text,
    last_status integer,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_until timestamp with time zone,
    worker_pid integer,
    finished_at timestamp with time zone,
    started_at timestamp with time zone,
    CONSTRAINT queue_not_done CHECK ((state <> 'done'::webhook_ingest.job_state)),
    CONSTRAINT queue_pkey PRIMARY KEY (id)
)
WITH (fillfactor='80', autovacuum_vacuum_scale_factor='0.02', autovacuum_vacuum_insert_scale_factor='0.02', autovacuum_analyze_scale_factor='0.05', autovacuum_vacuum_cost_delay='0');
ALTER TABLE webhook_ingest.queue ENABLE ROW LEVEL SECURITY;
CREATE POLICY queue_admin ON webhook_ingest.queue TO webhook_ingest_admin USING (true) WITH CHECK (true);
COMMENT ON TABLE webhook_ingest.queue IS 'jobs that may still need their payload: pending, running, dead and cancelled (done ones are in job_history)';
GRANT SELECT ON TABLE webhook_ingest.queue TO webhook_ingest_admin;

CREATE TABLE webhook_ingest.dead_payloads (
    source text NOT NULL COLLATE pg_catalog."C",
    bytes bigint DEFAULT 0 NOT NULL,
    dropped bigint DEFAULT 0 NOT NULL,
    counted_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT dead_payloads_pkey PRIMARY KEY (source)
);
COMMENT ON TABLE webhook_ingest.dead_payloads IS 'per source: the payload bytes (uncompressed, as max_payload_size counts them) its dead jobs keep (recounted at counted_at), and how many payloads webhook_ingest.dead_payload_limit dropped';
GRANT SELECT ON TABLE webhook_ingest.dead_payloads TO webhook_ingest_admin;

ALTER TABLE webhook_ingest.queue ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME webhook_ingest.jobs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 100
);

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

/*
 * retry: a pending job is due now; a dead or cancelled one is pending again
 * with its payload; a done one comes back from the history into the queue
 * under the same id, with its kept payload or, if its source keeps none,
 * a NULL payload (the handler gets the freshly fetched details as always).
 */
CREATE FUNCTION webhook_ingest.retry(job_id bigint)
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
    SELECT q.*, NULL::pg_lsn INTO j FROM webhook_ingest.queue q WHERE q.id = retry.job_id FOR UPDATE;
    IF NOT FOUND THEN
        SELECT * INTO j FROM webhook_ingest.jobs v WHERE v.id = retry.job_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'job % does not exist', job_id
                USING ERRCODE = 'no_data_found',
                      HINT = 'Finished jobs are removed after webhook_ingest.retention.';
        END IF;
    END IF;
    IF j.state = 'running' THEN
        RAISE NOTICE 'job % is running: not retried', job_id;
        RETURN false;
    END IF;
    IF j.state = 'pending' THEN
        UPDATE webhook_ingest.queue
           SET next_attempt_at = CASE WHEN next_attempt_at = 'infinity' THEN next_attempt_at ELSE now() END,
               updated_at = now()
         WHERE id = job_id AND state = 'pending';
    ELSE
        BEGIN
            IF j.state = 'done' OR NOT EXISTS (SELECT FROM webhook_ingest.queue q WHERE q.id = job_id) THEN
                -- Out of the history (or jobs_legacy) into the queue, as it was.
                IF NOT webhook_ingest._unfile_job(job_id) THEN
                    RAISE EXCEPTION 'job % does not exist', job_id USING ERRCODE = 'no_data_found';
                END IF;
                j.state := 'cancelled';
                j.done_lsn := NULL;
                PERFORM webhook_ingest._file_job(j);
            END IF;
            UPDATE webhook_ingest.queue
               SET state = 'pending', attempts = 0, refetch = false, next_attempt_at = now(),
                   finished_at = NULL, last_error = NULL, last_status = NULL, updated_at = now()
             WHERE id = job_id AND state IN ('dead', 'cancelled');
        EXCEPTION WHEN unique_violation THEN
            RAISE NOTICE 'job % not retried: job % is already active for %/%', job_id,
                (SELECT a.id FROM webhook_ingest.queue a
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
COMMENT ON FUNCTION webhook_ingest.retry(job_id bigint) IS 'run a done, dead or cancelled job again, or a pending one now; false if it is running or its object already has an active job';
REVOKE ALL ON FUNCTION webhook_ingest.retry(job_id bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest.retry(job_id bigint) TO webhook_ingest_admin;

CREATE FUNCTION webhook_ingest.retry_dead(source text, since timestamptz DEFAULT '-infinity')
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
          FROM webhook_ingest.queue d
         WHERE d.source = retry_dead.source AND d.state = 'dead'
           AND d.finished_at >= coalesce(retry_dead.since, '-infinity')
         ORDER BY d.external_id, d.finished_at DESC, d.id DESC
    LOOP
        BEGIN
            UPDATE webhook_ingest.queue
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
COMMENT ON FUNCTION webhook_ingest.retry_dead(source text, since timestamp with time zone) IS 'replay the dead jobs of a source that died at or after since (latest per object); returns how many';
REVOKE ALL ON FUNCTION webhook_ingest.retry_dead(source text, since timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest.retry_dead(source text, since timestamp with time zone) TO webhook_ingest_admin;

CREATE FUNCTION webhook_ingest.cancel(job_id bigint)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF job_id IS NULL THEN
        RAISE EXCEPTION 'job_id must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    UPDATE webhook_ingest.queue
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
COMMENT ON FUNCTION webhook_ingest.cancel(job_id bigint) IS 'call off a pending or running job; false if it had already finished';
REVOKE ALL ON FUNCTION webhook_ingest.cancel(job_id bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest.cancel(job_id bigint) TO webhook_ingest_admin;

-- webhook_ingest.dead_payload_limit in bytes; NULL: no limit (-1).
CREATE FUNCTION webhook_ingest._dead_payload_limit()
RETURNS bigint
LANGUAGE sql STABLE
RETURN nullif(pg_catalog.pg_size_bytes(pg_catalog.current_setting('webhook_ingest.dead_payload_limit')), -1);
REVOKE ALL ON FUNCTION webhook_ingest._dead_payload_limit() FROM PUBLIC;

-- The payload bytes a source's dead jobs keep, counted afresh (but for the job dying now).
CREATE FUNCTION webhook_ingest._recount_dead_payloads(source text, dying bigint)
RETURNS bigint
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
INSERT INTO webhook_ingest.dead_payloads AS p (source, bytes, counted_at)
SELECT _recount_dead_payloads.source, coalesce(sum(webhook_ingest._payload_size(q.payload)), 0), now()
  FROM webhook_ingest.queue q
 WHERE q.source = _recount_dead_payloads.source AND q.state = 'dead' AND q.id <> dying
ON CONFLICT (source) DO UPDATE SET bytes = EXCLUDED.bytes, counted_at = EXCLUDED.counted_at
RETURNING p.bytes
$$;
REVOKE ALL ON FUNCTION webhook_ingest._recount_dead_payloads(source text, dying bigint) FROM PUBLIC;

/*
 * A job dies (the object's older dead jobs go into it, its payload goes if
 * its source keeps the limit, the count grows by what it keeps), or a dead
 * one comes back (the count shrinks).
 */
CREATE FUNCTION webhook_ingest._dead_jobs_count()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    older record;
    kept webhook_ingest.dead_payloads;
    cap bigint := webhook_ingest._dead_payload_limit();
    size bigint;
    dropped boolean := false;
BEGIN
    IF OLD.state = 'dead' THEN
        UPDATE webhook_ingest.dead_payloads p SET bytes = p.bytes - webhook_ingest._payload_size(OLD.payload)
         WHERE p.source = OLD.source AND OLD.payload IS NOT NULL;
        RETURN NEW;
    END IF;
    -- (rows some session holds, a retry under way, are left to it)
    WITH gone AS (
        DELETE FROM webhook_ingest.queue q
         WHERE q.id = ANY (ARRAY(SELECT d.id FROM webhook_ingest.queue d
                                  WHERE d.source = NEW.source AND d.external_id = NEW.external_id
                                    AND d.state = 'dead' AND d.id <> NEW.id
                                  FOR UPDATE SKIP LOCKED))
           AND q.state = 'dead'
        RETURNING q.id, q.events, q.payload, q.finished_at)
    SELECT coalesce(sum(g.events), 0) AS events, coalesce(sum(webhook_ingest._payload_size(g.payload)), 0) AS bytes,
           array_agg(g.id) AS ids,
           (SELECT p.payload FROM gone p WHERE p.payload IS NOT NULL
             ORDER BY p.finished_at DESC, p.id DESC LIMIT 1) AS payload
      INTO older FROM gone g;
    NEW.events := NEW.events + older.events;
    -- (their event ids go with their webhooks: history() lists them under the job they went into)
    IF older.ids IS NOT NULL THEN
        UPDATE webhook_ingest.event_ledger l SET job_id = NEW.id WHERE l.job_id = ANY (older.ids);
    END IF;
    NEW.payload := coalesce(NEW.payload, older.payload);
    SELECT * INTO kept FROM webhook_ingest.dead_payloads p WHERE p.source = NEW.source FOR UPDATE;
    kept.bytes := coalesce(kept.bytes, 0) - older.bytes;
    size := coalesce(webhook_ingest._payload_size(NEW.payload), 0);
    IF kept.counted_at IS NULL OR kept.counted_at < now() - interval '10 minutes'
       OR (kept.bytes + size > cap AND kept.counted_at < now() - interval '1 minute') THEN
        kept.bytes := webhook_ingest._recount_dead_payloads(NEW.source, NEW.id);
    END IF;
    IF kept.bytes + size > cap THEN
        NEW.payload := NULL;
        NEW.last_error := NEW.last_error || ' (payload dropped: the source''s dead jobs keep webhook_ingest.dead_payload_limit)';
        size := 0;
        dropped := true;
    END IF;
    INSERT INTO webhook_ingest.dead_payloads AS p (source, bytes, dropped)
    VALUES (NEW.source, kept.bytes + size, dropped::integer)
    ON CONFLICT (source) DO UPDATE SET bytes = EXCLUDED.bytes, dropped = p.dropped + EXCLUDED.dropped;
    RETURN NEW;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._dead_jobs_count() FROM PUBLIC;

CREATE UNIQUE INDEX queue_active_object ON webhook_ingest.queue USING btree (source, external_id) INCLUDE (state, next_attempt_at, created_at) WHERE (state = ANY (ARRAY['pending'::webhook_ingest.job_state, 'running'::webhook_ingest.job_state]));

CREATE INDEX queue_cancelled ON webhook_ingest.queue USING btree (finished_at) WHERE (state <> ALL ('{pending,running,dead}'::webhook_ingest.job_state[]));

CREATE INDEX queue_dead ON webhook_ingest.queue USING btree (source, external_id, finished_at) WHERE (state = 'dead'::webhook_ingest.job_state);

CREATE INDEX queue_due ON webhook_ingest.queue USING btree (source, next_attempt_at) WHERE (state = 'pending'::webhook_ingest.job_state);

CREATE INDEX queue_finished ON webhook_ingest.queue USING btree (finished_at) WHERE (finished_at IS NOT NULL);

CREATE INDEX queue_leases ON webhook_ingest.queue USING btree (lease_until) WHERE (state = 'running'::webhook_ingest.job_state);

CREATE INDEX queue_settled_object ON webhook_ingest.queue USING btree (source, external_id) WHERE (state <> ALL ('{pending,running}'::webhook_ingest.job_state[]));

CREATE TRIGGER queue_dead_jobs BEFORE UPDATE OF state ON webhook_ingest.queue FOR EACH ROW WHEN (((new.state = 'dead'::webhook_ingest.job_state) IS DISTINCT FROM (old.state = 'dead'::webhook_ingest.job_state))) EXECUTE FUNCTION webhook_ingest._dead_jobs_count();

CREATE TRIGGER queue_restored_running BEFORE INSERT ON webhook_ingest.queue FOR EACH ROW WHEN ((new.state = 'running'::webhook_ingest.job_state)) EXECUTE FUNCTION webhook_ingest._jobs_restored_running();

GRANT SELECT ON SEQUENCE webhook_ingest.jobs_id_seq TO webhook_ingest_admin;

/* ==========================================================================
 * The dedup ledger: event ids per source
 *
 * An event id is accepted once per source within dedup_window: the
 * exclusion constraint event_ledger_once hashes source_id:event_id with
 * ledger_ops (4-byte codes, the full id compared).  purge_events walks the
 * ledger's pages, forgetting old ids.  event_ledger_090 is 0.9.0's ledger
 * (unseeded hash), which an update to 0.10.0 keeps as it was, and whose
 * ids purge_events moves into event_ledger a few pages a call: enqueue
 * probes it only while it has pages.  A fresh install has it too, empty,
 * so that fresh and updated catalogs are one (TAP 041).
 */

CREATE TABLE webhook_ingest.event_ledger (
    source_id integer NOT NULL,
    received integer DEFAULT webhook_ingest._seconds(now()) NOT NULL,
    event_id text NOT NULL COLLATE pg_catalog."C",
    job_id bigint,
    duplicates integer,
    CONSTRAINT event_ledger_once EXCLUDE USING hash (((((source_id)::text || ':'::text) || event_id)) webhook_ingest.ledger_ops WITH =) WITH (fillfactor='100')
)
WITH (autovacuum_vacuum_scale_factor='0.05', autovacuum_vacuum_cost_delay='0');
COMMENT ON TABLE webhook_ingest.event_ledger IS 'event ids accepted per source (sources.id), remembered for webhook_ingest.dedup_window; received: seconds since 2000-01-01 UTC';
COMMENT ON COLUMN webhook_ingest.event_ledger.job_id IS 'the job the webhook went to (NULL: accepted before 0.10.0, or not through enqueue/receive)';
COMMENT ON COLUMN webhook_ingest.event_ledger.duplicates IS 'how many more times the event id came and was refused as a duplicate, up to 1000 (NULL: none)';
GRANT SELECT ON TABLE webhook_ingest.event_ledger TO webhook_ingest_admin;

CREATE TABLE webhook_ingest.ledger_key (
    only_row boolean DEFAULT true NOT NULL,
    key bytea NOT NULL,
    CONSTRAINT ledger_key_key_check CHECK ((octet_length(key) = 16)),
    CONSTRAINT ledger_key_only_row_check CHECK (only_row),
    CONSTRAINT ledger_key_pkey PRIMARY KEY (only_row)
);
COMMENT ON TABLE webhook_ingest.ledger_key IS 'the key of the dedup ledger''s hash (webhook_ingest.ledger_ops): random, made at CREATE EXTENSION, never changed';
REVOKE ALL ON webhook_ingest.ledger_key FROM PUBLIC;

CREATE TABLE webhook_ingest.purge_position (
    only_row boolean DEFAULT true NOT NULL,
    next_page bigint DEFAULT 0 NOT NULL,
    ledger_090_page bigint DEFAULT 0 NOT NULL,
    CONSTRAINT purge_position_only_row_check CHECK (only_row),
    CONSTRAINT purge_position_pkey PRIMARY KEY (only_row)
);
GRANT SELECT ON TABLE webhook_ingest.purge_position TO webhook_ingest_admin;

CREATE TABLE webhook_ingest.event_ledger_090 (
    source_id integer NOT NULL,
    received integer DEFAULT webhook_ingest._seconds(now()) NOT NULL,
    event_id text NOT NULL COLLATE pg_catalog."C",
    CONSTRAINT event_ledger_090_once EXCLUDE USING hash (((((source_id)::text || ':'::text) || event_id)) WITH =) WITH (fillfactor='100')
)
WITH (autovacuum_vacuum_scale_factor='0.05', autovacuum_vacuum_cost_delay='0');
COMMENT ON TABLE webhook_ingest.event_ledger_090 IS '0.9.0''s event ids, under an unseeded hash: moved into event_ledger by purge_events(), then truncated';
GRANT SELECT ON TABLE webhook_ingest.event_ledger_090 TO webhook_ingest_admin;

/*
 * import_events(sources, event_ids, received): the given event ids into the
 * dedup ledger, as an INSERT into the events view does, skipping those
 * already there; returns how many it added.  The router's move_partition
 * (adding a shard) copies the ledger of the objects that move with it
 * through PL/Proxy, whose remote statements can only be SELECTs.  Superusers
 * only: the ledger is the dedup guarantee, and a wrong entry makes a real
 * webhook a duplicate.
 */
CREATE FUNCTION webhook_ingest.import_events(sources text[], event_ids text[], received timestamptz[])
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    added bigint;
BEGIN
    WITH ins AS (
        INSERT INTO webhook_ingest.events (source, event_id, received_at)
        SELECT u.s, u.e, u.r FROM unnest(sources, event_ids, received) AS u (s, e, r)
         WHERE NOT EXISTS (SELECT FROM webhook_ingest.events x WHERE x.source = u.s AND x.event_id = u.e)
        RETURNING 1)
    SELECT count(*) INTO added FROM ins;
    RETURN added;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest.import_events(sources text[], event_ids text[], received timestamp with time zone[]) FROM PUBLIC;

/*
 * A row of the view that is still in 0.9.0's ledger: an UPDATE or DELETE
 * through the view reaches it there too (after events_write has looked in
 * event_ledger: an id is in one place only).
 */
CREATE FUNCTION webhook_ingest._events_write_090()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        UPDATE webhook_ingest.event_ledger_090 e
           SET source_id = n.id, event_id = NEW.event_id, received = webhook_ingest._seconds(NEW.received_at)
          FROM webhook_ingest.sources s, webhook_ingest.sources n
         WHERE s.id = e.source_id AND s.name = OLD.source AND e.event_id = OLD.event_id AND n.name = NEW.source;
    ELSIF TG_OP = 'DELETE' THEN
        DELETE FROM webhook_ingest.event_ledger_090 e
         USING webhook_ingest.sources s
         WHERE s.id = e.source_id AND s.name = OLD.source AND e.event_id = OLD.event_id;
        RETURN OLD;
    END IF;
    RETURN NEW;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._events_write_090() FROM PUBLIC;

/*
 * One step of the move of 0.9.0's ledger: the ids of up to pages pages of
 * event_ledger_090 from where the last step stopped (purge_position), into
 * event_ledger (those older than window_start forgotten); once past its last
 * page, it is truncated (its disk back at once; under a short lock_timeout,
 * else the next step tries again).  The caller holds the purge_position row
 * (_purge_ledger takes it).
 * Returns the ids looked at (0: nothing left).
 */
CREATE FUNCTION webhook_ingest._move_ledger_090(pages integer, window_start timestamptz)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    first_page bigint;
    last_page bigint := pg_relation_size('webhook_ingest.event_ledger_090') / current_setting('block_size')::bigint;
    saved_lock_timeout text := current_setting('lock_timeout');
    moved bigint;
BEGIN
    IF last_page = 0 THEN
        RETURN 0;
    END IF;
    SELECT p.ledger_090_page INTO first_page FROM webhook_ingest.purge_position p;
    IF first_page >= last_page THEN
        BEGIN
            PERFORM set_config('lock_timeout', '50ms', true);
            TRUNCATE webhook_ingest.event_ledger_090;
            UPDATE webhook_ingest.purge_position SET ledger_090_page = 0;
            PERFORM set_config('lock_timeout', saved_lock_timeout, true);
        EXCEPTION WHEN lock_not_available THEN
            NULL;           -- enqueue() calls hold it: next step
        END;
        RETURN 0;
    END IF;
    WITH gone AS (
        DELETE FROM webhook_ingest.event_ledger_090 o
         WHERE o.ctid >= format('(%s,0)', first_page)::tid
           AND o.ctid < format('(%s,0)', first_page + pages)::tid
        RETURNING o.source_id, o.received, o.event_id),
    kept AS (
        INSERT INTO webhook_ingest.event_ledger (source_id, received, event_id)
        SELECT g.source_id, g.received, g.event_id FROM gone g
         WHERE g.received >= webhook_ingest._seconds(window_start)
        ON CONFLICT DO NOTHING
        RETURNING 1)
    SELECT count(*) INTO moved FROM gone;
    UPDATE webhook_ingest.purge_position SET ledger_090_page = first_page + pages;
    RETURN greatest(moved, 1);
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._move_ledger_090(pages integer, window_start timestamp with time zone) FROM PUBLIC;

CREATE FUNCTION webhook_ingest.purge_events(max_pages integer DEFAULT 1000)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    forgotten bigint;
BEGIN
    -- (it checks max_pages, and takes the purge_position row the move needs)
    forgotten := webhook_ingest._purge_ledger(max_pages);
    RETURN forgotten + webhook_ingest._move_ledger_090(least(max_pages, 25),
                                                       now() - current_setting('webhook_ingest.dedup_window')::interval);
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest.purge_events(max_pages integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest.purge_events(max_pages integer) TO webhook_ingest_admin;


CREATE FUNCTION webhook_ingest._events_write()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    new_id integer;
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        SELECT s.id INTO new_id FROM webhook_ingest.sources s WHERE s.name = NEW.source;
        IF new_id IS NULL THEN
            RAISE EXCEPTION 'source "%" does not exist', webhook_ingest._clip(NEW.source)
                USING ERRCODE = 'undefined_object',
                      HINT = 'Restore webhook_ingest.sources before the event ids of a dump older than 0.6.0.';
        END IF;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO webhook_ingest.event_ledger (source_id, received, event_id)
        VALUES (new_id, webhook_ingest._seconds(coalesce(NEW.received_at, now())), NEW.event_id);
        RETURN NEW;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        UPDATE webhook_ingest.event_ledger e
           SET source_id = new_id, event_id = NEW.event_id, received = webhook_ingest._seconds(NEW.received_at)
          FROM webhook_ingest.sources s
         WHERE s.id = e.source_id AND s.name = OLD.source AND e.event_id = OLD.event_id;
        RETURN NEW;
    END IF;
    DELETE FROM webhook_ingest.event_ledger e
     USING webhook_ingest.sources s
     WHERE s.id = e.source_id AND s.name = OLD.source AND e.event_id = OLD.event_id;
    RETURN OLD;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._events_write() FROM PUBLIC;

/*
 * _purge_ledger: the walk over the ledger's pages, on received (seconds),
 * forgetting the ids older than dedup_window (purge_events calls it).
 */
CREATE FUNCTION webhook_ingest._purge_ledger(max_pages integer DEFAULT 1000)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    pages bigint;
    first_page bigint;
    last_page bigint;
    forgotten bigint;
    window_start timestamptz := now() - current_setting('webhook_ingest.dedup_window')::interval;
BEGIN
    IF max_pages IS NULL OR max_pages < 1 THEN
        RAISE EXCEPTION 'max_pages must be at least 1' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- One purge at a time; enqueue() never touches this row.
    SELECT p.next_page INTO first_page FROM webhook_ingest.purge_position p FOR UPDATE;
    pages := pg_relation_size('webhook_ingest.event_ledger') / current_setting('block_size')::bigint;
    IF first_page >= pages THEN
        first_page := 0;
    END IF;
    last_page := first_page + max_pages;
    DELETE FROM webhook_ingest.event_ledger e
     WHERE e.ctid >= format('(%s,0)', first_page)::tid
       AND e.ctid < format('(%s,0)', last_page)::tid
       AND e.received < webhook_ingest._seconds(window_start);
    GET DIAGNOSTICS forgotten = ROW_COUNT;
    UPDATE webhook_ingest.purge_position
       SET next_page = CASE WHEN last_page >= pages THEN 0 ELSE last_page END;
    RETURN forgotten;
END
$fn$;
COMMENT ON FUNCTION webhook_ingest._purge_ledger(max_pages integer) IS 'forget event ids older than webhook_ingest.dedup_window, walking at most max_pages pages of the table';
REVOKE ALL ON FUNCTION webhook_ingest._purge_ledger(max_pages integer) FROM PUBLIC;

-- (history(): a job's event ids in a probe; the ids 0.9.0's ledger moves over name no job)
CREATE INDEX event_ledger_job ON webhook_ingest.event_ledger USING btree (job_id) WHERE (job_id IS NOT NULL);

-- the position of purge_events' walk over the ledger's pages (one row)
INSERT INTO webhook_ingest.purge_position DEFAULT VALUES;

-- 122 random bits (pg_strong_random); not dumped: a restore makes its own and builds the index with it
INSERT INTO webhook_ingest.ledger_key (key) VALUES (pg_catalog.uuid_send(pg_catalog.gen_random_uuid()));

/*
 * The accepted event ids as 0.5.0 showed them (source name, id, when),
 * from the ledger and 0.9.0's (while its ids are moved).  Writable for
 * admins' hand-made changes (a received_at moved, an id forgotten).
 */
CREATE VIEW webhook_ingest.events AS
SELECT s.name AS source, e.event_id, webhook_ingest._at(e.received) AS received_at
  FROM webhook_ingest.event_ledger e
  JOIN webhook_ingest.sources s ON s.id = e.source_id
UNION ALL
SELECT s.name, o.event_id, webhook_ingest._at(o.received)
  FROM webhook_ingest.event_ledger_090 o
  JOIN webhook_ingest.sources s ON s.id = o.source_id;
COMMENT ON VIEW webhook_ingest.events IS 'event ids accepted per source, remembered for webhook_ingest.dedup_window';
GRANT SELECT ON TABLE webhook_ingest.events TO webhook_ingest_admin;

CREATE TRIGGER events_write INSTEAD OF INSERT OR DELETE OR UPDATE ON webhook_ingest.events FOR EACH ROW EXECUTE FUNCTION webhook_ingest._events_write();

CREATE TRIGGER events_write_090 INSTEAD OF DELETE OR UPDATE ON webhook_ingest.events FOR EACH ROW EXECUTE FUNCTION webhook_ingest._events_write_090();

/* ==========================================================================
 * History: finished jobs, packed, and the jobs view
 *
 * A finished job leaves the queue for job_history (partitioned by
 * finished_at; job_history_overflow takes what no partition covers), its
 * payload for kept_payloads if its source keeps them.  Storage rounds pack
 * old partitions into job_history_packed (rows of many jobs, keyed by object
 * for history()).  The jobs view shows every job with 0.5.0's columns over
 * all of them; jobs_legacy and legacy_migration are 0.5.0's jobs table and
 * the position of its move (empty in a fresh install).
 */

CREATE TABLE webhook_ingest.jobs_legacy (
    id bigint NOT NULL,
    source text NOT NULL COLLATE pg_catalog."C",
    external_id text NOT NULL COLLATE pg_catalog."C",
    state webhook_ingest.job_state DEFAULT 'pending'::webhook_ingest.job_state NOT NULL,
    payload jsonb,
    events integer DEFAULT 1 NOT NULL,
    refetch boolean DEFAULT false NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    last_error text,
    last_status integer,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_until timestamp with time zone,
    worker_pid integer,
    finished_at timestamp with time zone,
    started_at timestamp with time zone,
    done_lsn pg_lsn,
    CONSTRAINT jobs_legacy_pkey PRIMARY KEY (id)
)
WITH (fillfactor='80', autovacuum_vacuum_scale_factor='0.02', autovacuum_vacuum_insert_scale_factor='0.02', autovacuum_analyze_scale_factor='0.05', autovacuum_vacuum_cost_delay='0');
CREATE POLICY jobs_admin ON webhook_ingest.jobs_legacy TO webhook_ingest_admin USING (true) WITH CHECK (true);
CREATE POLICY jobs_app ON webhook_ingest.jobs_legacy FOR SELECT TO webhook_ingest_enqueue USING (webhook_ingest._may_enqueue(source));
ALTER TABLE webhook_ingest.jobs_legacy ENABLE ROW LEVEL SECURITY;
COMMENT ON TABLE webhook_ingest.jobs_legacy IS '0.5.0''s jobs table: done and cancelled jobs not yet moved by the worker (empty once moved)';
COMMENT ON COLUMN webhook_ingest.jobs_legacy.events IS 'webhooks this job serves (1 + those coalesced into it)';
COMMENT ON COLUMN webhook_ingest.jobs_legacy.refetch IS 'a webhook arrived while the job was running: fetch once more after it';
COMMENT ON COLUMN webhook_ingest.jobs_legacy.started_at IS 'when the worker claimed it and started the latest fetch';
COMMENT ON COLUMN webhook_ingest.jobs_legacy.done_lsn IS 'commit LSN of the transaction that finished the job: wait_replayed(done_lsn) on a standby, then read';
GRANT SELECT ON TABLE webhook_ingest.jobs_legacy TO webhook_ingest_admin;
GRANT SELECT(id) ON TABLE webhook_ingest.jobs_legacy TO webhook_ingest_enqueue;
GRANT SELECT(state) ON TABLE webhook_ingest.jobs_legacy TO webhook_ingest_enqueue;
GRANT SELECT(done_lsn) ON TABLE webhook_ingest.jobs_legacy TO webhook_ingest_enqueue;

CREATE TABLE webhook_ingest.job_history (
    id bigint NOT NULL,
    finished_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone NOT NULL,
    started_at timestamp with time zone,
    source_id integer NOT NULL,
    events integer NOT NULL,
    attempts smallint NOT NULL,
    last_status smallint,
    external_id text NOT NULL COLLATE pg_catalog."C",
    last_error text
)
PARTITION BY RANGE (finished_at);
ALTER TABLE webhook_ingest.job_history ENABLE ROW LEVEL SECURITY;
CREATE POLICY job_history_admin ON webhook_ingest.job_history TO webhook_ingest_admin USING (true);
COMMENT ON TABLE webhook_ingest.job_history IS 'done jobs, without payload: partitioned by finished_at, a partition dropped whole after webhook_ingest.retention';
GRANT SELECT ON TABLE webhook_ingest.job_history TO webhook_ingest_admin;

CREATE TABLE webhook_ingest.job_history_overflow (
    id bigint NOT NULL,
    finished_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone NOT NULL,
    started_at timestamp with time zone,
    source_id integer NOT NULL,
    events integer NOT NULL,
    attempts smallint NOT NULL,
    last_status smallint,
    external_id text NOT NULL COLLATE pg_catalog."C",
    last_error text
);
ALTER TABLE webhook_ingest.job_history_overflow ENABLE ROW LEVEL SECURITY;
CREATE POLICY job_history_overflow_admin ON webhook_ingest.job_history_overflow TO webhook_ingest_admin USING (true);
COMMENT ON TABLE webhook_ingest.job_history_overflow IS 'done jobs whose finished_at no partition of job_history covered when they finished; deleted after retention';
GRANT SELECT ON TABLE webhook_ingest.job_history_overflow TO webhook_ingest_admin;

CREATE TABLE webhook_ingest.done_batches (
    finished_at timestamp with time zone NOT NULL,
    done_lsn pg_lsn NOT NULL,
    CONSTRAINT done_batches_pkey PRIMARY KEY (finished_at)
);
COMMENT ON TABLE webhook_ingest.done_batches IS 'the commit LSN of each completion batch, keyed by its jobs'' finished_at';
GRANT SELECT ON TABLE webhook_ingest.done_batches TO webhook_ingest_admin;

CREATE TABLE webhook_ingest.kept_payloads (
    job_id bigint NOT NULL,
    kept_until timestamp with time zone NOT NULL,
    payload jsonb NOT NULL
)
PARTITION BY RANGE (kept_until);
ALTER TABLE webhook_ingest.kept_payloads ENABLE ROW LEVEL SECURITY;
CREATE POLICY kept_payloads_admin ON webhook_ingest.kept_payloads TO webhook_ingest_admin USING (true);
COMMENT ON TABLE webhook_ingest.kept_payloads IS 'payloads of done jobs of sources with keep_payloads, partitioned by kept_until and dropped whole';
GRANT SELECT ON TABLE webhook_ingest.kept_payloads TO webhook_ingest_admin;

CREATE TABLE webhook_ingest.kept_payloads_overflow (
    job_id bigint NOT NULL,
    kept_until timestamp with time zone NOT NULL,
    payload jsonb NOT NULL
);
ALTER TABLE webhook_ingest.kept_payloads_overflow ENABLE ROW LEVEL SECURITY;
CREATE POLICY kept_payloads_overflow_admin ON webhook_ingest.kept_payloads_overflow TO webhook_ingest_admin USING (true);
COMMENT ON TABLE webhook_ingest.kept_payloads_overflow IS 'kept payloads whose kept_until no partition of kept_payloads covered; deleted when they expire';
GRANT SELECT ON TABLE webhook_ingest.kept_payloads_overflow TO webhook_ingest_admin;

CREATE TABLE webhook_ingest.legacy_migration (
    only_row boolean DEFAULT true NOT NULL,
    upgraded_at timestamp with time zone DEFAULT now() NOT NULL,
    moved_upto bigint NOT NULL,
    last_id bigint NOT NULL,
    jobs_truncated boolean DEFAULT false NOT NULL,
    events_truncated boolean DEFAULT false NOT NULL,
    CONSTRAINT legacy_migration_only_row_check CHECK (only_row),
    CONSTRAINT legacy_migration_pkey PRIMARY KEY (only_row)
);
COMMENT ON TABLE webhook_ingest.legacy_migration IS 'how far the worker has moved jobs_legacy (ids up to moved_upto are moved), and whether the old tables are emptied';
GRANT SELECT ON TABLE webhook_ingest.legacy_migration TO webhook_ingest_admin;

CREATE TABLE webhook_ingest.job_history_packed (
    finished_at timestamp with time zone NOT NULL,
    block bigint NOT NULL,
    ids bigint[] NOT NULL,
    finished timestamp with time zone[] NOT NULL,
    created timestamp with time zone[] NOT NULL,
    started timestamp with time zone[] NOT NULL,
    source_ids integer[] NOT NULL,
    events integer[] NOT NULL,
    attempts smallint[] NOT NULL,
    statuses smallint[] NOT NULL,
    external_ids text[] NOT NULL COLLATE pg_catalog."C",
    last_finished timestamp with time zone,
    object_bits smallint,
    object_checks smallint[],
    errors text[]
)
PARTITION BY RANGE (finished_at);
ALTER TABLE ONLY webhook_ingest.job_history_packed ALTER COLUMN object_checks SET STORAGE MAIN;
ALTER TABLE webhook_ingest.job_history_packed ENABLE ROW LEVEL SECURITY;
CREATE POLICY job_history_packed_admin ON webhook_ingest.job_history_packed TO webhook_ingest_admin USING (true);
COMMENT ON TABLE webhook_ingest.job_history_packed IS 'done jobs, a block of 128 ids (block = id >> 7) that finished in one partition''s time to a row, as arrays in id order; partitioned by the oldest finished_at of its row, a partition dropped whole after webhook_ingest.retention';
COMMENT ON COLUMN webhook_ingest.job_history_packed.last_finished IS 'the latest finished_at of the row''s jobs (NULL in rows packed before 0.10.0 until keyed)';
COMMENT ON COLUMN webhook_ingest.job_history_packed.object_bits IS 'the bits the row''s object keys are bucketed at (src/object_keys.c); NULL: not keyed yet';
COMMENT ON COLUMN webhook_ingest.job_history_packed.object_checks IS 'the low 16 bits of each job''s object key, in id order';
COMMENT ON COLUMN webhook_ingest.job_history_packed.errors IS 'each job''s last failed attempt''s error (NULL: none, or packed before 0.10.0)';
GRANT SELECT ON TABLE webhook_ingest.job_history_packed TO webhook_ingest_admin;

ALTER TABLE webhook_ingest.jobs_legacy ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME webhook_ingest.jobs_legacy_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 100
);

/*
 * Writes to the view (an admin's hand-made UPDATE, a 0.5.0 dump restored
 * into this version).  A row is changed where it was read: a job not done
 * is a queue row, updated in place (its triggers and row lock as for any
 * update) or, made done, moved to job_history; a done one is a history (or
 * not yet moved) row, refiled.  A row gone meanwhile (the worker finished
 * it) is left alone, as an UPDATE skips a row deleted under it.
 */
CREATE FUNCTION webhook_ingest._jobs_write()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    found_it boolean;
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM webhook_ingest._file_job(NEW);
        RETURN NEW;
    END IF;
    IF OLD.state <> 'done' THEN
        IF TG_OP = 'UPDATE' AND NEW.state <> 'done' THEN
            UPDATE webhook_ingest.queue q
               SET id = NEW.id, source = NEW.source, external_id = NEW.external_id, state = NEW.state,
                   payload = NEW.payload, events = NEW.events, refetch = NEW.refetch, attempts = NEW.attempts,
                   last_error = NEW.last_error, last_status = NEW.last_status, created_at = NEW.created_at,
                   updated_at = NEW.updated_at, next_attempt_at = NEW.next_attempt_at,
                   lease_until = NEW.lease_until, worker_pid = NEW.worker_pid, finished_at = NEW.finished_at,
                   started_at = NEW.started_at
             WHERE q.id = OLD.id;
            RETURN CASE WHEN FOUND THEN NEW END;
        END IF;
        DELETE FROM webhook_ingest.queue q WHERE q.id = OLD.id;
        found_it := FOUND;
    ELSE
        found_it := webhook_ingest._unfile_job(OLD.id);
    END IF;
    IF NOT found_it THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    PERFORM webhook_ingest._file_job(NEW);
    RETURN NEW;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._jobs_write() FROM PUBLIC;

/*
 * One step of the move of 0.5.0's rows: the next n rows of jobs_legacy by
 * id, done ones to job_history (those past retention are left behind),
 * cancelled ones to the queue; when all are moved, jobs_legacy is
 * truncated (its disk back at once).  One short transaction, the worker's.
 * A step that has to make partitions of job_history for those rows makes
 * them under an ACCESS EXCLUSIVE lock on job_history taken with NOWAIT (else
 * it moves nothing and returns 0: next round).  Returns the rows looked at
 * (0: nothing left, or nothing moved now).
 */
CREATE FUNCTION webhook_ingest._move_legacy_jobs(n integer)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    m webhook_ingest.legacy_migration;
    hi bigint;
    keep_from timestamptz := now() - coalesce(webhook_ingest._retention(), interval '1000 years');
    oldest timestamptz;
    covered tstzrange[];
BEGIN
    SELECT * INTO m FROM webhook_ingest.legacy_migration FOR UPDATE;
    IF m.moved_upto >= m.last_id THEN
        IF NOT m.jobs_truncated THEN
            BEGIN
                TRUNCATE webhook_ingest.jobs_legacy;
                UPDATE webhook_ingest.legacy_migration SET jobs_truncated = true;
            EXCEPTION WHEN lock_not_available THEN
                NULL;       -- a reader of the jobs view holds it: next round
            END;
        END IF;
        RETURN 0;
    END IF;
    SELECT max(b.id) INTO hi
      FROM (SELECT l.id FROM webhook_ingest.jobs_legacy l WHERE l.id > m.moved_upto ORDER BY l.id LIMIT n) b;
    hi := coalesce(hi, m.last_id);
    -- (into the partitions where they cover the job's time, else the overflow; those these rows need are
    -- made with job_history locked: no transaction then holds a lock on it, and so none keeps a plan made
    -- without them that this step's rows would be hidden from)
    covered := ARRAY(SELECT tstzrange(p.lower_bound, p.upper_bound)
                       FROM webhook_ingest._partitions('webhook_ingest.job_history') p);
    SELECT min(l.finished_at) INTO oldest FROM webhook_ingest.jobs_legacy l
     WHERE l.id > m.moved_upto AND l.id <= hi AND l.state = 'done' AND l.finished_at >= keep_from
       AND NOT l.finished_at <@ ANY (covered);
    IF oldest IS NOT NULL THEN
        BEGIN
            LOCK TABLE webhook_ingest.job_history IN ACCESS EXCLUSIVE MODE NOWAIT;
        EXCEPTION WHEN lock_not_available THEN
            RETURN 0;   -- a reader or writer of the history: next round (not behind: an app's open
                        -- transaction may hold its lock for long, and rounds back to back would not help)
        END;
        PERFORM webhook_ingest._ensure_partitions('webhook_ingest.job_history', oldest, now());
        covered := ARRAY(SELECT tstzrange(p.lower_bound, p.upper_bound)
                           FROM webhook_ingest._partitions('webhook_ingest.job_history') p);
    END IF;
    INSERT INTO webhook_ingest.done_batches (finished_at, done_lsn)
    SELECT l.finished_at, max(l.done_lsn) FROM webhook_ingest.jobs_legacy l
     WHERE l.id > m.moved_upto AND l.id <= hi AND l.state = 'done' AND l.done_lsn IS NOT NULL
       AND l.finished_at >= keep_from
     GROUP BY l.finished_at
    ON CONFLICT (finished_at) DO UPDATE SET done_lsn = greatest(done_batches.done_lsn, EXCLUDED.done_lsn);
    WITH moved AS (
        SELECT l.id, l.finished_at, l.created_at, l.started_at, s.id AS source_id, l.events,
               least(l.attempts, 32767) AS attempts, l.last_status, l.external_id,
               l.finished_at <@ ANY (covered) AS in_partitions
          FROM webhook_ingest.jobs_legacy l
          JOIN webhook_ingest.sources s ON s.name = l.source
         WHERE l.id > m.moved_upto AND l.id <= hi AND l.state = 'done' AND l.finished_at >= keep_from),
    into_partitions AS (
        INSERT INTO webhook_ingest.job_history (id, finished_at, created_at, started_at, source_id, events,
                                                attempts, last_status, external_id)
        SELECT id, finished_at, created_at, started_at, source_id, events, attempts, last_status, external_id
          FROM moved WHERE in_partitions)
    INSERT INTO webhook_ingest.job_history_overflow (id, finished_at, created_at, started_at, source_id, events,
                                                     attempts, last_status, external_id)
    SELECT id, finished_at, created_at, started_at, source_id, events, attempts, last_status, external_id
      FROM moved WHERE NOT in_partitions;
    INSERT INTO webhook_ingest.queue (id, source, external_id, state, payload, events, refetch, attempts,
                                      last_error, last_status, created_at, updated_at, next_attempt_at,
                                      lease_until, worker_pid, finished_at, started_at)
    SELECT l.id, l.source, l.external_id, l.state, l.payload, l.events, l.refetch, l.attempts, l.last_error,
           l.last_status, l.created_at, l.updated_at, l.next_attempt_at, l.lease_until, l.worker_pid,
           l.finished_at, l.started_at
      FROM webhook_ingest.jobs_legacy l
     WHERE l.id > m.moved_upto AND l.id <= hi AND l.state <> 'done';
    UPDATE webhook_ingest.legacy_migration SET moved_upto = hi;
    RETURN greatest(hi - m.moved_upto, 1);
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._move_legacy_jobs(n integer) FROM PUBLIC;

-- The keys (src/object_keys.c); _object_keys is the GIN index's expression (its cost: up to 128 digests,
-- so that the planner reads a partition through the index rather than computing them for every row).
CREATE FUNCTION webhook_ingest._object_keys(external_ids text[], bits smallint)
RETURNS integer[]
AS 'MODULE_PATHNAME', 'webhook_ingest_object_keys'
LANGUAGE C IMMUTABLE PARALLEL SAFE COST 1000;
REVOKE ALL ON FUNCTION webhook_ingest._object_keys(external_ids text[], bits smallint) FROM PUBLIC;

CREATE FUNCTION webhook_ingest._object_checks(external_ids text[])
RETURNS smallint[]
AS 'MODULE_PATHNAME', 'webhook_ingest_object_checks'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
REVOKE ALL ON FUNCTION webhook_ingest._object_checks(external_ids text[]) FROM PUBLIC;

/*
 * The bits a row of a partition expected to hold `jobs` jobs is keyed at:
 * a bucket of about 24 jobs (an even number of bits, 4 to 24).
 */
CREATE FUNCTION webhook_ingest._object_bits(jobs double precision)
RETURNS smallint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN least(24, greatest(4, 2 * round(log(2.0, greatest(jobs, 1.0)::numeric / 24) / 2)))::smallint;
REVOKE ALL ON FUNCTION webhook_ingest._object_bits(jobs double precision) FROM PUBLIC;

/*
 * _packed_jobs with the narrowings (job_id, external_ids, finished_from,
 * finished_to: src/job_history.c) and the jobs' errors; its planner
 * support function tells the planner how few rows a narrowed call returns
 * (src/packed_jobs_planner.c).
 */
CREATE FUNCTION webhook_ingest._packed_jobs_support(internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'webhook_ingest_packed_jobs_support'
LANGUAGE C STRICT;
REVOKE ALL ON FUNCTION webhook_ingest._packed_jobs_support(internal) FROM PUBLIC;

CREATE FUNCTION webhook_ingest._packed_jobs(job_id bigint DEFAULT NULL, external_ids text[] DEFAULT NULL,
    finished_from timestamptz DEFAULT NULL, finished_to timestamptz DEFAULT NULL,
    OUT id bigint, OUT finished_at timestamptz, OUT created_at timestamptz, OUT started_at timestamptz,
    OUT source_id integer, OUT events integer, OUT attempts smallint, OUT last_status smallint,
    OUT external_id text, OUT last_error text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'webhook_ingest_packed_jobs'
LANGUAGE C STABLE CALLED ON NULL INPUT ROWS 1000 SUPPORT webhook_ingest._packed_jobs_support;
REVOKE ALL ON FUNCTION webhook_ingest._packed_jobs(job_id bigint, external_ids text[], finished_from timestamp with time zone, finished_to timestamp with time zone, OUT id bigint, OUT finished_at timestamp with time zone, OUT created_at timestamp with time zone, OUT started_at timestamp with time zone, OUT source_id integer, OUT events integer, OUT attempts smallint, OUT last_status smallint, OUT external_id text, OUT last_error text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._packed_jobs(job_id bigint, external_ids text[], finished_from timestamp with time zone, finished_to timestamp with time zone, OUT id bigint, OUT finished_at timestamp with time zone, OUT created_at timestamp with time zone, OUT started_at timestamp with time zone, OUT source_id integer, OUT events integer, OUT attempts smallint, OUT last_status smallint, OUT external_id text, OUT last_error text) TO webhook_ingest_admin;
GRANT EXECUTE ON FUNCTION webhook_ingest._packed_jobs(job_id bigint, external_ids text[], finished_from timestamp with time zone, finished_to timestamp with time zone, OUT id bigint, OUT finished_at timestamp with time zone, OUT created_at timestamp with time zone, OUT started_at timestamp with time zone, OUT source_id integer, OUT events integer, OUT attempts smallint, OUT last_status smallint, OUT external_id text, OUT last_error text) TO webhook_ingest_enqueue;

-- EXPLAIN of what _packed_jobs runs for these arguments (for operators, and the plan tests)
CREATE FUNCTION webhook_ingest._packed_jobs_plan(job_id bigint DEFAULT NULL, external_ids text[] DEFAULT NULL,
    finished_from timestamptz DEFAULT NULL, finished_to timestamptz DEFAULT NULL)
RETURNS TABLE (n integer, line text)
AS 'MODULE_PATHNAME', 'webhook_ingest_packed_jobs_plan'
LANGUAGE C VOLATILE CALLED ON NULL INPUT;
REVOKE ALL ON FUNCTION webhook_ingest._packed_jobs_plan(job_id bigint, external_ids text[], finished_from timestamp with time zone, finished_to timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._packed_jobs_plan(job_id bigint, external_ids text[], finished_from timestamp with time zone, finished_to timestamp with time zone) TO webhook_ingest_admin;

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
REVOKE ALL ON FUNCTION webhook_ingest._key_packed_rows(n integer) FROM PUBLIC;

/*
 * The packing of settled history into job_history_packed, the rows keyed
 * as they are made: their object keys'
 * bits (from how many jobs their partition is expected to hold: what the
 * one before it held, or what it holds so far), the checks, last_finished
 * and the jobs' errors.  Then rows packed before 0.10.0 are
 * keyed (a batch a round), and the BRIN indexes of job_history kept up
 * (_summarize_history, below).
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
    -- (not those past retention, kept only while some object pins them: their packed partition would be
    -- dropped again at the start of the next round)
    FOR p IN SELECT * FROM webhook_ingest._partitions('webhook_ingest.job_history')
              WHERE lower_bound < settled_before
                AND upper_bound > now() - coalesce(webhook_ingest._retention(), interval '1000 years')
              ORDER BY lower_bound LOOP
        -- (each chunk's successor is looked for from where it ended, by the id
        -- index: not through the dead index entries of the chunks packed before it)
        EXECUTE format('SELECT min(h.id) FROM webhook_ingest.%I h WHERE h.finished_at < $1', p.name)
           INTO lo USING settled_before;
        CONTINUE WHEN lo IS NULL;
        CASE webhook_ingest._packed_partition_for(p.lower_bound, p.upper_bound)
            WHEN 'ready' THEN
                NULL;
            WHEN 'made' THEN
                behind := true;     -- its rows move from the next round on
                CONTINUE;
            ELSE
                CONTINUE;
        END CASE;
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
        -- (briefly: a vacuum of job_history holds the lock it needs, and a wait of a second would cancel it)
        PERFORM set_config('lock_timeout', '50ms', true);
        PERFORM webhook_ingest._summarize_history();
        PERFORM set_config('lock_timeout', saved_lock_timeout, true);
    EXCEPTION WHEN lock_not_available THEN
        NULL;       -- next round (the setting is put back with the subtransaction)
    END;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._pack_history(settled_before timestamp with time zone, budget interval, OUT packed bigint, OUT behind boolean) FROM PUBLIC;

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
       SELECT array_agg(l.event_id ORDER BY l.received, l.event_id) AS event_ids, sum(l.duplicates) AS duplicates
         FROM webhook_ingest.event_ledger l
        WHERE l.job_id = j.id
          AND l.source_id = (SELECT s.id FROM webhook_ingest.sources s WHERE s.name = j.source)) e ON true
 WHERE j.source = history.source AND j.external_id = history.external_id
 ORDER BY j.id
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest.history(source text, external_id text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest.history(source text, external_id text) TO webhook_ingest_admin;

CREATE INDEX job_history_finished ON webhook_ingest.job_history USING brin (finished_at);

CREATE INDEX job_history_id ON webhook_ingest.job_history USING btree (id);

CREATE INDEX job_history_object ON webhook_ingest.job_history USING brin (external_id text_bloom_ops (n_distinct_per_range='500', false_positive_rate='0.01')) WITH (pages_per_range='8', autosummarize='on');

CREATE INDEX job_history_overflow_finished ON webhook_ingest.job_history_overflow USING btree (finished_at);

CREATE INDEX job_history_overflow_id ON webhook_ingest.job_history_overflow USING hash (id);

CREATE INDEX job_history_overflow_object ON webhook_ingest.job_history_overflow USING btree (external_id);

CREATE INDEX kept_payloads_job ON webhook_ingest.kept_payloads USING hash (job_id) WITH (fillfactor='100');

CREATE INDEX kept_payloads_overflow_job ON webhook_ingest.kept_payloads_overflow USING hash (job_id);

CREATE INDEX kept_payloads_overflow_until ON webhook_ingest.kept_payloads_overflow USING btree (kept_until);

CREATE INDEX job_history_packed_block ON webhook_ingest.job_history_packed USING btree (block);

CREATE INDEX job_history_packed_object ON webhook_ingest.job_history_packed USING gin (webhook_ingest._object_keys(external_ids, object_bits)) WITH (gin_pending_list_limit='64');

CREATE INDEX job_history_packed_span ON webhook_ingest.job_history_packed USING gist (tstzrange(finished_at, last_finished, '[]'::text));

-- (nothing to move in a fresh install; 0.5.0's event ids are gone since 0.10.0)
INSERT INTO webhook_ingest.legacy_migration (moved_upto, last_id, events_truncated) VALUES (0, 0, true);

/*
 * Every job, with 0.5.0's columns: the queue, the history (state done,
 * last_error NULL, updated_at = next_attempt_at = finished_at, the payload
 * if kept), and the rows of jobs_legacy not moved yet.  Each branch is a
 * security barrier view of its own, with its row filter: the caller's quals
 * run after it, except leakproof ones (an id lookup still uses the
 * indexes).  A barrier on the UNION ALL alone would not do (audit 0.6.0
 * storage, finding 2): the planner flattens it into an append of its
 * branches, and a caller's leaky qual then ran below a branch's filter.
 * jobs is that UNION ALL itself, not a view over _jobs_all: every level of
 * views is one more copy of the whole tree for the planner (each branch's
 * sources only id and name, for the same reason), which an object's
 * lookup typed in psql pays on each statement (issue 28).
 */
CREATE VIEW webhook_ingest._jobs_queued (id, source, external_id, state, payload, events, refetch, attempts,
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
REVOKE ALL ON webhook_ingest._jobs_queued FROM PUBLIC;

CREATE VIEW webhook_ingest._jobs_finished (id, source, external_id, state, payload, events, refetch, attempts,
    last_error, last_status, created_at, updated_at, next_attempt_at, lease_until, worker_pid, finished_at, started_at,
    done_lsn, attempt_error)
    WITH (security_barrier) AS
SELECT h.id, s.name, h.external_id, 'done'::webhook_ingest.job_state, k.payload, h.events, false,
       h.attempts::integer, NULL::text, h.last_status::integer, h.created_at, h.finished_at, h.finished_at,
       NULL::timestamptz, NULL::integer, h.finished_at, h.started_at, b.done_lsn, h.last_error
  FROM (SELECT * FROM webhook_ingest.job_history
        UNION ALL SELECT * FROM webhook_ingest.job_history_overflow) h
  JOIN (SELECT s.id, s.name FROM webhook_ingest.sources s) s ON s.id = h.source_id
  LEFT JOIN webhook_ingest.done_batches b ON b.finished_at = h.finished_at
  LEFT JOIN (SELECT * FROM webhook_ingest.kept_payloads
             UNION ALL SELECT * FROM webhook_ingest.kept_payloads_overflow) k
         ON k.job_id = h.id AND k.kept_until > now()
 WHERE webhook_ingest._may_read_jobs(s.name);
REVOKE ALL ON webhook_ingest._jobs_finished FROM PUBLIC;

CREATE VIEW webhook_ingest._jobs_packed (id, source, external_id, state, payload, events, refetch, attempts,
    last_error, last_status, created_at, updated_at, next_attempt_at, lease_until, worker_pid, finished_at, started_at,
    done_lsn, attempt_error)
    WITH (security_barrier) AS
SELECT h.id, s.name, h.external_id, 'done'::webhook_ingest.job_state, k.payload, h.events, false,
       h.attempts::integer, NULL::text, h.last_status::integer, h.created_at, h.finished_at, h.finished_at,
       NULL::timestamptz, NULL::integer, h.finished_at, h.started_at, b.done_lsn, h.last_error
  FROM webhook_ingest._packed_jobs(NULL::bigint, NULL::text[], NULL::timestamptz, NULL::timestamptz) h
  JOIN (SELECT s.id, s.name FROM webhook_ingest.sources s) s ON s.id = h.source_id
  LEFT JOIN webhook_ingest.done_batches b ON b.finished_at = h.finished_at
  LEFT JOIN (SELECT * FROM webhook_ingest.kept_payloads
             UNION ALL SELECT * FROM webhook_ingest.kept_payloads_overflow) k
         ON k.job_id = h.id AND k.kept_until > now()
 WHERE webhook_ingest._may_read_jobs(s.name);
REVOKE ALL ON webhook_ingest._jobs_packed FROM PUBLIC;

CREATE VIEW webhook_ingest._jobs_unmoved (id, source, external_id, state, payload, events, refetch, attempts,
    last_error, last_status, created_at, updated_at, next_attempt_at, lease_until, worker_pid, finished_at, started_at,
    done_lsn, attempt_error)
    WITH (security_barrier) AS
SELECT l.id, l.source, l.external_id, l.state, l.payload, l.events, l.refetch, l.attempts, l.last_error,
       l.last_status, l.created_at, l.updated_at, l.next_attempt_at, l.lease_until, l.worker_pid,
       l.finished_at, l.started_at, l.done_lsn, l.last_error
  FROM webhook_ingest.jobs_legacy l
 WHERE l.id > (SELECT m.moved_upto FROM webhook_ingest.legacy_migration m)
   AND webhook_ingest._may_read_jobs(l.source);
REVOKE ALL ON webhook_ingest._jobs_unmoved FROM PUBLIC;

CREATE VIEW webhook_ingest._jobs_all WITH (security_barrier) AS
SELECT * FROM webhook_ingest._jobs_queued
UNION ALL
SELECT * FROM webhook_ingest._jobs_finished
UNION ALL
SELECT * FROM webhook_ingest._jobs_packed
UNION ALL
SELECT * FROM webhook_ingest._jobs_unmoved;
COMMENT ON VIEW webhook_ingest._jobs_all IS 'every job, with the jobs view''s columns and attempt_error (the last failed attempt''s error, done jobs'' too)';
GRANT SELECT ON TABLE webhook_ingest._jobs_all TO webhook_ingest_admin;

CREATE VIEW webhook_ingest.jobs WITH (security_barrier) AS
SELECT id, source, external_id, state, payload, events, refetch, attempts, last_error, last_status,
       created_at, updated_at, next_attempt_at, lease_until, worker_pid, finished_at, started_at, done_lsn
  FROM webhook_ingest._jobs_queued
UNION ALL
SELECT id, source, external_id, state, payload, events, refetch, attempts, last_error, last_status,
       created_at, updated_at, next_attempt_at, lease_until, worker_pid, finished_at, started_at, done_lsn
  FROM webhook_ingest._jobs_finished
UNION ALL
SELECT id, source, external_id, state, payload, events, refetch, attempts, last_error, last_status,
       created_at, updated_at, next_attempt_at, lease_until, worker_pid, finished_at, started_at, done_lsn
  FROM webhook_ingest._jobs_packed
UNION ALL
SELECT id, source, external_id, state, payload, events, refetch, attempts, last_error, last_status,
       created_at, updated_at, next_attempt_at, lease_until, worker_pid, finished_at, started_at, done_lsn
  FROM webhook_ingest._jobs_unmoved;
COMMENT ON VIEW webhook_ingest.jobs IS 'every job, as 0.5.0''s jobs table showed it: queue, job_history and job_history_packed (payload NULL unless kept) and rows not yet moved';
GRANT SELECT ON TABLE webhook_ingest.jobs TO webhook_ingest_admin;
GRANT SELECT(id) ON TABLE webhook_ingest.jobs TO webhook_ingest_enqueue;
GRANT SELECT(state) ON TABLE webhook_ingest.jobs TO webhook_ingest_enqueue;
GRANT SELECT(done_lsn) ON TABLE webhook_ingest.jobs TO webhook_ingest_enqueue;

CREATE TRIGGER jobs_restored_running BEFORE INSERT ON webhook_ingest.jobs_legacy FOR EACH ROW WHEN ((new.state = 'running'::webhook_ingest.job_state)) EXECUTE FUNCTION webhook_ingest._jobs_restored_running();

CREATE TRIGGER jobs_write INSTEAD OF INSERT OR DELETE OR UPDATE ON webhook_ingest.jobs FOR EACH ROW EXECUTE FUNCTION webhook_ingest._jobs_write();

GRANT SELECT ON SEQUENCE webhook_ingest.jobs_legacy_id_seq TO webhook_ingest_admin;

/* ==========================================================================
 * Storage rounds: partitions, packing, retention
 *
 * The worker's clean-up rounds (_maintain_storage): partitions made ahead
 * and dropped past retention, history packed, ledger summaries.
 */

-- webhook_ingest.retention as an interval; NULL: forever (-1).
CREATE FUNCTION webhook_ingest._retention()
RETURNS interval
LANGUAGE sql STABLE
RETURN (SELECT CASE WHEN s.setting::integer < 0 THEN NULL ELSE make_interval(secs => s.setting::integer) END
          FROM pg_catalog.pg_settings s WHERE s.name = 'webhook_ingest.retention');
REVOKE ALL ON FUNCTION webhook_ingest._retention() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._retention() TO webhook_ingest_admin;

/*
 * How wide the partitions of job_history and kept_payloads are: a day while
 * retention is at least two days (or forever), an hour while it is at least
 * two hours, else a minute.  A change applies to partitions made after it.
 */
CREATE FUNCTION webhook_ingest._partition_width()
RETURNS interval
LANGUAGE sql STABLE
RETURN CASE WHEN webhook_ingest._retention() IS NULL OR webhook_ingest._retention() >= interval '2 days'
            THEN interval '1 day'
            WHEN webhook_ingest._retention() >= interval '2 hours' THEN interval '1 hour'
            ELSE interval '1 minute' END;
REVOKE ALL ON FUNCTION webhook_ingest._partition_width() FROM PUBLIC;

-- The range partitions of parent and their bounds, oldest first (not the DEFAULT).
CREATE FUNCTION webhook_ingest._partitions(parent regclass,
    OUT name text, OUT lower_bound timestamptz, OUT upper_bound timestamptz)
RETURNS SETOF record
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT c.relname::text, b[1]::timestamptz, b[2]::timestamptz
  FROM pg_catalog.pg_inherits i
  JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid,
       LATERAL regexp_match(pg_catalog.pg_get_expr(c.relpartbound, c.oid),
                            $re$FROM \('([^']+)'\) TO \('([^']+)'\)$re$) b
 WHERE i.inhparent = parent AND b IS NOT NULL
 ORDER BY 2
$$;
REVOKE ALL ON FUNCTION webhook_ingest._partitions(parent regclass, OUT name text, OUT lower_bound timestamp with time zone, OUT upper_bound timestamp with time zone) FROM PUBLIC;

/*
 * Until when the partitions of parent take rows without a gap from now on
 * ('-infinity' when none takes now's): the worker routes what falls past it
 * to the overflow table instead (src/complete.c).
 */
CREATE FUNCTION webhook_ingest._horizon(parent regclass)
RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    p record;
    until timestamptz := '-infinity';
BEGIN
    FOR p IN SELECT * FROM webhook_ingest._partitions(parent) WHERE upper_bound > now() LOOP
        IF until = '-infinity' THEN
            EXIT WHEN p.lower_bound > now();
        ELSIF p.lower_bound <> until THEN
            EXIT;
        END IF;
        until := p.upper_bound;
    END LOOP;
    RETURN until;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._horizon(parent regclass) FROM PUBLIC;

/*
 * Partitions of parent covering [from_t, to_t), aligned on the width,
 * each starting where the one before it ends; each one a member of the
 * extension (so pg_dump leaves it out, as it does the parent's rows).  Under
 * lock_timeout: a partition that cannot be made now is left for the next
 * round.
 * Returns the partitions made.
 */
CREATE FUNCTION webhook_ingest._ensure_partitions(parent regclass, from_t timestamptz, to_t timestamptz)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    width interval := webhook_ingest._partition_width();
    t timestamptz := date_bin(width, from_t, timestamptz '2000-01-01 00:00+00');
    hi timestamptz;
    p record;
    covered boolean;
    made integer := 0;
    part text;
BEGIN
    WHILE t < to_t LOOP
        covered := false;
        hi := t + width;
        FOR p IN SELECT * FROM webhook_ingest._partitions(parent) LOOP
            IF p.lower_bound <= t AND t < p.upper_bound THEN
                covered := true;
                hi := p.upper_bound;
                EXIT;
            END IF;
            IF p.lower_bound > t AND p.lower_bound < hi THEN
                hi := p.lower_bound;
            END IF;
        END LOOP;
        IF NOT covered THEN
            part := format('%s_p%s', (SELECT c.relname FROM pg_catalog.pg_class c WHERE c.oid = parent),
                           to_char(t AT TIME ZONE 'UTC', 'YYYYMMDD"_"HH24MI'));
            BEGIN
                -- made alone, then attached: ATTACH takes SHARE UPDATE EXCLUSIVE on the
                -- parent, which no reader or writer of it conflicts with
                EXECUTE format('CREATE TABLE webhook_ingest.%I (LIKE %s)', part, parent);
                EXECUTE format('ALTER TABLE %s ATTACH PARTITION webhook_ingest.%I FOR VALUES FROM (%L) TO (%L)',
                               parent, part, t, hi);
                EXECUTE format('ALTER EXTENSION webhook_ingest ADD TABLE webhook_ingest.%I', part);
                made := made + 1;
            EXCEPTION WHEN lock_not_available OR duplicate_table THEN
                NULL;       -- next round
            END;
        END IF;
        t := hi;
    END LOOP;
    RETURN made;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._ensure_partitions(parent regclass, from_t timestamp with time zone, to_t timestamp with time zone) FROM PUBLIC;

/*
 * Drop one partition (out of the extension first): 'dropped', 'locked'
 * (lock_timeout: the caller stops for this round) or 'pinned' (a view or a
 * default of some role's names it, by a regclass constant even: it stays,
 * with a WARNING, and the round goes on; audit 0.6.0 storage #1).
 */
CREATE FUNCTION webhook_ingest._drop_partition(name text)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    why text;
BEGIN
    EXECUTE format('ALTER EXTENSION webhook_ingest DROP TABLE webhook_ingest.%I', name);
    EXECUTE format('DROP TABLE webhook_ingest.%I', name);
    RETURN 'dropped';
EXCEPTION
    WHEN lock_not_available THEN
        RETURN 'locked';
    WHEN dependent_objects_still_exist THEN
        GET STACKED DIAGNOSTICS why = PG_EXCEPTION_DETAIL;
        RAISE WARNING 'webhook_ingest: partition % cannot be dropped: other objects depend on it', name
            USING DETAIL = pg_catalog.left(why, 500);
        RETURN 'pinned';
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._drop_partition(name text) FROM PUBLIC;

/*
 * Drop the partitions of parent that end at or before upto, and those made
 * ahead at another width (retention changed since) that are still empty, so
 * that _ensure_partitions makes them again at the new width.  The partition
 * taking rows now keeps its old bounds (at most one old width).
 */
CREATE FUNCTION webhook_ingest._drop_partitions(parent regclass, upto timestamptz)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    width interval := webhook_ingest._partition_width();
    p record;
    holds_rows boolean;
    dropped integer := 0;
    outcome text;
BEGIN
    FOR p IN SELECT * FROM webhook_ingest._partitions(parent)
              WHERE upper_bound <= upto OR (lower_bound > now() AND upper_bound - lower_bound <> width) LOOP
        IF p.upper_bound > upto THEN
            EXECUTE format('SELECT EXISTS (SELECT FROM webhook_ingest.%I)', p.name) INTO holds_rows;
            CONTINUE WHEN holds_rows;
        END IF;
        outcome := webhook_ingest._drop_partition(p.name);
        EXIT WHEN outcome = 'locked';       -- next round
        dropped := dropped + (outcome = 'dropped')::integer;
    END LOOP;
    RETURN dropped;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._drop_partitions(parent regclass, upto timestamp with time zone) FROM PUBLIC;

/*
 * A partition of job_history_packed with the bounds of a partition of
 * job_history (made alone and attached, a member of the extension, as
 * _ensure_partitions makes them), unless one holding that time exists.
 * Returns 'ready' when the time [lower, upper) can be packed now; 'made'
 * when this call made its partition: rows move into it from the next
 * transaction on, so that no reader sees them leave job_history before it
 * can see the new partition (ATTACH takes only SHARE UPDATE EXCLUSIVE on
 * the parent, and a reader's transaction that already holds its lock keeps
 * plans made with the old list of partitions); 'unavailable' when a packed
 * partition overlaps it only in part (retention changed the width since:
 * those rows stay where they are until retention drops them) or, under
 * lock_timeout, when it cannot be made now.
 */
CREATE FUNCTION webhook_ingest._packed_partition_for(lower timestamptz, upper timestamptz)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    part text := format('job_history_packed_p%s', to_char(lower AT TIME ZONE 'UTC', 'YYYYMMDD"_"HH24MI'));
BEGIN
    IF EXISTS (SELECT FROM webhook_ingest._partitions('webhook_ingest.job_history_packed') p
                WHERE p.lower_bound <= lower AND upper <= p.upper_bound) THEN
        RETURN 'ready';
    END IF;
    IF EXISTS (SELECT FROM webhook_ingest._partitions('webhook_ingest.job_history_packed') p
                WHERE p.lower_bound < upper AND lower < p.upper_bound) THEN
        RETURN 'unavailable';
    END IF;
    EXECUTE format('CREATE TABLE webhook_ingest.%I (LIKE webhook_ingest.job_history_packed)', part);
    EXECUTE format('ALTER TABLE webhook_ingest.job_history_packed ATTACH PARTITION webhook_ingest.%I FOR VALUES FROM (%L) TO (%L)',
                   part, lower, upper);
    EXECUTE format('ALTER EXTENSION webhook_ingest ADD TABLE webhook_ingest.%I', part);
    RETURN 'made';
EXCEPTION WHEN lock_not_available OR duplicate_table THEN
    RETURN 'unavailable';       -- next round
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._packed_partition_for(lower timestamp with time zone, upper timestamp with time zone) FROM PUBLIC;

/*
 * The storage round, with the packing: history settled for a
 * minute packed, the partitions of job_history it empties dropped once
 * their time is past (their disk back), those of job_history_packed past
 * retention dropped.
 */
CREATE FUNCTION webhook_ingest._maintain_storage(move_batch integer DEFAULT 5000,
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
REVOKE ALL ON FUNCTION webhook_ingest._maintain_storage(move_batch integer, OUT behind boolean, OUT history_until timestamp with time zone, OUT kept_until timestamp with time zone) FROM PUBLIC;

/* ==========================================================================
 * The intake API: enqueue, receive, waits
 *
 * What the application calls: enqueue (one webhook: an object and maybe an
 * event id), receive (a raw delivery: signature checked, ids found in the
 * body), verify_signature, and the waits (wait_for_job, wait_replayed).
 */

/*
 * enqueue: the application's entry point, see src/enqueue.c.
 */
CREATE FUNCTION webhook_ingest.enqueue(
    source text,
    external_id text,
    payload jsonb DEFAULT NULL,
    event_id text DEFAULT NULL)
RETURNS TABLE (job_id bigint, outcome text)
AS 'MODULE_PATHNAME', 'webhook_ingest_enqueue'
LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION webhook_ingest.enqueue(source text, external_id text, payload jsonb, event_id text) IS 'accept a webhook for one object: queued, coalesced, requeued or duplicate';
REVOKE ALL ON FUNCTION webhook_ingest.enqueue(source text, external_id text, payload jsonb, event_id text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest.enqueue(source text, external_id text, payload jsonb, event_id text) TO webhook_ingest_enqueue;

/*
 * Replica read-your-writes (src/wait.c).
 */
-- SECURITY DEFINER: the application's role may wait without reading jobs.
CREATE FUNCTION webhook_ingest.wait_for_job(job_id bigint, timeout interval DEFAULT '30 seconds')
RETURNS boolean
AS 'MODULE_PATHNAME', 'webhook_ingest_wait_for_job'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION webhook_ingest.wait_for_job(job_id bigint, timeout interval) IS 'on the primary: wait until the job is done and its done_lsn known (true), or until it is dead or cancelled or the timeout passes (false)';
REVOKE ALL ON FUNCTION webhook_ingest.wait_for_job(job_id bigint, timeout interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest.wait_for_job(job_id bigint, timeout interval) TO webhook_ingest_enqueue;
GRANT EXECUTE ON FUNCTION webhook_ingest.wait_for_job(job_id bigint, timeout interval) TO webhook_ingest_admin;

-- A procedure: it must hold no snapshot while it waits (src/wait.c).
CREATE PROCEDURE webhook_ingest.wait_replayed(lsn pg_lsn, timeout interval DEFAULT '30 seconds')
AS 'MODULE_PATHNAME', 'webhook_ingest_wait_replayed'
LANGUAGE C;
COMMENT ON PROCEDURE webhook_ingest.wait_replayed(IN lsn pg_lsn, IN timeout interval) IS 'on a standby: return once WAL is replayed up to lsn, raise query_canceled when the timeout passes; on a primary: once lsn is flushed';
REVOKE ALL ON PROCEDURE webhook_ingest.wait_replayed(IN lsn pg_lsn, IN timeout interval) FROM PUBLIC;
GRANT EXECUTE ON PROCEDURE webhook_ingest.wait_replayed(IN lsn pg_lsn, IN timeout interval) TO webhook_ingest_enqueue;
GRANT EXECUTE ON PROCEDURE webhook_ingest.wait_replayed(IN lsn pg_lsn, IN timeout interval) TO webhook_ingest_admin;

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
COMMENT ON FUNCTION webhook_ingest.receive(source text, headers jsonb, body text) IS 'accept a signed webhook as sent (headers and raw body): 28000 if the signature does not verify, else as enqueue';
REVOKE ALL ON FUNCTION webhook_ingest.receive(source text, headers jsonb, body text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest.receive(source text, headers jsonb, body text) TO webhook_ingest_admin;
GRANT EXECUTE ON FUNCTION webhook_ingest.receive(source text, headers jsonb, body text) TO webhook_ingest_enqueue;

/*
 * verify_signature: the check receive() makes, on its own (src/signature_sql.c).
 * Reads no table.
 */
CREATE FUNCTION webhook_ingest.verify_signature(scheme text, secret text, headers jsonb, body text,
                                                tolerance interval DEFAULT '5 minutes')
RETURNS boolean
AS 'MODULE_PATHNAME', 'webhook_ingest_verify_signature'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION webhook_ingest.verify_signature(scheme text, secret text, headers jsonb, body text, tolerance interval) IS 'does this request carry a valid signature of the scheme made with this secret, within the tolerance?';
REVOKE ALL ON FUNCTION webhook_ingest.verify_signature(scheme text, secret text, headers jsonb, body text, tolerance interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest.verify_signature(scheme text, secret text, headers jsonb, body text, tolerance interval) TO webhook_ingest_admin;
GRANT EXECUTE ON FUNCTION webhook_ingest.verify_signature(scheme text, secret text, headers jsonb, body text, tolerance interval) TO webhook_ingest_enqueue;

/* ==========================================================================
 * Worker-side functions: filing and completing jobs
 *
 * Called by the worker processes (src/worker*.c, src/complete.c) through SPI.
 */

/*
 * Arm a wake-up of the worker for when the calling transaction commits.
 */
CREATE FUNCTION webhook_ingest._wake_worker_at_commit()
RETURNS void
AS 'MODULE_PATHNAME', 'webhook_ingest_wake_worker_at_commit'
LANGUAGE C VOLATILE STRICT;
REVOKE ALL ON FUNCTION webhook_ingest._wake_worker_at_commit() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._wake_worker_at_commit() TO webhook_ingest_admin;

/*
 * cancel() wakes the job's wait_for_job() callers at commit (they slept
 * until their next recheck, up to a second).
 */
CREATE FUNCTION webhook_ingest._job_finished_at_commit(job_id bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'webhook_ingest_job_finished_at_commit'
LANGUAGE C VOLATILE STRICT;
REVOKE ALL ON FUNCTION webhook_ingest._job_finished_at_commit(job_id bigint) FROM PUBLIC;

/*
 * Where a job's row belongs, for a row written to the view: done jobs to
 * job_history (their done_lsn to done_batches), every other state to the
 * queue.  One implementation for the view's trigger and the move of
 * 0.5.0's rows one at a time.
 */
CREATE FUNCTION webhook_ingest._file_job(j webhook_ingest.jobs)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    sid integer;
BEGIN
    j.id := coalesce(j.id, nextval('webhook_ingest.jobs_id_seq'));
    IF coalesce(j.state, 'pending') <> 'done' THEN
        INSERT INTO webhook_ingest.queue (id, source, external_id, state, payload, events, refetch, attempts,
                                          last_error, last_status, created_at, updated_at, next_attempt_at,
                                          lease_until, worker_pid, finished_at, started_at)
        VALUES (j.id, j.source,
                j.external_id, coalesce(j.state, 'pending'), j.payload, coalesce(j.events, 1),
                coalesce(j.refetch, false), coalesce(j.attempts, 0), j.last_error, j.last_status,
                coalesce(j.created_at, now()), coalesce(j.updated_at, now()), coalesce(j.next_attempt_at, now()),
                j.lease_until, j.worker_pid, j.finished_at, j.started_at);
        RETURN;
    END IF;
    SELECT s.id INTO sid FROM webhook_ingest.sources s WHERE s.name = j.source;
    IF sid IS NULL THEN
        RAISE EXCEPTION 'source "%" does not exist', webhook_ingest._clip(j.source) USING ERRCODE = 'undefined_object';
    END IF;
    j.finished_at := coalesce(j.finished_at, now());
    IF webhook_ingest._covers('webhook_ingest.job_history', j.finished_at) THEN
        INSERT INTO webhook_ingest.job_history (id, finished_at, created_at, started_at, source_id, events,
                                                attempts, last_status, external_id)
        VALUES (j.id, j.finished_at, coalesce(j.created_at, now()), j.started_at, sid,
                coalesce(j.events, 1), least(coalesce(j.attempts, 0), 32767), j.last_status, j.external_id);
    ELSE
        INSERT INTO webhook_ingest.job_history_overflow (id, finished_at, created_at, started_at, source_id, events,
                                                         attempts, last_status, external_id)
        VALUES (j.id, j.finished_at, coalesce(j.created_at, now()), j.started_at, sid,
                coalesce(j.events, 1), least(coalesce(j.attempts, 0), 32767), j.last_status, j.external_id);
    END IF;
    IF j.done_lsn IS NOT NULL THEN
        INSERT INTO webhook_ingest.done_batches (finished_at, done_lsn)
        VALUES (coalesce(j.finished_at, now()), j.done_lsn)
        ON CONFLICT (finished_at) DO UPDATE SET done_lsn = greatest(done_batches.done_lsn, EXCLUDED.done_lsn);
    END IF;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._file_job(j webhook_ingest.jobs) FROM PUBLIC;

/*
 * A job out of the history (for retry and the view's writes): a packed
 * job's element leaves every array of its row, the checks and errors too
 * (last_finished stays: still a bound).
 */
CREATE FUNCTION webhook_ingest._unfile_job(job_id bigint)
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
REVOKE ALL ON FUNCTION webhook_ingest._unfile_job(job_id bigint) FROM PUBLIC;

/* ==========================================================================
 * Monitoring views
 *
 * For webhook_ingest_monitor: the workers (from shared memory), the queue
 * per source, latency histograms and the latest failures.
 */

/*
 * Monitoring.  Per-minute counts and latency histograms live in shared
 * memory (src/stats.c), filled by the worker; the views read no large table.
 */
CREATE FUNCTION webhook_ingest._recent_counts(minutes integer,
    OUT source text, OUT done bigint, OUT retried bigint, OUT dead bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'webhook_ingest_recent_counts'
LANGUAGE C VOLATILE STRICT;
REVOKE ALL ON FUNCTION webhook_ingest._recent_counts(minutes integer, OUT source text, OUT done bigint, OUT retried bigint, OUT dead bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._recent_counts(minutes integer, OUT source text, OUT done bigint, OUT retried bigint, OUT dead bigint) TO webhook_ingest_monitor;
GRANT EXECUTE ON FUNCTION webhook_ingest._recent_counts(minutes integer, OUT source text, OUT done bigint, OUT retried bigint, OUT dead bigint) TO webhook_ingest_admin;

CREATE FUNCTION webhook_ingest._latency(minutes integer,
    OUT source text, OUT jobs bigint,
    OUT done_p50_ms double precision, OUT done_p95_ms double precision, OUT done_p99_ms double precision,
    OUT fetch_p50_ms double precision, OUT fetch_p95_ms double precision, OUT fetch_p99_ms double precision)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'webhook_ingest_latency'
LANGUAGE C VOLATILE STRICT;
REVOKE ALL ON FUNCTION webhook_ingest._latency(minutes integer, OUT source text, OUT jobs bigint, OUT done_p50_ms double precision, OUT done_p95_ms double precision, OUT done_p99_ms double precision, OUT fetch_p50_ms double precision, OUT fetch_p95_ms double precision, OUT fetch_p99_ms double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._latency(minutes integer, OUT source text, OUT jobs bigint, OUT done_p50_ms double precision, OUT done_p95_ms double precision, OUT done_p99_ms double precision, OUT fetch_p50_ms double precision, OUT fetch_p95_ms double precision, OUT fetch_p99_ms double precision) TO webhook_ingest_monitor;
GRANT EXECUTE ON FUNCTION webhook_ingest._latency(minutes integer, OUT source text, OUT jobs bigint, OUT done_p50_ms double precision, OUT done_p95_ms double precision, OUT done_p99_ms double precision, OUT fetch_p50_ms double precision, OUT fetch_p95_ms double precision, OUT fetch_p99_ms double precision) TO webhook_ingest_admin;

CREATE FUNCTION webhook_ingest._recent_failures(
    OUT failed_at timestamptz, OUT job_id bigint, OUT source text, OUT external_id text,
    OUT attempt integer, OUT http_status integer, OUT error text, OUT fetch_ms double precision,
    OUT outcome text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'webhook_ingest_recent_failures'
LANGUAGE C VOLATILE STRICT;
REVOKE ALL ON FUNCTION webhook_ingest._recent_failures(OUT failed_at timestamp with time zone, OUT job_id bigint, OUT source text, OUT external_id text, OUT attempt integer, OUT http_status integer, OUT error text, OUT fetch_ms double precision, OUT outcome text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._recent_failures(OUT failed_at timestamp with time zone, OUT job_id bigint, OUT source text, OUT external_id text, OUT attempt integer, OUT http_status integer, OUT error text, OUT fetch_ms double precision, OUT outcome text) TO webhook_ingest_monitor;
GRANT EXECUTE ON FUNCTION webhook_ingest._recent_failures(OUT failed_at timestamp with time zone, OUT job_id bigint, OUT source text, OUT external_id text, OUT attempt integer, OUT http_status integer, OUT error text, OUT fetch_ms double precision, OUT outcome text) TO webhook_ingest_admin;

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
         FROM webhook_ingest.queue j
        WHERE j.source = s.name AND j.state = ANY ('{pending,running}'::webhook_ingest.job_state[])) a ON true
  LEFT JOIN LATERAL (
       SELECT count(*) AS dead FROM webhook_ingest.queue j
        WHERE j.source = s.name AND j.state = 'dead') d ON true
  LEFT JOIN webhook_ingest._recent_counts(60) r ON r.source = s.name
$$;
COMMENT ON FUNCTION webhook_ingest._queue_stats(OUT source text, OUT paused boolean, OUT pending bigint, OUT due_now bigint, OUT running bigint, OUT retry_waiting bigint, OUT done_last_hour bigint, OUT retried_last_hour bigint, OUT dead bigint, OUT backlog_age interval) IS 'the rows of queue_stats, counted from jobs_active_object and jobs_dead by index-only scans, with jit = off';
REVOKE ALL ON FUNCTION webhook_ingest._queue_stats(OUT source text, OUT paused boolean, OUT pending bigint, OUT due_now bigint, OUT running bigint, OUT retry_waiting bigint, OUT done_last_hour bigint, OUT retried_last_hour bigint, OUT dead bigint, OUT backlog_age interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._queue_stats(OUT source text, OUT paused boolean, OUT pending bigint, OUT due_now bigint, OUT running bigint, OUT retry_waiting bigint, OUT done_last_hour bigint, OUT retried_last_hour bigint, OUT dead bigint, OUT backlog_age interval) TO webhook_ingest_admin;
GRANT EXECUTE ON FUNCTION webhook_ingest._queue_stats(OUT source text, OUT paused boolean, OUT pending bigint, OUT due_now bigint, OUT running bigint, OUT retry_waiting bigint, OUT done_last_hour bigint, OUT retried_last_hour bigint, OUT dead bigint, OUT backlog_age interval) TO webhook_ingest_monitor;

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
REVOKE ALL ON FUNCTION webhook_ingest._worker_status(OUT pid integer, OUT database text, OUT state text, OUT started_at timestamp with time zone, OUT in_flight integer, OUT claimed bigint, OUT fetched bigint, OUT succeeded bigint, OUT retried bigint, OUT dead bigint, OUT handler_errors bigint, OUT bytes bigint, OUT last_error text, OUT last_error_at timestamp with time zone, OUT connections_opened bigint, OUT tls_connections_opened bigint, OUT role text, OUT applier integer, OUT applying integer, OUT applied bigint, OUT handler_ms double precision, OUT alone_handlers text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._worker_status(OUT pid integer, OUT database text, OUT state text, OUT started_at timestamp with time zone, OUT in_flight integer, OUT claimed bigint, OUT fetched bigint, OUT succeeded bigint, OUT retried bigint, OUT dead bigint, OUT handler_errors bigint, OUT bytes bigint, OUT last_error text, OUT last_error_at timestamp with time zone, OUT connections_opened bigint, OUT tls_connections_opened bigint, OUT role text, OUT applier integer, OUT applying integer, OUT applied bigint, OUT handler_ms double precision, OUT alone_handlers text) TO webhook_ingest_admin;
GRANT EXECUTE ON FUNCTION webhook_ingest._worker_status(OUT pid integer, OUT database text, OUT state text, OUT started_at timestamp with time zone, OUT in_flight integer, OUT claimed bigint, OUT fetched bigint, OUT succeeded bigint, OUT retried bigint, OUT dead bigint, OUT handler_errors bigint, OUT bytes bigint, OUT last_error text, OUT last_error_at timestamp with time zone, OUT connections_opened bigint, OUT tls_connections_opened bigint, OUT role text, OUT applier integer, OUT applying integer, OUT applied bigint, OUT handler_ms double precision, OUT alone_handlers text) TO webhook_ingest_monitor;

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
COMMENT ON FUNCTION webhook_ingest._fetcher_state(OUT source text, OUT in_flight integer, OUT throttled_until timestamp with time zone, OUT throttled_by text, OUT waiting_for_applier integer) IS 'per source, from the fetcher of this database: jobs in flight, until when the upstream throttled it, results waiting for an apply worker';
REVOKE ALL ON FUNCTION webhook_ingest._fetcher_state(OUT source text, OUT in_flight integer, OUT throttled_until timestamp with time zone, OUT throttled_by text, OUT waiting_for_applier integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._fetcher_state(OUT source text, OUT in_flight integer, OUT throttled_until timestamp with time zone, OUT throttled_by text, OUT waiting_for_applier integer) TO webhook_ingest_admin;
GRANT EXECUTE ON FUNCTION webhook_ingest._fetcher_state(OUT source text, OUT in_flight integer, OUT throttled_until timestamp with time zone, OUT throttled_by text, OUT waiting_for_applier integer) TO webhook_ingest_monitor;

CREATE VIEW webhook_ingest.latency AS
SELECT * FROM webhook_ingest._latency(5);
COMMENT ON VIEW webhook_ingest.latency IS 'per source, over the last 5 minutes: enqueue-to-done and fetch duration percentiles, from fixed-size histograms in shared memory';
GRANT SELECT ON TABLE webhook_ingest.latency TO webhook_ingest_monitor;
GRANT SELECT ON TABLE webhook_ingest.latency TO webhook_ingest_admin;

CREATE VIEW webhook_ingest.recent_failures AS
SELECT * FROM webhook_ingest._recent_failures() ORDER BY failed_at DESC;
COMMENT ON VIEW webhook_ingest.recent_failures IS 'the latest failed attempts (up to 128, newest first): status, error, fetch time and whether it will be retried';
GRANT SELECT ON TABLE webhook_ingest.recent_failures TO webhook_ingest_monitor;
GRANT SELECT ON TABLE webhook_ingest.recent_failures TO webhook_ingest_admin;

CREATE VIEW webhook_ingest.worker_status AS SELECT * FROM webhook_ingest._worker_status();
COMMENT ON VIEW webhook_ingest.worker_status IS 'one row per database worker of the cluster (role fetcher: claims and fetches, the database''s totals) and one per apply worker (role applier: completes what the fetcher hands over, runs the handlers): pid, database, state, jobs in flight, of them applying (fetched, held for an apply worker), counters since it started, handler_ms, alone_handlers (handlers completed one per batch after a crash, and why), last error';
GRANT SELECT ON TABLE webhook_ingest.worker_status TO webhook_ingest_admin;
GRANT SELECT ON TABLE webhook_ingest.worker_status TO webhook_ingest_monitor;

/*
 * queue_stats: the backlog per source, from the partial indexes on active
 * and dead jobs, and the worker's per-minute counts.
 */
CREATE VIEW webhook_ingest.queue_stats AS
SELECT q.source COLLATE "C" AS source, q.paused, q.pending, q.due_now, q.running, q.retry_waiting,
       q.done_last_hour, q.retried_last_hour, q.dead, q.backlog_age,
       coalesce(t.in_flight, 0) AS in_flight, t.throttled_until, t.throttled_by,
       coalesce(t.waiting_for_applier, 0) AS waiting_for_applier
  FROM webhook_ingest._queue_stats() q
  LEFT JOIN webhook_ingest._fetcher_state() t ON t.source = q.source;
COMMENT ON VIEW webhook_ingest.queue_stats IS 'per source: pending, due now, running, waiting to retry, done and retried in the last hour, dead, age of the oldest unfinished job';
GRANT SELECT ON TABLE webhook_ingest.queue_stats TO webhook_ingest_monitor;
GRANT SELECT ON TABLE webhook_ingest.queue_stats TO webhook_ingest_admin;

/* ==========================================================================
 * Reconciliation: sweeps over the upstream lists
 *
 * Off unless a source configures it (reconcile_settings): the worker sweeps
 * the upstream's list pages (reconcile_sweeps, the cursor: a row, so it
 * survives restarts and failover) and enqueues the changed objects no
 * webhook announced (reconcile_objects remembers what it saw).
 */

CREATE TABLE webhook_ingest.reconcile_settings (
    source_id integer NOT NULL,
    url text NOT NULL,
    next_url text,
    items jsonpath NOT NULL,
    id jsonpath NOT NULL,
    version jsonpath NOT NULL,
    version_kind text NOT NULL,
    fetched_version jsonpath,
    cursor jsonpath,
    has_more jsonpath,
    every interval NOT NULL,
    since bigint,
    share real NOT NULL,
    pause_backlog integer NOT NULL,
    max_page_size integer NOT NULL,
    max_pages integer NOT NULL,
    CONSTRAINT reconcile_settings_pkey PRIMARY KEY (source_id)
);
COMMENT ON TABLE webhook_ingest.reconcile_settings IS 'the sources that reconcile and how (_reconcile_keys); since: the first watermark as a version';
GRANT SELECT ON TABLE webhook_ingest.reconcile_settings TO webhook_ingest_admin;

CREATE TABLE webhook_ingest.reconcile_sweeps (
    source_id integer NOT NULL,
    watermark bigint,
    page_url text,
    started_at timestamp with time zone,
    pages integer DEFAULT 0 NOT NULL,
    recent_pages bigint[] DEFAULT '{}'::bigint[] NOT NULL,
    sweep_max bigint,
    listed integer DEFAULT 0 NOT NULL,
    changed integer DEFAULT 0 NOT NULL,
    missed integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    leased_until timestamp with time zone,
    last_error text,
    last_status integer,
    last_error_at timestamp with time zone,
    last_started_at timestamp with time zone,
    last_completed_at timestamp with time zone,
    last_pages integer,
    last_listed integer,
    last_changed integer,
    last_missed integer,
    sweeps bigint DEFAULT 0 NOT NULL,
    sweeps_failed bigint DEFAULT 0 NOT NULL,
    total_listed bigint DEFAULT 0 NOT NULL,
    total_changed bigint DEFAULT 0 NOT NULL,
    total_missed bigint DEFAULT 0 NOT NULL,
    CONSTRAINT reconcile_sweeps_pkey PRIMARY KEY (source_id)
);
COMMENT ON TABLE webhook_ingest.reconcile_sweeps IS 'per reconciling source: the sweep under way (page_url: the page due next, at next_attempt_at), the watermark ({since}), the last complete sweep and the counts (changed: listed newer than the watermark; missed: of those, enqueued with no job active, i.e. no webhook announced them)';
COMMENT ON COLUMN webhook_ingest.reconcile_sweeps.recent_pages IS 'hashes of the sweep''s last 16 page URLs: a next page among them is a cursor that repeats';
GRANT SELECT ON TABLE webhook_ingest.reconcile_sweeps TO webhook_ingest_admin;

CREATE TABLE webhook_ingest.reconcile_objects (
    version bigint,
    listed bigint,
    source_id integer NOT NULL,
    external_id text NOT NULL COLLATE pg_catalog."C",
    CONSTRAINT reconcile_objects_pkey PRIMARY KEY (source_id, external_id)
)
WITH (fillfactor='90');
COMMENT ON TABLE webhook_ingest.reconcile_objects IS 'per object of a reconciling source: the version of the copy last fetched, and a listed version not yet fetched';
GRANT SELECT ON TABLE webhook_ingest.reconcile_objects TO webhook_ingest_admin;

ALTER TABLE ONLY webhook_ingest.reconcile_settings
    ADD CONSTRAINT reconcile_settings_source_id_fkey FOREIGN KEY (source_id) REFERENCES webhook_ingest.sources(id) ON DELETE CASCADE;

ALTER TABLE ONLY webhook_ingest.reconcile_sweeps
    ADD CONSTRAINT reconcile_sweeps_source_id_fkey FOREIGN KEY (source_id) REFERENCES webhook_ingest.reconcile_settings(source_id) ON DELETE CASCADE;

/*
 * Every setting: its JSON type (url, jsonpath, kind, interval, number,
 * integer, since), its default (NULL: none), its range, what it is.  The one
 * list: _set_reconcile checks against it, errors name it, README shows it.
 */
CREATE FUNCTION webhook_ingest._reconcile_keys(
    OUT key text, OUT type text, OUT default_value jsonb, OUT min_value numeric, OUT max_value numeric,
    OUT description text)
RETURNS SETOF record
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
VALUES
    ('url', 'url', NULL::jsonb, NULL::numeric, NULL::numeric,
     'the first page of a sweep: an http(s) URL template with {since} or {since_epoch} (the watermark)'),
    ('next_url', 'url', NULL, NULL, NULL,
     'the following pages: a template with {cursor} (cursor); none: the response''s Link rel="next"'),
    ('items', 'jsonpath', '"$[*]"', NULL, NULL, 'the listed objects in a page'),
    ('id', 'jsonpath', '"$.id"', NULL, NULL, 'an item''s external id (a string or a number)'),
    ('version', 'jsonpath', '"$.updated_at"', NULL, NULL, 'an item''s version'),
    ('version_kind', 'kind', '"timestamp"', NULL, NULL,
     'timestamp (ISO 8601 with a zone, or epoch seconds) or integer'),
    ('fetched_version', 'jsonpath', NULL, NULL, NULL,
     'the version in a fetched document and in a webhook''s payload; none: version'),
    ('cursor', 'jsonpath', NULL, NULL, NULL, 'the next page''s cursor in a page, for next_url'),
    ('has_more', 'jsonpath', NULL, NULL, NULL,
     'a boolean in a page: another page follows; none: while there is a cursor (or a Link rel="next")'),
    ('every', 'interval', '"1 hour"', 1, 31622400, 'how often a sweep starts (1 second to 366 days)'),
    ('since', 'since', NULL, NULL, NULL,
     'the first sweep''s watermark: objects not fetched since are current up to it; default: now (timestamp)'),
    ('share', 'number', '0.1', 0, 1, 'the part of the source''s rate_limit and max_in_flight sweeps may take'),
    ('pause_backlog', 'integer', '100', 1, 1000000, 'a sweep waits while the source has this many due jobs'),
    ('max_page_size', 'integer', '4096', 1, 65536, 'the largest page, in kB'),
    ('max_pages', 'integer', '10000', 1, 1000000, 'the most pages of one sweep')
$$;
COMMENT ON FUNCTION webhook_ingest._reconcile_keys(OUT key text, OUT type text, OUT default_value jsonb, OUT min_value numeric, OUT max_value numeric, OUT description text) IS 'the settings of reconciliation (add_source''s and alter_source''s reconcile): type, default, range';
REVOKE ALL ON FUNCTION webhook_ingest._reconcile_keys(OUT key text, OUT type text, OUT default_value jsonb, OUT min_value numeric, OUT max_value numeric, OUT description text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._reconcile_keys(OUT key text, OUT type text, OUT default_value jsonb, OUT min_value numeric, OUT max_value numeric, OUT description text) TO webhook_ingest_admin;

/*
 * A version as a number to compare (NULL: not one): microseconds since
 * 1970 for kind timestamp, the integer for kind integer.
 */
CREATE FUNCTION webhook_ingest._reconcile_version(value jsonb, kind text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'webhook_ingest_reconcile_version'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
REVOKE ALL ON FUNCTION webhook_ingest._reconcile_version(value jsonb, kind text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._reconcile_version(value jsonb, kind text) TO webhook_ingest_admin;

-- A page's URL from a template: {cursor}, {since}, {since_epoch}.
CREATE FUNCTION webhook_ingest._reconcile_url(template text, cursor text, since bigint, kind text)
RETURNS text
AS 'MODULE_PATHNAME', 'webhook_ingest_reconcile_url'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
REVOKE ALL ON FUNCTION webhook_ingest._reconcile_url(template text, cursor text, since bigint, kind text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._reconcile_url(template text, cursor text, since bigint, kind text) TO webhook_ingest_admin;

CREATE FUNCTION webhook_ingest._check_reconcile_url(url text, what text, cursor boolean)
RETURNS void
AS 'MODULE_PATHNAME', 'webhook_ingest_check_reconcile_url'
LANGUAGE C IMMUTABLE;
REVOKE ALL ON FUNCTION webhook_ingest._check_reconcile_url(url text, what text, cursor boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._check_reconcile_url(url text, what text, cursor boolean) TO webhook_ingest_admin;

-- One setting's value, alone (the cross checks are _set_reconcile's).
CREATE FUNCTION webhook_ingest._check_reconcile_setting(key text, value jsonb)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    k record;
    want text;
    n numeric;
BEGIN
    SELECT * INTO k FROM webhook_ingest._reconcile_keys() r WHERE r.key = _check_reconcile_setting.key;
    want := CASE WHEN k.type IN ('number', 'integer') THEN 'number' WHEN k.type = 'since' THEN jsonb_typeof(value)
                 ELSE 'string' END;
    IF jsonb_typeof(value) IS DISTINCT FROM want OR want NOT IN ('string', 'number') THEN
        RAISE EXCEPTION 'reconcile setting "%" must be a JSON %', key,
                        CASE WHEN k.type = 'since' THEN 'string or number' ELSE want END
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('It is %s.', webhook_ingest._clip(value::text));
    END IF;
    CASE k.type
    WHEN 'url' THEN
        PERFORM webhook_ingest._check_reconcile_url(value #>> '{}', 'reconcile ' || key, key = 'next_url');
    WHEN 'jsonpath' THEN
        BEGIN
            PERFORM (value #>> '{}')::jsonpath;
        EXCEPTION WHEN OTHERS THEN
            RAISE EXCEPTION 'reconcile setting "%" is not a jsonpath', key
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = format('%s: %s', webhook_ingest._clip(value #>> '{}'), SQLERRM);
        END;
    WHEN 'kind' THEN
        IF value #>> '{}' NOT IN ('timestamp', 'integer') THEN
            RAISE EXCEPTION 'reconcile setting "version_kind" must be "timestamp" or "integer"'
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = format('It is %s.', webhook_ingest._clip(value::text));
        END IF;
    WHEN 'interval' THEN
        BEGIN
            n := extract(epoch FROM (value #>> '{}')::interval);
        EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow OR interval_field_overflow THEN
            RAISE EXCEPTION 'reconcile setting "%" is not an interval', key
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = format('It is %s.', webhook_ingest._clip(value::text));
        END;
    WHEN 'integer', 'number' THEN
        n := value::numeric;
        IF k.type = 'integer' AND n <> trunc(n) THEN
            RAISE EXCEPTION 'reconcile setting "%" must be a whole number', key
                USING ERRCODE = 'invalid_parameter_value', DETAIL = format('It is %s.', n);
        END IF;
    ELSE
        NULL;       -- since: read with the version kind (_set_reconcile)
    END CASE;
    IF n IS NOT NULL AND (n < k.min_value OR n > k.max_value OR (k.type = 'number' AND n = k.min_value)) THEN
        RAISE EXCEPTION 'reconcile setting "%" must be %', key,
                        CASE WHEN k.type = 'number' THEN format('more than %s and at most %s', k.min_value, k.max_value)
                             WHEN k.type = 'interval' THEN format('between %s second and %s days', k.min_value,
                                                                  k.max_value / 86400)
                             ELSE format('between %s and %s', k.min_value, k.max_value) END
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('It is %s.', webhook_ingest._clip(value #>> '{}'));
    END IF;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._check_reconcile_setting(key text, value jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._check_reconcile_setting(key text, value jsonb) TO webhook_ingest_admin;

CREATE FUNCTION webhook_ingest._reconcile_settings_gone()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    DELETE FROM webhook_ingest.reconcile_objects o WHERE o.source_id = OLD.source_id;
    RETURN OLD;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._reconcile_settings_gone() FROM PUBLIC;

-- Microseconds since 1970 of a time: a timestamp version.
CREATE FUNCTION webhook_ingest._reconcile_usecs(t timestamptz)
RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (extract(epoch FROM t) * 1000000)::bigint;
REVOKE ALL ON FUNCTION webhook_ingest._reconcile_usecs(t timestamp with time zone) FROM PUBLIC;

/*
 * End the sweep under way: completed (the watermark moves to the newest
 * version it listed, for timestamps no later than its start), failed (gave
 * up a page after max_attempts) or reset (the settings changed); the next
 * starts at next_at.
 */
CREATE FUNCTION webhook_ingest._reconcile_end_sweep(source_id integer, how text, next_at timestamptz)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
UPDATE webhook_ingest.reconcile_sweeps sw
   SET watermark = CASE WHEN how = 'completed'
                        THEN greatest(sw.watermark,
                                      CASE WHEN r.version_kind = 'timestamp'
                                           THEN least(sw.sweep_max, webhook_ingest._reconcile_usecs(sw.started_at))
                                           ELSE sw.sweep_max END)
                        ELSE sw.watermark END,
       last_started_at = CASE WHEN how = 'completed' THEN sw.started_at ELSE sw.last_started_at END,
       last_completed_at = CASE WHEN how = 'completed' THEN now() ELSE sw.last_completed_at END,
       last_pages = CASE WHEN how = 'completed' THEN sw.pages ELSE sw.last_pages END,
       last_listed = CASE WHEN how = 'completed' THEN sw.listed ELSE sw.last_listed END,
       last_changed = CASE WHEN how = 'completed' THEN sw.changed ELSE sw.last_changed END,
       last_missed = CASE WHEN how = 'completed' THEN sw.missed ELSE sw.last_missed END,
       sweeps = sw.sweeps + (how = 'completed')::integer,
       sweeps_failed = sw.sweeps_failed + (how = 'failed')::integer,
       page_url = NULL, started_at = NULL, pages = 0, recent_pages = '{}', sweep_max = NULL,
       listed = 0, changed = 0, missed = 0, attempts = 0, leased_until = NULL, next_attempt_at = next_at
  FROM webhook_ingest.reconcile_settings r
 WHERE r.source_id = sw.source_id AND sw.source_id = _reconcile_end_sweep.source_id
$$;
REVOKE ALL ON FUNCTION webhook_ingest._reconcile_end_sweep(source_id integer, how text, next_at timestamp with time zone) FROM PUBLIC;

/*
 * Set (settings: a JSON object; a key given null goes back to its default)
 * or drop a source's reconciliation.  A change of what the list is (its URLs,
 * paths or version kind) starts the sweep under way over; one of since moves
 * the watermark.  SECURITY DEFINER: the only writer of the tables above, for
 * the admins who may call add_source and alter_source.
 */
CREATE FUNCTION webhook_ingest._set_reconcile(source text, settings jsonb, drop_it boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    sid integer;
    cur webhook_ingest.reconcile_settings;
    had boolean;
    merged jsonb;
    r webhook_ingest.reconcile_settings;
    bad text;
    list_keys text[] := '{url,next_url,items,id,version,version_kind,cursor,has_more}';
BEGIN
    SELECT s.id INTO sid FROM webhook_ingest.sources s WHERE s.name = _set_reconcile.source;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'source "%" does not exist', webhook_ingest._clip(source) USING ERRCODE = 'undefined_object';
    END IF;
    IF drop_it THEN
        DELETE FROM webhook_ingest.reconcile_settings x WHERE x.source_id = sid;
        RETURN;
    END IF;
    IF jsonb_typeof(settings) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'reconcile must be a JSON object of settings'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('The settings are %s.', (SELECT string_agg(k.key, ', ') FROM webhook_ingest._reconcile_keys() k));
    END IF;
    SELECT e.key INTO bad FROM jsonb_each(settings) e
     WHERE e.key NOT IN (SELECT k.key FROM webhook_ingest._reconcile_keys() k) LIMIT 1;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'unknown reconcile setting "%"', webhook_ingest._clip(bad)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('The settings are %s.', (SELECT string_agg(k.key, ', ') FROM webhook_ingest._reconcile_keys() k));
    END IF;
    PERFORM webhook_ingest._check_reconcile_setting(e.key, e.value)
       FROM jsonb_each(settings) e WHERE jsonb_typeof(e.value) <> 'null' ORDER BY e.key;

    SELECT * INTO cur FROM webhook_ingest.reconcile_settings x WHERE x.source_id = sid FOR UPDATE;
    had := FOUND;
    -- defaults, then what is set now (less what goes back to its default), then what is given
    merged := (SELECT jsonb_object_agg(k.key, k.default_value) FROM webhook_ingest._reconcile_keys() k
                WHERE k.default_value IS NOT NULL)
              || (CASE WHEN had THEN jsonb_strip_nulls(to_jsonb(cur)) ELSE '{}' END
                  - ARRAY(SELECT e.key FROM jsonb_each(settings) e WHERE jsonb_typeof(e.value) = 'null'))
              || jsonb_strip_nulls(settings);
    r := jsonb_populate_record(NULL::webhook_ingest.reconcile_settings, merged - 'since' - 'source_id');
    r.source_id := sid;
    r.since := CASE WHEN jsonb_typeof(settings -> 'since') IN ('string', 'number')
                    THEN webhook_ingest._reconcile_version(settings -> 'since', r.version_kind)
                    WHEN had AND NOT settings ? 'since' AND r.version_kind = cur.version_kind THEN cur.since
                    WHEN r.version_kind = 'timestamp' THEN webhook_ingest._reconcile_usecs(now()) END;
    IF r.url IS NULL THEN
        RAISE EXCEPTION 'reconcile needs a url: the first page of a sweep' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (r.next_url IS NULL) <> (r.cursor IS NULL) THEN
        RAISE EXCEPTION 'reconcile settings "next_url" and "cursor" go together'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Pages are found either by a cursor in the page, put into next_url, or by the response''s Link header (neither set).';
    END IF;
    IF jsonb_typeof(settings -> 'since') IN ('string', 'number') AND r.since IS NULL THEN
        RAISE EXCEPTION 'reconcile setting "since" is not a version of kind %', r.version_kind
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('It is %s.', webhook_ingest._clip((settings -> 'since')::text)),
                  HINT = 'A timestamp is an ISO 8601 time with a zone (or a date), or a number of seconds since 1970.';
    END IF;
    IF r.version_kind = 'integer' AND concat(r.url, r.next_url) LIKE '%{since\_epoch}%' THEN
        RAISE EXCEPTION 'the placeholder {since_epoch} needs version_kind timestamp' USING ERRCODE = 'invalid_parameter_value';
    END IF;

    INSERT INTO webhook_ingest.reconcile_settings AS x VALUES (r.*)
    ON CONFLICT (source_id) DO UPDATE
       SET url = EXCLUDED.url, next_url = EXCLUDED.next_url, items = EXCLUDED.items, id = EXCLUDED.id,
           version = EXCLUDED.version, version_kind = EXCLUDED.version_kind,
           fetched_version = EXCLUDED.fetched_version, cursor = EXCLUDED.cursor, has_more = EXCLUDED.has_more,
           every = EXCLUDED.every, since = EXCLUDED.since, share = EXCLUDED.share,
           pause_backlog = EXCLUDED.pause_backlog, max_page_size = EXCLUDED.max_page_size,
           max_pages = EXCLUDED.max_pages;
    IF NOT had THEN
        INSERT INTO webhook_ingest.reconcile_sweeps (source_id, watermark) VALUES (sid, r.since);
        RETURN;
    END IF;
    IF r.version_kind <> cur.version_kind THEN
        DELETE FROM webhook_ingest.reconcile_objects o WHERE o.source_id = sid;     -- versions of another kind
    END IF;
    IF (SELECT array_agg(e.value ORDER BY e.key) FROM jsonb_each(to_jsonb(r)) e WHERE e.key = ANY (list_keys))
       IS DISTINCT FROM
       (SELECT array_agg(e.value ORDER BY e.key) FROM jsonb_each(to_jsonb(cur)) e WHERE e.key = ANY (list_keys)) THEN
        PERFORM webhook_ingest._reconcile_end_sweep(sid, 'reset', now());
    END IF;
    IF r.since IS DISTINCT FROM cur.since THEN
        UPDATE webhook_ingest.reconcile_sweeps sw SET watermark = r.since WHERE sw.source_id = sid;
    END IF;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._set_reconcile(source text, settings jsonb, drop_it boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._set_reconcile(source text, settings jsonb, drop_it boolean) TO webhook_ingest_admin;

-- The objects a page found newer, through enqueue's upsert: jobs no webhook announced (events 0).
CREATE FUNCTION webhook_ingest._reconcile_enqueue(source text, external_ids text[],
    OUT external_id text, OUT job_id bigint, OUT outcome text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'webhook_ingest_reconcile_enqueue'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION webhook_ingest._reconcile_enqueue(source text, external_ids text[], OUT external_id text, OUT job_id bigint, OUT outcome text) FROM PUBLIC;

-- A failed page into recent_failures (no job id).
CREATE FUNCTION webhook_ingest._reconcile_failed(source text, page_url text, attempt integer, http_status integer,
                                                 error text, dead boolean)
RETURNS void
AS 'MODULE_PATHNAME', 'webhook_ingest_reconcile_failed'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION webhook_ingest._reconcile_failed(source text, page_url text, attempt integer, http_status integer, error text, dead boolean) FROM PUBLIC;

/*
 * Has the source at least n due jobs (a backlog of webhooks, or of fetches a
 * sweep already asked for)?  At most n entries of queue_due read.  PL/pgSQL:
 * inlined, n would be an outer column in a LIMIT.
 */
CREATE FUNCTION webhook_ingest._reconcile_backlogged(source text, n integer)
RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN (SELECT count(*) FROM (SELECT FROM webhook_ingest.queue q
                                   WHERE q.source = _reconcile_backlogged.source AND q.state = 'pending'
                                     AND q.next_attempt_at <= now()
                                   LIMIT n) due) >= n;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._reconcile_backlogged(source text, n integer) FROM PUBLIC;

/*
 * Claim the pages due now, at most max_pages, one per source (a sweep's
 * pages follow each other: the next URL is in the page before), each leased
 * like a job (webhook_ingest.lease_timeout, at least the source's timeout
 * plus 10 s); a sweep that is due starts here, at its first page.  Due: not
 * paused, the sweep's time (its schedule, or the page's back-off) has come,
 * no lease held, and fewer than pause_backlog due jobs of the source.
 * sources: the sources the fetcher has room for (its rate and in-flight
 * budget, at the reconciliation share); NULL: any.
 */
CREATE FUNCTION webhook_ingest._reconcile_claim(sources text[] DEFAULT NULL, max_pages integer DEFAULT 16,
    OUT source text, OUT url text, OUT page integer, OUT attempt integer, OUT lease_until timestamptz)
RETURNS SETOF record
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
WITH due AS (
    SELECT sw.source_id
      FROM webhook_ingest.reconcile_sweeps sw
      JOIN webhook_ingest.reconcile_settings r ON r.source_id = sw.source_id
      JOIN webhook_ingest.sources s ON s.id = sw.source_id
     WHERE NOT s.paused
       AND (_reconcile_claim.sources IS NULL OR s.name = ANY (_reconcile_claim.sources))
       AND sw.next_attempt_at <= now()
       AND (sw.leased_until IS NULL OR sw.leased_until <= now())
       AND NOT webhook_ingest._reconcile_backlogged(s.name, r.pause_backlog)
     ORDER BY sw.next_attempt_at
     LIMIT _reconcile_claim.max_pages
       FOR NO KEY UPDATE OF sw SKIP LOCKED)
UPDATE webhook_ingest.reconcile_sweeps sw
   SET page_url = coalesce(sw.page_url, webhook_ingest._reconcile_url(r.url, NULL, sw.watermark, r.version_kind)),
       started_at = coalesce(sw.started_at, now()),
       leased_until = now() + greatest(current_setting('webhook_ingest.lease_timeout')::interval,
                                       make_interval(secs => s.timeout_ms / 1000.0 + 10))
  FROM due, webhook_ingest.reconcile_settings r, webhook_ingest.sources s
 WHERE sw.source_id = due.source_id AND r.source_id = sw.source_id AND s.id = sw.source_id
RETURNING s.name, sw.page_url, sw.pages + 1, sw.attempts + 1, sw.leased_until
$$;
COMMENT ON FUNCTION webhook_ingest._reconcile_claim(sources text[], max_pages integer, OUT source text, OUT url text, OUT page integer, OUT attempt integer, OUT lease_until timestamp with time zone) IS 'the fetcher''s claim of due list pages (one per source), leased; sources: those with budget now (NULL: any)';
REVOKE ALL ON FUNCTION webhook_ingest._reconcile_claim(sources text[], max_pages integer, OUT source text, OUT url text, OUT page integer, OUT attempt integer, OUT lease_until timestamp with time zone) FROM PUBLIC;

-- When the next page is due (or a lease ends): the fetcher's timer; NULL: no sweep.
CREATE FUNCTION webhook_ingest._reconcile_wake_at()
RETURNS timestamptz
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
RETURN (SELECT min(greatest(sw.next_attempt_at, sw.leased_until))
          FROM webhook_ingest.reconcile_sweeps sw JOIN webhook_ingest.sources s ON s.id = sw.source_id
         WHERE NOT s.paused);
REVOKE ALL ON FUNCTION webhook_ingest._reconcile_wake_at() FROM PUBLIC;

-- The usual back-off of a failed attempt (webhook_ingest.backoff_base doubling up to backoff_max, half to all of it).
CREATE FUNCTION webhook_ingest._reconcile_backoff(attempt integer)
RETURNS interval
LANGUAGE sql VOLATILE
RETURN least(current_setting('webhook_ingest.backoff_base')::interval * power(2, least(attempt - 1, 40)),
             current_setting('webhook_ingest.backoff_max')::interval) * (0.5 + 0.5 * random());
REVOKE ALL ON FUNCTION webhook_ingest._reconcile_backoff(attempt integer) FROM PUBLIC;

/*
 * Record a failed page: retried after the back-off (or the Retry-After, if
 * longer), and after the source's max_attempts the sweep gives up (the
 * next one starts over at its schedule, from the same watermark: no page is
 * skipped).  Into last_error and recent_failures.  'retry' or 'failed'.
 */
CREATE FUNCTION webhook_ingest._reconcile_fail(source text, source_id integer, reason text, status integer,
                                               retry_after interval)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    sw webhook_ingest.reconcile_sweeps;
    r webhook_ingest.reconcile_settings;
    max_attempts integer;
    wait interval;
    msg text;
BEGIN
    SELECT * INTO sw FROM webhook_ingest.reconcile_sweeps x WHERE x.source_id = _reconcile_fail.source_id;
    SELECT * INTO r FROM webhook_ingest.reconcile_settings x WHERE x.source_id = _reconcile_fail.source_id;
    SELECT s.max_attempts INTO max_attempts FROM webhook_ingest.sources s WHERE s.id = _reconcile_fail.source_id;
    wait := greatest(webhook_ingest._reconcile_backoff(sw.attempts + 1), retry_after);
    msg := format('page %s: %s', sw.pages + 1, left(reason, 500));
    PERFORM webhook_ingest._reconcile_failed(source, sw.page_url, sw.attempts + 1, status, msg,
                                             sw.attempts + 1 >= max_attempts);
    UPDATE webhook_ingest.reconcile_sweeps x
       SET attempts = x.attempts + 1, last_error = msg, last_status = status, last_error_at = now(),
           leased_until = NULL, next_attempt_at = now() + wait
     WHERE x.source_id = _reconcile_fail.source_id;
    IF sw.attempts + 1 < max_attempts THEN
        RETURN 'retry';
    END IF;
    PERFORM webhook_ingest._reconcile_end_sweep(source_id, 'failed', greatest(sw.started_at + r.every, now() + wait));
    RETURN 'failed';
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._reconcile_fail(source text, source_id integer, reason text, status integer, retry_after interval) FROM PUBLIC;

-- A page's body as JSON: at most max_page_size kB, UTF-8, JSON; else an ERROR that says which.
CREATE FUNCTION webhook_ingest._reconcile_parse(body bytea, max_page_size integer)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF octet_length(body) > max_page_size::bigint * 1024 THEN
        RAISE EXCEPTION 'the page is % bytes, over max_page_size (% kB)', octet_length(body), max_page_size
            USING ERRCODE = 'program_limit_exceeded';
    END IF;
    RETURN convert_from(coalesce(body, ''), 'UTF8')::jsonb;
EXCEPTION WHEN program_limit_exceeded THEN
    RAISE;
WHEN OTHERS THEN
    RAISE EXCEPTION 'the page is not JSON: %', left(SQLERRM, 200) USING ERRCODE = 'invalid_text_representation';
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._reconcile_parse(body bytea, max_page_size integer) FROM PUBLIC;

/*
 * The items of a page: each one's external id and version, in page order;
 * an item without either refuses the page (ERROR).  A page whose list is
 * missing (items ends in [*] and what is before it is not there) too.
 */
CREATE FUNCTION webhook_ingest._reconcile_items(page jsonb, r webhook_ingest.reconcile_settings,
                                                OUT ids text[], OUT versions bigint[])
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    no_id bigint;
    no_version bigint;
    raw jsonb;
BEGIN
    SELECT array_agg(x.id ORDER BY x.ord), array_agg(x.v ORDER BY x.ord),
           min(x.ord) FILTER (WHERE x.id IS NULL), min(x.ord) FILTER (WHERE x.v IS NULL)
      INTO ids, versions, no_id, no_version
      FROM (SELECT t.ord,
                   CASE WHEN jsonb_typeof(i.id) IN ('string', 'number') THEN nullif(i.id #>> '{}', '') END AS id,
                   webhook_ingest._reconcile_version(i.version, r.version_kind) AS v
              FROM jsonb_path_query(page, r.items, silent => true) WITH ORDINALITY AS t(item, ord)
             CROSS JOIN LATERAL (SELECT jsonb_path_query_first(t.item, r.id, silent => true) AS id,
                                        jsonb_path_query_first(t.item, r.version, silent => true) AS version) i) x;
    IF no_id IS NOT NULL THEN
        RAISE EXCEPTION 'item % of the page has no id at %', no_id, r.id
            USING ERRCODE = 'invalid_parameter_value', HINT = 'An id is a JSON string (not empty) or number.';
    END IF;
    IF no_version IS NOT NULL THEN
        raw := jsonb_path_query_first(jsonb_path_query_array(page, r.items, silent => true) -> (no_version::integer - 1),
                                      r.version, silent => true);
        RAISE EXCEPTION 'item % of the page (id "%") has no % version at %', no_version,
                        webhook_ingest._clip(ids[no_version]), r.version_kind, r.version
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = CASE WHEN raw IS NULL THEN 'There is nothing there.'
                                ELSE format('It is %s.', webhook_ingest._clip(raw::text)) END;
    END IF;
    IF ids IS NULL AND r.items::text LIKE '%[*]'
       AND NOT jsonb_path_exists(page, left(r.items::text, -3)::jsonpath, silent => true) THEN
        RAISE EXCEPTION 'the page has no list at %', r.items USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._reconcile_items(page jsonb, r webhook_ingest.reconcile_settings, OUT ids text[], OUT versions bigint[]) FROM PUBLIC;

/*
 * The page's items newer than the copy last fetched, enqueued (as jobs no
 * webhook announced, _reconcile_enqueue) and their listed version kept.
 * Returns how many items, how many changed (newer than the watermark the
 * sweep started from), how many missed (enqueued with no job active: no
 * webhook had announced them) and the newest version listed.
 */
CREATE FUNCTION webhook_ingest._reconcile_list(source text, r webhook_ingest.reconcile_settings, watermark bigint,
                                               page jsonb, OUT items integer, OUT changed integer,
                                               OUT missed integer, OUT newest bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    listed record;
    newer text[];
    newer_versions bigint[];
BEGIN
    listed := webhook_ingest._reconcile_items(page, r);
    -- each object once, at the newest version the page lists
    WITH page_items AS (SELECT p.id, max(p.v) AS v FROM unnest(listed.ids, listed.versions) AS p(id, v) GROUP BY p.id)
    SELECT count(*) FILTER (WHERE p.v > coalesce(_reconcile_list.watermark, (-9223372036854775807 - 1)::bigint)),
           max(p.v),
           array_agg(p.id ORDER BY p.id) FILTER (WHERE p.v > coalesce(o.version, r.since, (-9223372036854775807 - 1)::bigint)),
           array_agg(p.v ORDER BY p.id) FILTER (WHERE p.v > coalesce(o.version, r.since, (-9223372036854775807 - 1)::bigint))
      INTO changed, newest, newer, newer_versions
      FROM page_items p
      LEFT JOIN webhook_ingest.reconcile_objects o ON o.source_id = r.source_id AND o.external_id = p.id;
    items := coalesce(cardinality(listed.ids), 0);
    missed := 0;
    IF newer IS NULL THEN
        RETURN;
    END IF;
    SELECT count(*) FILTER (WHERE e.outcome = 'queued') INTO missed
      FROM webhook_ingest._reconcile_enqueue(source, newer) e;
    INSERT INTO webhook_ingest.reconcile_objects AS o (source_id, external_id, listed)
    SELECT r.source_id, n.id, n.v FROM unnest(newer, newer_versions) AS n(id, v)
    ON CONFLICT (source_id, external_id) DO UPDATE SET listed = greatest(o.listed, EXCLUDED.listed);
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._reconcile_list(source text, r webhook_ingest.reconcile_settings, watermark bigint, page jsonb, OUT items integer, OUT changed integer, OUT missed integer, OUT newest bigint) FROM PUBLIC;

-- A Link header's rel="next" target, as written (RFC 8288: <target>; rel="next" or a rel list with next).
CREATE FUNCTION webhook_ingest._reconcile_link_next(link text)
RETURNS text
LANGUAGE sql IMMUTABLE
RETURN (SELECT m[1] FROM regexp_matches(coalesce(link, ''), '<([^>]*)>([^,<]*)', 'g') AS m
         WHERE m[2] ~* '(^|;)\s*rel\s*=\s*("([^"]*\s)?next(\s[^"]*)?"|next)\s*(;|$)'
         LIMIT 1);
REVOKE ALL ON FUNCTION webhook_ingest._reconcile_link_next(link text) FROM PUBLIC;

/*
 * The page after this one, or NULL when this was the last: from the cursor
 * (next_url) or the Link header, refused (ERROR) when it leaves the list's
 * origin, is one this sweep fetched already (a cursor that repeats) or
 * would pass max_pages.
 */
CREATE FUNCTION webhook_ingest._reconcile_next_page(r webhook_ingest.reconcile_settings,
                                                    sw webhook_ingest.reconcile_sweeps, page jsonb, link text,
                                                    items integer)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    more boolean := CASE WHEN r.has_more IS NOT NULL
                         THEN jsonb_path_query_first(page, r.has_more, silent => true) = 'true'::jsonb END;
    cursor_value jsonb;
    target text;
    next_page text;
    origin text := lower(substring(sw.page_url FROM '^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*'));
BEGIN
    IF more IS FALSE OR (more IS NULL AND items = 0) THEN
        RETURN NULL;
    END IF;
    IF r.next_url IS NOT NULL THEN
        cursor_value := jsonb_path_query_first(page, r.cursor, silent => true);
        IF jsonb_typeof(cursor_value) NOT IN ('string', 'number') OR cursor_value IS NULL THEN
            IF more THEN
                RAISE EXCEPTION 'the page says more follow but has no cursor at %', r.cursor
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            RETURN NULL;
        END IF;
        next_page := webhook_ingest._reconcile_url(r.next_url, cursor_value #>> '{}', sw.watermark, r.version_kind);
    ELSE
        target := webhook_ingest._reconcile_link_next(link);
        IF target IS NULL THEN
            IF more THEN
                RAISE EXCEPTION 'the page says more follow but its response has no Link rel="next"'
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            RETURN NULL;
        END IF;
        next_page := CASE WHEN target ~* '^https?://' THEN target
                          WHEN target LIKE '/%' AND target NOT LIKE '//%' THEN substring(sw.page_url FROM '^[^:]*://[^/?#]*') || target
                          WHEN target LIKE '?%' THEN split_part(sw.page_url, '?', 1) || target END;
        IF next_page IS NULL OR next_page !~ '^[!-~]+$' THEN
            RAISE EXCEPTION 'the Link rel="next" target "%" is not an http(s) URL, an absolute path or a query',
                            webhook_ingest._clip(target)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    IF lower(substring(next_page FROM '^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*')) IS DISTINCT FROM origin THEN
        RAISE EXCEPTION 'the next page "%" leaves the list''s origin %', webhook_ingest._clip(next_page), origin
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Pages are fetched with the source''s headers: only from the origin of reconcile url.';
    END IF;
    IF next_page = sw.page_url OR hashtextextended(next_page, 0) = ANY (sw.recent_pages) THEN
        RAISE EXCEPTION 'the cursor repeats: the next page is one this sweep fetched already'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('The next page is "%s".', webhook_ingest._clip(next_page));
    END IF;
    IF sw.pages + 1 >= r.max_pages THEN
        RAISE EXCEPTION 'the sweep reached max_pages (%)', r.max_pages USING ERRCODE = 'program_limit_exceeded';
    END IF;
    RETURN next_page;
END
$fn$;
REVOKE ALL ON FUNCTION webhook_ingest._reconcile_next_page(r webhook_ingest.reconcile_settings, sw webhook_ingest.reconcile_sweeps, page jsonb, link text, items integer) FROM PUBLIC;

/*
 * A fetched list page, the apply worker's call, inside its transaction:
 * source, the page's URL (as _reconcile_claim gave it), the HTTP status,
 * the Link header (several joined with ", "; NULL: none), the body as
 * received; error: why the transfer failed (no status, or cut off at the
 * size limit); retry_after: the response's Retry-After.  Runs no user code.
 * A good page enqueues what it lists newer than the copy last fetched and
 * moves the cursor on (or ends the sweep); a bad one changes nothing but
 * its attempt count, its back-off and last_error (all of its work is
 * undone, so nothing is lost and it is retried, never skipped).  Returns
 * next (another page is due), done (the sweep is complete), retry (the
 * page failed: due again after the back-off), failed (it failed
 * max_attempts times: the sweep gave up) or stale (not the page due: a
 * result for an older lease, or reconciliation was dropped; ignored).
 */
CREATE FUNCTION webhook_ingest._reconcile_page(source text, url text, status integer, link text, body bytea,
                                               error text DEFAULT NULL, retry_after interval DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    r webhook_ingest.reconcile_settings;
    sw webhook_ingest.reconcile_sweeps;
    page jsonb;
    got record;
    next_page text;
    msg text;
    code text;
BEGIN
    SELECT x.* INTO sw FROM webhook_ingest.reconcile_sweeps x JOIN webhook_ingest.sources s ON s.id = x.source_id
     WHERE s.name = _reconcile_page.source FOR NO KEY UPDATE OF x;
    IF NOT FOUND OR sw.page_url IS DISTINCT FROM url THEN
        RETURN 'stale';
    END IF;
    SELECT x.* INTO r FROM webhook_ingest.reconcile_settings x WHERE x.source_id = sw.source_id;
    IF error IS NOT NULL OR status IS NULL OR status NOT BETWEEN 200 AND 299 THEN
        RETURN webhook_ingest._reconcile_fail(source, sw.source_id,
                                              coalesce(left(error, 500), format('HTTP status %s', status)),
                                              status, retry_after);
    END IF;
    BEGIN
        page := webhook_ingest._reconcile_parse(body, r.max_page_size);
        got := webhook_ingest._reconcile_list(source, r, sw.watermark, page);
        next_page := webhook_ingest._reconcile_next_page(r, sw, page, link, got.items);
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, code = RETURNED_SQLSTATE;
        RETURN webhook_ingest._reconcile_fail(source, sw.source_id, format('%s (SQLSTATE %s)', msg, code), status, NULL);
    END;
    UPDATE webhook_ingest.reconcile_sweeps x
       SET page_url = next_page, pages = x.pages + 1,
           recent_pages = (x.recent_pages || hashtextextended(x.page_url, 0))[greatest(1, cardinality(x.recent_pages) - 14):],
           sweep_max = greatest(x.sweep_max, got.newest),
           listed = x.listed + got.items, changed = x.changed + got.changed, missed = x.missed + got.missed,
           total_listed = x.total_listed + got.items, total_changed = x.total_changed + got.changed,
           total_missed = x.total_missed + got.missed,
           attempts = 0, leased_until = NULL, next_attempt_at = now()
     WHERE x.source_id = sw.source_id;
    IF next_page IS NOT NULL THEN
        RETURN 'next';
    END IF;
    PERFORM webhook_ingest._reconcile_end_sweep(sw.source_id, 'completed', greatest(sw.started_at + r.every, now()));
    RETURN 'done';
END
$fn$;
COMMENT ON FUNCTION webhook_ingest._reconcile_page(source text, url text, status integer, link text, body bytea, error text, retry_after interval) IS 'a fetched list page (the apply worker''s call): enqueues what it lists newer than the copy last fetched and moves the sweep on; next, done, retry, failed or stale';
REVOKE ALL ON FUNCTION webhook_ingest._reconcile_page(source text, url text, status integer, link text, body bytea, error text, retry_after interval) FROM PUBLIC;

/*
 * Called by the completion (mark_done) of a job of a reconciling source,
 * before the job leaves the queue, in the job's subtransaction, with the
 * fetched document (NULL: the object is gone).  The copy now fetched is at
 * least: the document's version, the webhook payload's (fetched_version,
 * or version), and, when no webhook came while it ran (refetch), the
 * version a sweep listed before it started.  No ERROR for what the
 * upstream sent: a value that is no version is no version.  PL/pgSQL, its
 * plans kept by the session, and no SET clause (a GUC saved and restored at
 * every call): it is called at every completion of a reconciling source,
 * by the worker, whose search_path is its own.
 */
CREATE FUNCTION webhook_ingest._reconcile_fetched(job_id bigint, document jsonb)
RETURNS void
LANGUAGE plpgsql
AS $fn$
DECLARE
    j record;
BEGIN
    SELECT r.source_id, q.external_id, q.refetch,
           greatest(webhook_ingest._reconcile_version(
                        jsonb_path_query_first(document, coalesce(r.fetched_version, r.version), silent => true),
                        r.version_kind),
                    webhook_ingest._reconcile_version(
                        jsonb_path_query_first(q.payload, coalesce(r.fetched_version, r.version), silent => true),
                        r.version_kind)) AS seen
      INTO j
      FROM webhook_ingest.queue q
      JOIN webhook_ingest.sources s ON s.name = q.source
      JOIN webhook_ingest.reconcile_settings r ON r.source_id = s.id
     WHERE q.id = _reconcile_fetched.job_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE webhook_ingest.reconcile_objects o
       SET version = greatest(o.version, j.seen, CASE WHEN NOT j.refetch THEN o.listed END),
           listed = CASE WHEN j.refetch THEN o.listed END
     WHERE o.source_id = j.source_id AND o.external_id = j.external_id;
    IF NOT FOUND AND j.seen IS NOT NULL THEN
        INSERT INTO webhook_ingest.reconcile_objects AS o (source_id, external_id, version)
        VALUES (j.source_id, j.external_id, j.seen)
        ON CONFLICT (source_id, external_id) DO UPDATE SET version = greatest(o.version, EXCLUDED.version);
    END IF;
END
$fn$;
COMMENT ON FUNCTION webhook_ingest._reconcile_fetched(job_id bigint, document jsonb) IS 'a job of a reconciling source completed (mark_done): the version of the copy now fetched';
REVOKE ALL ON FUNCTION webhook_ingest._reconcile_fetched(job_id bigint, document jsonb) FROM PUBLIC;

CREATE FUNCTION webhook_ingest._reconcile_stats(
    OUT source text, OUT state text, OUT sweep_started_at timestamptz, OUT page integer,
    OUT next_page_at timestamptz, OUT attempts integer, OUT last_error text, OUT last_error_at timestamptz,
    OUT last_sweep_at timestamptz, OUT last_sweep_took interval, OUT lag interval, OUT last_pages integer,
    OUT last_listed integer, OUT last_changed integer, OUT last_missed integer, OUT last_missed_rate numeric,
    OUT sweeps bigint, OUT sweeps_failed bigint, OUT listed bigint, OUT changed bigint, OUT missed bigint,
    OUT missed_rate numeric, OUT reconciled_jobs bigint)
RETURNS SETOF record
LANGUAGE sql STABLE SECURITY DEFINER ROWS 10
SET search_path = pg_catalog, pg_temp
AS $$
SELECT s.name,
       CASE WHEN s.paused THEN 'paused'
            WHEN sw.leased_until > now() THEN 'fetching'
            WHEN webhook_ingest._reconcile_backlogged(s.name, r.pause_backlog) THEN 'backlogged'
            WHEN sw.attempts > 0 THEN 'retrying'
            WHEN sw.page_url IS NOT NULL THEN 'sweeping'
            ELSE 'idle' END,
       sw.started_at,
       CASE WHEN sw.page_url IS NOT NULL THEN sw.pages + 1 END,
       sw.next_attempt_at,
       sw.attempts,
       sw.last_error,
       sw.last_error_at,
       sw.last_completed_at,
       sw.last_completed_at - sw.last_started_at,
       now() - sw.last_started_at,
       sw.last_pages, sw.last_listed, sw.last_changed, sw.last_missed,
       round(sw.last_missed::numeric / nullif(sw.last_changed, 0), 4),
       sw.sweeps, sw.sweeps_failed, sw.total_listed, sw.total_changed, sw.total_missed,
       round(sw.total_missed::numeric / nullif(sw.total_changed, 0), 4),
       (SELECT count(*) FROM webhook_ingest.queue q
         WHERE q.source = s.name AND q.state = ANY ('{pending,running}'::webhook_ingest.job_state[]) AND q.events = 0)
  FROM webhook_ingest.reconcile_sweeps sw
  JOIN webhook_ingest.reconcile_settings r ON r.source_id = sw.source_id
  JOIN webhook_ingest.sources s ON s.id = sw.source_id
$$;
REVOKE ALL ON FUNCTION webhook_ingest._reconcile_stats(OUT source text, OUT state text, OUT sweep_started_at timestamp with time zone, OUT page integer, OUT next_page_at timestamp with time zone, OUT attempts integer, OUT last_error text, OUT last_error_at timestamp with time zone, OUT last_sweep_at timestamp with time zone, OUT last_sweep_took interval, OUT lag interval, OUT last_pages integer, OUT last_listed integer, OUT last_changed integer, OUT last_missed integer, OUT last_missed_rate numeric, OUT sweeps bigint, OUT sweeps_failed bigint, OUT listed bigint, OUT changed bigint, OUT missed bigint, OUT missed_rate numeric, OUT reconciled_jobs bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._reconcile_stats(OUT source text, OUT state text, OUT sweep_started_at timestamp with time zone, OUT page integer, OUT next_page_at timestamp with time zone, OUT attempts integer, OUT last_error text, OUT last_error_at timestamp with time zone, OUT last_sweep_at timestamp with time zone, OUT last_sweep_took interval, OUT lag interval, OUT last_pages integer, OUT last_listed integer, OUT last_changed integer, OUT last_missed integer, OUT last_missed_rate numeric, OUT sweeps bigint, OUT sweeps_failed bigint, OUT listed bigint, OUT changed bigint, OUT missed bigint, OUT missed_rate numeric, OUT reconciled_jobs bigint) TO webhook_ingest_admin;
GRANT EXECUTE ON FUNCTION webhook_ingest._reconcile_stats(OUT source text, OUT state text, OUT sweep_started_at timestamp with time zone, OUT page integer, OUT next_page_at timestamp with time zone, OUT attempts integer, OUT last_error text, OUT last_error_at timestamp with time zone, OUT last_sweep_at timestamp with time zone, OUT last_sweep_took interval, OUT lag interval, OUT last_pages integer, OUT last_listed integer, OUT last_changed integer, OUT last_missed integer, OUT last_missed_rate numeric, OUT sweeps bigint, OUT sweeps_failed bigint, OUT listed bigint, OUT changed bigint, OUT missed bigint, OUT missed_rate numeric, OUT reconciled_jobs bigint) TO webhook_ingest_monitor;

CREATE VIEW webhook_ingest.reconcile_stats AS SELECT * FROM webhook_ingest._reconcile_stats();
COMMENT ON VIEW webhook_ingest.reconcile_stats IS 'per reconciling source: the sweep under way (state, page, next_page_at, attempts, last_error), the last complete sweep (when, how long, lag: changes older than this were looked for; listed, changed, missed: changed objects no webhook announced, and their rate), the totals, and reconciled_jobs: active jobs no webhook announced';
GRANT SELECT ON TABLE webhook_ingest.reconcile_stats TO webhook_ingest_admin;
GRANT SELECT ON TABLE webhook_ingest.reconcile_stats TO webhook_ingest_monitor;

CREATE TRIGGER reconcile_settings_gone AFTER DELETE ON webhook_ingest.reconcile_settings FOR EACH ROW EXECUTE FUNCTION webhook_ingest._reconcile_settings_gone();

/* ======================================================================
 * What pg_dump keeps: the tables (and sequences) that hold users' data
 * and settings.  The rest of the schema is made by CREATE EXTENSION.
 */
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.sources', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.sources_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.source_tls_keys', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.queue', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.jobs_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.documents', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.event_ledger', '');
-- (a dump taken during the move of 0.9.0's ledger keeps the ids not moved yet)
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.event_ledger_090', '');
-- 0.5.0's jobs table, as 0.4.0 registered it (its done rows are history, not kept)
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.jobs_legacy',
    $$WHERE state OPERATOR(pg_catalog.<>) 'done'::webhook_ingest.job_state$$);
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.jobs_legacy_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.reconcile_settings', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.reconcile_sweeps', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.reconcile_objects', '');
