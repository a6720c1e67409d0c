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

/* ==== issue 30: reconciliation ==== */

/*
 * Reconciliation: a source may page its sender's list endpoint on a
 * schedule and enqueue each listed object whose version is newer than the
 * copy last fetched, as a job no webhook announced (events 0).  Off unless
 * a source configures it (add_source's and alter_source's reconcile, a JSON
 * object of settings: _reconcile_keys lists them).
 *
 *   reconcile_settings  a source's settings (written by _set_reconcile only)
 *   reconcile_sweeps    one row per reconciling source: the sweep under way
 *                       (the page due next, its attempts and back-off), the
 *                       watermark ({since}), the last complete sweep and
 *                       the counts: a row, so a sweep resumes at its cursor
 *                       after a restart, a failover or an error
 *   reconcile_objects   per object of a reconciling source, the version of
 *                       the copy last fetched (and a listed version not yet
 *                       fetched)
 *
 * The worker's part (issue 30 part B): the fetcher claims due pages
 * (_reconcile_claim) within the source's budget and hands each fetched page
 * to an apply worker, which calls _reconcile_page in its transaction; a
 * completed job of a reconciling source calls _reconcile_fetched.  The
 * version rules, URLs and enqueue are C (reconcile_values.c, reconcile.c):
 * a page is the upstream's input, parsed without an ERROR path of its own.
 */

/* ---- the settings ---- */

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
COMMENT ON FUNCTION webhook_ingest._reconcile_keys() IS
    'the settings of reconciliation (add_source''s and alter_source''s reconcile): type, default, range';

CREATE TABLE webhook_ingest.reconcile_settings (
    source_id       integer PRIMARY KEY REFERENCES webhook_ingest.sources (id) ON DELETE CASCADE,
    url             text NOT NULL,
    next_url        text,
    items           jsonpath NOT NULL,
    id              jsonpath NOT NULL,
    version         jsonpath NOT NULL,
    version_kind    text NOT NULL,
    fetched_version jsonpath,
    cursor          jsonpath,
    has_more        jsonpath,
    every           interval NOT NULL,
    since           bigint,
    share           real NOT NULL,
    pause_backlog   integer NOT NULL,
    max_page_size   integer NOT NULL,
    max_pages       integer NOT NULL
);
COMMENT ON TABLE webhook_ingest.reconcile_settings IS
    'the sources that reconcile and how (_reconcile_keys); since: the first watermark as a version';

/*
 * A version as a number to compare (NULL: not one): microseconds since
 * 1970 for kind timestamp, the integer for kind integer.
 */
CREATE FUNCTION webhook_ingest._reconcile_version(value jsonb, kind text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'webhook_ingest_reconcile_version'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
-- A page's URL from a template: {cursor}, {since}, {since_epoch}.
CREATE FUNCTION webhook_ingest._reconcile_url(template text, cursor text, since bigint, kind text)
RETURNS text
AS 'MODULE_PATHNAME', 'webhook_ingest_reconcile_url'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION webhook_ingest._check_reconcile_url(url text, what text, cursor boolean)
RETURNS void
AS 'MODULE_PATHNAME', 'webhook_ingest_check_reconcile_url'
LANGUAGE C IMMUTABLE;

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

/* ---- the sweeps and the objects ---- */

CREATE TABLE webhook_ingest.reconcile_sweeps (
    source_id       integer PRIMARY KEY REFERENCES webhook_ingest.reconcile_settings (source_id) ON DELETE CASCADE,
    watermark       bigint,
    -- the sweep under way (page_url NULL: none; the next starts at next_attempt_at)
    page_url        text,
    started_at      timestamptz,
    pages           integer NOT NULL DEFAULT 0,
    recent_pages    bigint[] NOT NULL DEFAULT '{}',
    sweep_max       bigint,
    listed          integer NOT NULL DEFAULT 0,
    changed         integer NOT NULL DEFAULT 0,
    missed          integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    attempts        integer NOT NULL DEFAULT 0,
    leased_until    timestamptz,
    last_error      text,
    last_status     integer,
    last_error_at   timestamptz,
    -- the last complete sweep
    last_started_at timestamptz,
    last_completed_at timestamptz,
    last_pages      integer,
    last_listed     integer,
    last_changed    integer,
    last_missed     integer,
    -- since reconciliation was configured
    sweeps          bigint NOT NULL DEFAULT 0,
    sweeps_failed   bigint NOT NULL DEFAULT 0,
    total_listed    bigint NOT NULL DEFAULT 0,
    total_changed   bigint NOT NULL DEFAULT 0,
    total_missed    bigint NOT NULL DEFAULT 0
);
COMMENT ON TABLE webhook_ingest.reconcile_sweeps IS
    'per reconciling source: the sweep under way (page_url: the page due next, at next_attempt_at), '
    'the watermark ({since}), the last complete sweep and the counts (changed: listed newer than the watermark; '
    'missed: of those, enqueued with no job active, i.e. no webhook announced them)';
COMMENT ON COLUMN webhook_ingest.reconcile_sweeps.recent_pages IS
    'hashes of the sweep''s last 16 page URLs: a next page among them is a cursor that repeats';

/*
 * Per object of a reconciling source: version, that of the copy last
 * fetched (from the document, the webhook's payload, or the listing that
 * enqueued the fetch); listed, the newest version a sweep enqueued a fetch
 * for, until a fetch that started after it completes.  An object without
 * a row (or a version) is current up to reconcile_settings.since.  Narrow:
 * no foreign key (a check per insert); reconcile_settings_gone deletes
 * a source's rows with its settings.
 */
CREATE TABLE webhook_ingest.reconcile_objects (
    version         bigint,
    listed          bigint,
    source_id       integer NOT NULL,
    external_id     text COLLATE "C" NOT NULL,
    PRIMARY KEY (source_id, external_id)
) WITH (fillfactor = 90);
COMMENT ON TABLE webhook_ingest.reconcile_objects IS
    'per object of a reconciling source: the version of the copy last fetched, and a listed version not yet fetched';

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
CREATE TRIGGER reconcile_settings_gone
    AFTER DELETE ON webhook_ingest.reconcile_settings
    FOR EACH ROW EXECUTE FUNCTION webhook_ingest._reconcile_settings_gone();

-- Microseconds since 1970 of a time: a timestamp version.
CREATE FUNCTION webhook_ingest._reconcile_usecs(t timestamptz)
RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (extract(epoch FROM t) * 1000000)::bigint;

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

/* ---- add_source and alter_source take reconcile ---- */

DROP FUNCTION webhook_ingest.add_source(text, text, regprocedure, jsonb, integer, integer, regrole[],
                                        text, text[], interval, jsonpath, jsonpath,
                                        integer, real, integer, integer, interval, text, text, text, text);
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
COMMENT ON FUNCTION webhook_ingest.add_source(text, text, regprocedure, jsonb, integer, integer, regrole[],
                                              text, text[], interval, jsonpath, jsonpath,
                                              integer, real, integer, integer, interval, text, text, text, text,
                                              jsonb) IS
    'register an upstream API; for receive(): signature_scheme, signing_secrets and external_id_path; '
    'for the scheduler: weight, rate_limit, rate_burst, max_in_flight; keep_payloads: how long done jobs keep theirs; '
    'tls_ca, tls_client_cert and tls_client_key (PEM), proxy: how the upstream is reached; '
    'reconcile: how its list endpoint is swept for changes no webhook announced (_reconcile_keys)';

DROP FUNCTION webhook_ingest.alter_source(text, text, regprocedure, jsonb, integer, integer, boolean,
                                          regrole[], boolean, text, text[], interval, jsonpath, jsonpath,
                                          boolean, boolean, integer, real, integer, integer, boolean,
                                          interval, boolean, text, boolean, text, text, boolean,
                                          text, boolean);
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
COMMENT ON FUNCTION webhook_ingest.alter_source(text, text, regprocedure, jsonb, integer, integer, boolean,
                                                regrole[], boolean, text, text[], interval, jsonpath, jsonpath,
                                                boolean, boolean, integer, real, integer, integer, boolean,
                                                interval, boolean, text, boolean, text, text, boolean,
                                                text, boolean, jsonb, boolean) IS
    'change an upstream API; NULL arguments keep the current value (drop_signature: receive() refuses until set '
    'again; reset_limits: no rate_limit, rate_burst, max_in_flight; reset_keep_payloads: payloads dropped when done; '
    'reset_tls_ca: the system''s bundle; reset_tls_client: no client certificate; reset_proxy: webhook_ingest.proxy; '
    'reconcile: the settings given change, a key given null goes back to its default; drop_reconcile: no sweeps); '
    'ends a throttle of the source';


/* ---- the C side (reconcile.c) ---- */

-- The objects a page found newer, through enqueue's upsert: jobs no webhook announced (events 0).
CREATE FUNCTION webhook_ingest._reconcile_enqueue(source text, external_ids text[],
    OUT external_id text, OUT job_id bigint, OUT outcome text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'webhook_ingest_reconcile_enqueue'
LANGUAGE C VOLATILE;
-- A failed page into recent_failures (no job id).
CREATE FUNCTION webhook_ingest._reconcile_failed(source text, page_url text, attempt integer, http_status integer,
                                                 error text, dead boolean)
RETURNS void
AS 'MODULE_PATHNAME', 'webhook_ingest_reconcile_failed'
LANGUAGE C VOLATILE;

/* ---- which page is due: the fetcher's claim ---- */

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
COMMENT ON FUNCTION webhook_ingest._reconcile_claim(text[], integer) IS
    'the fetcher''s claim of due list pages (one per source), leased; sources: those with budget now (NULL: any)';

-- When the next page is due (or a lease ends): the fetcher's timer; NULL: no sweep.
CREATE FUNCTION webhook_ingest._reconcile_wake_at()
RETURNS timestamptz
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
RETURN (SELECT min(greatest(sw.next_attempt_at, sw.leased_until))
          FROM webhook_ingest.reconcile_sweeps sw JOIN webhook_ingest.sources s ON s.id = sw.source_id
         WHERE NOT s.paused);

/* ---- a fetched page: the apply worker's call ---- */

-- The usual back-off of a failed attempt (webhook_ingest.backoff_base doubling up to backoff_max, half to all of it).
CREATE FUNCTION webhook_ingest._reconcile_backoff(attempt integer)
RETURNS interval
LANGUAGE sql VOLATILE
RETURN least(current_setting('webhook_ingest.backoff_base')::interval * power(2, least(attempt - 1, 40)),
             current_setting('webhook_ingest.backoff_max')::interval) * (0.5 + 0.5 * random());

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

-- A Link header's rel="next" target, as written (RFC 8288: <target>; rel="next" or a rel list with next).
CREATE FUNCTION webhook_ingest._reconcile_link_next(link text)
RETURNS text
LANGUAGE sql IMMUTABLE
RETURN (SELECT m[1] FROM regexp_matches(coalesce(link, ''), '<([^>]*)>([^,<]*)', 'g') AS m
         WHERE m[2] ~* '(^|;)\s*rel\s*=\s*("([^"]*\s)?next(\s[^"]*)?"|next)\s*(;|$)'
         LIMIT 1);

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
COMMENT ON FUNCTION webhook_ingest._reconcile_page(text, text, integer, text, bytea, text, interval) IS
    'a fetched list page (the apply worker''s call): enqueues what it lists newer than the copy last fetched and '
    'moves the sweep on; next, done, retry, failed or stale';

/* ---- a completed job of a reconciling source: the version now fetched ---- */

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
COMMENT ON FUNCTION webhook_ingest._reconcile_fetched(bigint, jsonb) IS
    'a job of a reconciling source completed (mark_done): the version of the copy now fetched';

/* ---- the figures ---- */

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
CREATE VIEW webhook_ingest.reconcile_stats AS SELECT * FROM webhook_ingest._reconcile_stats();
COMMENT ON VIEW webhook_ingest.reconcile_stats IS
    'per reconciling source: the sweep under way (state, page, next_page_at, attempts, last_error), the last '
    'complete sweep (when, how long, lag: changes older than this were looked for; listed, changed, missed: changed '
    'objects no webhook announced, and their rate), the totals, and reconciled_jobs: active jobs no webhook announced';

/* ---- privileges and dumps ---- */

REVOKE ALL ON webhook_ingest.reconcile_settings, webhook_ingest.reconcile_sweeps, webhook_ingest.reconcile_objects,
              webhook_ingest.reconcile_stats FROM PUBLIC;
REVOKE ALL ON FUNCTION
    webhook_ingest._reconcile_keys(), webhook_ingest._reconcile_version(jsonb, text),
    webhook_ingest._reconcile_url(text, text, bigint, text), webhook_ingest._check_reconcile_url(text, text, boolean),
    webhook_ingest._check_reconcile_setting(text, jsonb), webhook_ingest._reconcile_settings_gone(),
    webhook_ingest._reconcile_usecs(timestamptz), webhook_ingest._reconcile_end_sweep(integer, text, timestamptz),
    webhook_ingest._set_reconcile(text, jsonb, boolean),
    webhook_ingest.add_source(text, text, regprocedure, jsonb, integer, integer, regrole[],
                              text, text[], interval, jsonpath, jsonpath,
                              integer, real, integer, integer, interval, text, text, text, text, jsonb),
    webhook_ingest.alter_source(text, text, regprocedure, jsonb, integer, integer, boolean,
                                regrole[], boolean, text, text[], interval, jsonpath, jsonpath,
                                boolean, boolean, integer, real, integer, integer, boolean,
                                interval, boolean, text, boolean, text, text, boolean,
                                text, boolean, jsonb, boolean),
    webhook_ingest._reconcile_backlogged(text, integer), webhook_ingest._reconcile_claim(text[], integer),
    webhook_ingest._reconcile_wake_at(), webhook_ingest._reconcile_backoff(integer),
    webhook_ingest._reconcile_failed(text, text, integer, integer, text, boolean),
    webhook_ingest._reconcile_enqueue(text, text[]),
    webhook_ingest._reconcile_fail(text, integer, text, integer, interval), webhook_ingest._reconcile_parse(bytea, integer),
    webhook_ingest._reconcile_items(jsonb, webhook_ingest.reconcile_settings),
    webhook_ingest._reconcile_list(text, webhook_ingest.reconcile_settings, bigint, jsonb),
    webhook_ingest._reconcile_link_next(text),
    webhook_ingest._reconcile_next_page(webhook_ingest.reconcile_settings, webhook_ingest.reconcile_sweeps, jsonb,
                                        text, integer),
    webhook_ingest._reconcile_page(text, text, integer, text, bytea, text, interval),
    webhook_ingest._reconcile_fetched(bigint, jsonb), webhook_ingest._reconcile_stats()
    FROM PUBLIC;
GRANT SELECT ON webhook_ingest.reconcile_settings, webhook_ingest.reconcile_sweeps, webhook_ingest.reconcile_objects,
                webhook_ingest.reconcile_stats TO webhook_ingest_admin;
GRANT SELECT ON webhook_ingest.reconcile_stats TO webhook_ingest_monitor;
GRANT EXECUTE ON FUNCTION
    webhook_ingest._reconcile_keys(), webhook_ingest._reconcile_version(jsonb, text),
    webhook_ingest._reconcile_url(text, text, bigint, text), webhook_ingest._check_reconcile_url(text, text, boolean),
    webhook_ingest._check_reconcile_setting(text, jsonb), webhook_ingest._set_reconcile(text, jsonb, boolean),
    webhook_ingest.add_source(text, text, regprocedure, jsonb, integer, integer, regrole[],
                              text, text[], interval, jsonpath, jsonpath,
                              integer, real, integer, integer, interval, text, text, text, text, jsonb),
    webhook_ingest.alter_source(text, text, regprocedure, jsonb, integer, integer, boolean,
                                regrole[], boolean, text, text[], interval, jsonpath, jsonpath,
                                boolean, boolean, integer, real, integer, integer, boolean,
                                interval, boolean, text, boolean, text, text, boolean,
                                text, boolean, jsonb, boolean),
    webhook_ingest._reconcile_stats()
    TO webhook_ingest_admin;
GRANT EXECUTE ON FUNCTION webhook_ingest._reconcile_stats() TO webhook_ingest_monitor;
-- pg_dump keeps the settings, the sweeps (a cursor survives a dump and restore) and the versions fetched.
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.reconcile_settings', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.reconcile_sweeps', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.reconcile_objects', '');

/* ==== issue 27: hardening, third pass ==== */

/*
 * Audit 0.10.0, third pass (test/audit/FINDINGS-0.10.0-third.md).
 *
 * 6. Nothing in the schema is executable or readable by PUBLIC: 0.8.0 made
 * _packed_jobs() without a REVOKE, so it kept a function's default ACL
 * (=X), and it admits any caller for the sources whose enqueue_roles is
 * NULL.  The jobs view calls it as its reader, who has the grant below
 * (test/sql/18_audit_third_acl lists every ACL of the schema).
 */
REVOKE ALL ON FUNCTION webhook_ingest._packed_jobs(bigint) FROM PUBLIC;

/*
 * The tables this section changes, in the order their users take them
 * (enqueue() the queue before the ledger, purge_events() its position
 * before the ledger), held to the end: catalog work, and what is bounded by
 * the dead jobs and the backlog.
 */
LOCK TABLE webhook_ingest.queue, webhook_ingest.purge_position, webhook_ingest.event_ledger IN ACCESS EXCLUSIVE MODE;

/*
 * 1. The dedup ledger could be hash-flooded.  event_ledger_once hashed its
 * keys with hashtext(), PostgreSQL's unseeded lookup3: event ids with one
 * hash code are cheap to make (test/audit/ledger_collide.c), and every
 * insert then compared its id with every colliding one (2 000 enqueues of
 * such ids: 0.3 s, then 2.2, 6.7, 12.8 s per batch).  The exclusion
 * constraint now hashes with webhook_ingest.ledger_ops: SipHash-2-4 under a
 * key of this cluster's (src/ledger_key.c), which no role but the owner may
 * read.  The index still holds 4-byte codes (no byte more per webhook), and
 * every candidate is still checked against the full id (dedup exact).
 *
 * The update is catalog work only: 0.9.0's ledger becomes event_ledger_090
 * (its file and its index as they were) and a new, empty event_ledger takes
 * the inserts.  enqueue() and receive() also check event_ledger_090 while it
 * holds ids (its relation has pages); purge_events() - which the worker
 * calls in every clean-up round - moves them into the new ledger a few pages
 * a call (those older than dedup_window are forgotten instead), then
 * truncates it.  An id is in one of the two: the move deletes and inserts
 * in one statement, and a probe of the old ledger sees a row being moved
 * until the move commits.  A fresh install has event_ledger_090 too, empty.
 */
CREATE TABLE webhook_ingest.ledger_key (
    only_row        boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    key             bytea NOT NULL CHECK (octet_length(key) = 16)
);
COMMENT ON TABLE webhook_ingest.ledger_key IS
    'the key of the dedup ledger''s hash (webhook_ingest.ledger_ops): random, made at CREATE EXTENSION, never changed';
-- 122 random bits (pg_strong_random); not dumped: a restore makes its own and builds the index with it
INSERT INTO webhook_ingest.ledger_key (key) VALUES (pg_catalog.uuid_send(pg_catalog.gen_random_uuid()));
REVOKE ALL ON webhook_ingest.ledger_key FROM PUBLIC;

CREATE FUNCTION webhook_ingest._ledger_hash(text)
RETURNS integer
AS 'MODULE_PATHNAME', 'webhook_ingest_ledger_hash'
LANGUAGE C IMMUTABLE STRICT PARALLEL RESTRICTED;
REVOKE ALL ON FUNCTION webhook_ingest._ledger_hash(text) FROM PUBLIC;
CREATE OPERATOR CLASS webhook_ingest.ledger_ops FOR TYPE text USING hash AS
    OPERATOR 1 pg_catalog.= (text, text),
    FUNCTION 1 webhook_ingest._ledger_hash(text);

ALTER TABLE webhook_ingest.event_ledger RENAME TO event_ledger_090;
ALTER INDEX webhook_ingest.event_ledger_once RENAME TO event_ledger_090_once;
COMMENT ON TABLE webhook_ingest.event_ledger_090 IS
    '0.9.0''s event ids, under an unseeded hash: moved into event_ledger by purge_events(), then truncated';
-- (0.6.0's columns, defaults and collation; a constraint of its own, on the empty table at once)
CREATE TABLE webhook_ingest.event_ledger (LIKE webhook_ingest.event_ledger_090 INCLUDING DEFAULTS)
    WITH (autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_cost_delay = 0);
ALTER TABLE webhook_ingest.event_ledger ADD CONSTRAINT event_ledger_once
    EXCLUDE USING hash (((source_id::text || ':') || event_id) webhook_ingest.ledger_ops WITH =)
    WITH (fillfactor = 100);
COMMENT ON TABLE webhook_ingest.event_ledger IS
    'event ids accepted per source (sources.id), remembered for webhook_ingest.dedup_window; received: seconds since 2000-01-01 UTC';
REVOKE ALL ON webhook_ingest.event_ledger FROM PUBLIC;
GRANT SELECT ON webhook_ingest.event_ledger TO webhook_ingest_admin;
-- (0.9.0's stays registered too: a dump taken during the move keeps the ids not moved yet)
SELECT pg_catalog.pg_extension_config_dump('webhook_ingest.event_ledger', '');
ALTER TABLE webhook_ingest.purge_position ADD COLUMN ledger_090_page bigint NOT NULL DEFAULT 0;

CREATE OR REPLACE VIEW webhook_ingest.events AS
SELECT s.name AS source, e.event_id, webhook_ingest._at(e.received) AS received_at
  FROM webhook_ingest.event_ledger e
  JOIN webhook_ingest.sources s ON s.id = e.source_id
UNION ALL
SELECT s.name, o.event_id, webhook_ingest._at(o.received)
  FROM webhook_ingest.event_ledger_090 o
  JOIN webhook_ingest.sources s ON s.id = o.source_id
UNION ALL
SELECT l.source, l.event_id, l.received_at FROM webhook_ingest.events_legacy l;

/*
 * A row of the view that is still in 0.9.0's ledger: an UPDATE or DELETE
 * through the view reaches it there too (after events_write, 0.6.0's
 * trigger, has looked in the other two: an id is in one place only).
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
CREATE TRIGGER events_write_090
    INSTEAD OF UPDATE OR DELETE ON webhook_ingest.events
    FOR EACH ROW EXECUTE FUNCTION webhook_ingest._events_write_090();

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
REVOKE ALL ON FUNCTION webhook_ingest._move_ledger_090(integer, timestamptz) FROM PUBLIC;

/*
 * purge_events: 0.6.0's walk over the ledger's pages (now _purge_ledger),
 * then a step of the move of 0.9.0's ledger (at most 25 pages a call, about
 * 2 700 ids: the worker's clean-up rounds stay short); it returns the ids
 * both looked at.
 */
ALTER FUNCTION webhook_ingest.purge_events(integer) RENAME TO _purge_ledger;
-- (called by purge_events, as its owner: no grant, not SECURITY DEFINER of its own)
ALTER FUNCTION webhook_ingest._purge_ledger(integer) SECURITY INVOKER;
REVOKE ALL ON FUNCTION webhook_ingest._purge_ledger(integer) FROM webhook_ingest_admin;
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
REVOKE ALL ON FUNCTION webhook_ingest.purge_events(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest.purge_events(integer) TO webhook_ingest_admin;

/*
 * 3. Dead jobs keep bounded storage, per object and per source.  0.9.0 kept
 * every dead job with its payload until someone retried or deleted it: each
 * new webhook for an object whose job is dead makes a new pending job (as it
 * should: a fresh webhook is tried), and when that one died too, its payload
 * stayed beside the others (8 deaths of one object, 875 kB each: 7 MB).
 *
 * - Per object: when a job dies, the object's older dead jobs go into it (the
 *   newest dead job is the one retry_dead retries anyway): their webhooks
 *   add to its events, and it keeps their newest payload if it has none.  An
 *   object has at most one dead job, but the older one keeps its row until
 *   then (the new pending job beside it).
 * - Per source: dead_payloads counts the payload bytes (uncompressed, as
 *   max_payload_size measures them: _payload_size) each source's dead jobs
 *   keep; a job that dies while its source keeps
 *   webhook_ingest.dead_payload_limit loses its payload (a counted drop:
 *   dead_payloads.dropped, and its last_error says so).
 *
 * One trigger, on the changes of state into and out of dead, keeps the count
 * (the merge's rows and revivals: retry, retry_dead); no trigger on the
 * queue's inserts and deletes, which enqueue() and the worker's completions
 * make by the thousand (a trigger's WHEN clause costs each statement about
 * 5 % of an enqueue).  What other writes change (a dead job deleted by hand,
 * drop_source, a restore) is caught up by a recount of the source's dead
 * jobs at a death when the count is ten minutes old, or a minute old and
 * over the limit.
 */
CREATE TABLE webhook_ingest.dead_payloads (
    source          text COLLATE "C" PRIMARY KEY,
    bytes           bigint NOT NULL DEFAULT 0,
    dropped         bigint NOT NULL DEFAULT 0,
    counted_at      timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE webhook_ingest.dead_payloads IS
    'per source: the payload bytes (uncompressed, as max_payload_size counts them) its dead jobs keep (recounted at counted_at), and how many payloads webhook_ingest.dead_payload_limit dropped';

-- A payload's size as max_payload_size measures it (uncompressed), however it is stored (src/enqueue.c).
CREATE FUNCTION webhook_ingest._payload_size(payload jsonb)
RETURNS bigint
AS 'MODULE_PATHNAME', 'webhook_ingest_payload_size'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- webhook_ingest.dead_payload_limit in bytes; NULL: no limit (-1).
CREATE FUNCTION webhook_ingest._dead_payload_limit()
RETURNS bigint
LANGUAGE sql STABLE
RETURN nullif(pg_catalog.pg_size_bytes(pg_catalog.current_setting('webhook_ingest.dead_payload_limit')), -1);

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

-- (the object's dead job first: the merge above and retry_dead's DISTINCT ON read it in that order)
DROP INDEX webhook_ingest.queue_dead;
CREATE INDEX queue_dead ON webhook_ingest.queue (source, external_id, finished_at)
    WHERE state = 'dead';
CREATE TRIGGER queue_dead_jobs
    BEFORE UPDATE OF state ON webhook_ingest.queue
    FOR EACH ROW WHEN ((NEW.state OPERATOR(pg_catalog.=) 'dead'::webhook_ingest.job_state)
                       IS DISTINCT FROM (OLD.state OPERATOR(pg_catalog.=) 'dead'::webhook_ingest.job_state))
    EXECUTE FUNCTION webhook_ingest._dead_jobs_count();
-- What the dead jobs of 0.9.0 keep (the trigger holds the queue's writers off until commit).
INSERT INTO webhook_ingest.dead_payloads (source, bytes)
SELECT q.source, sum(webhook_ingest._payload_size(q.payload)) FROM webhook_ingest.queue q
 WHERE q.state = 'dead' AND q.payload IS NOT NULL GROUP BY q.source;

REVOKE ALL ON webhook_ingest.dead_payloads FROM PUBLIC;
GRANT SELECT ON webhook_ingest.dead_payloads TO webhook_ingest_admin;
REVOKE ALL ON FUNCTION webhook_ingest._payload_size(jsonb), webhook_ingest._dead_payload_limit(),
                       webhook_ingest._recount_dead_payloads(text, bigint), webhook_ingest._dead_jobs_count()
    FROM PUBLIC;

/* ==== issue 28: history you can ask questions of ==== */

/*
 * 0.8.0 packed done jobs a block of 128 ids to a row of job_history_packed,
 * found by id only: a query for an object's jobs (source, external_id) or
 * for a time window on finished_at unpacked every row kept (152 ms at
 * 100 000 jobs, growing with the history).  Now each of those is an
 * index's work, in every table the jobs view reads:
 *
 *   queue         a partial index on (source, external_id) for the jobs that
 *                 are neither pending nor running (queue_active_object has
 *                 those), one on finished_at where it is set; nothing enqueue
 *                 writes (its rows have neither) touches them.
 *   job_history   a BRIN Bloom index on external_id (a btree in the overflow
 *                 table).
 *   job_history_packed  a GIN index on the row's object keys (object_keys.c:
 *                 a bucket of each job's SHA-256 key, a few dozen jobs a
 *                 bucket) with a check array in the row, and a GiST index on
 *                 each row's span of finished_at (last_finished: its latest).
 *
 * The planner hook that gave _packed_jobs() a query's id gives it the
 * query's external ids and finished_at bounds as well
 * (src/packed_jobs_planner.c), and a support function tells the planner
 * how few rows that returns.
 *
 * Rows packed before this version carry no keys: the index holds them
 * under key 0, which every lookup asks for too, and the storage round keys
 * them a batch at a time (_key_packed_rows).  Building the two indexes
 * reads no packed arrays: about a second per 10 M jobs packed.
 */

-- The keys (src/object_keys.c); _object_keys is the GIN index's expression (its cost: up to 128 digests,
-- so that the planner reads a partition through the index rather than computing them for every row).
CREATE FUNCTION webhook_ingest._object_keys(external_ids text[], bits smallint)
RETURNS integer[]
AS 'MODULE_PATHNAME', 'webhook_ingest_object_keys'
LANGUAGE C IMMUTABLE PARALLEL SAFE COST 1000;
CREATE FUNCTION webhook_ingest._object_checks(external_ids text[])
RETURNS smallint[]
AS 'MODULE_PATHNAME', 'webhook_ingest_object_checks'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

/*
 * The bits a row of a partition expected to hold `jobs` jobs is keyed at:
 * a bucket of about 24 jobs (an even number of bits, 4 to 24).
 */
CREATE FUNCTION webhook_ingest._object_bits(jobs double precision)
RETURNS smallint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN least(24, greatest(4, 2 * round(log(2.0, greatest(jobs, 1.0)::numeric / 24) / 2)))::smallint;

ALTER TABLE webhook_ingest.job_history_packed
    ADD COLUMN last_finished timestamptz,
    ADD COLUMN object_bits smallint,
    ADD COLUMN object_checks smallint[],
    ADD COLUMN errors text[];
-- (256 B a row: kept in the row, so that the rows a bucket names are told apart without reading their ids)
ALTER TABLE webhook_ingest.job_history_packed ALTER COLUMN object_checks SET STORAGE MAIN;
COMMENT ON COLUMN webhook_ingest.job_history_packed.last_finished IS
    'the latest finished_at of the row''s jobs (NULL in rows packed before 0.10.0 until keyed)';
COMMENT ON COLUMN webhook_ingest.job_history_packed.object_bits IS
    'the bits the row''s object keys are bucketed at (src/object_keys.c); NULL: not keyed yet';
COMMENT ON COLUMN webhook_ingest.job_history_packed.object_checks IS
    'the low 16 bits of each job''s object key, in id order';
COMMENT ON COLUMN webhook_ingest.job_history_packed.errors IS
    'each job''s last failed attempt''s error (NULL: none, or packed before 0.10.0)';
-- (its pending list at the least, 64 kB: the pages a list took stay in the index when it is merged, in
-- every partition, and a lookup reads the list whole)
CREATE INDEX job_history_packed_object ON webhook_ingest.job_history_packed
    USING gin (webhook_ingest._object_keys(external_ids, object_bits)) WITH (gin_pending_list_limit = 64);
CREATE INDEX job_history_packed_span ON webhook_ingest.job_history_packed
    USING gist (tstzrange(finished_at, last_finished, '[]'));

-- A done job keeps the error of its last failed attempt (for history(); the jobs view shows NULL, as before).
ALTER TABLE webhook_ingest.job_history ADD COLUMN last_error text;
ALTER TABLE webhook_ingest.job_history_overflow ADD COLUMN last_error text;
/*
 * An object's jobs not packed yet (minutes of them): a Bloom filter of each
 * range of 8 pages (about 500 jobs) of job_history, about 1.3 B a job, where
 * a btree would keep some 40 B a job until the partition is dropped or its
 * index rebuilt; a lookup reads the filters and the ranges that may hold the
 * id.  The storage round summarizes the newest ranges (_summarize_history).
 */
DO $do$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_opclass o WHERE o.opcname = 'text_bloom_ops') THEN
        CREATE INDEX job_history_object ON webhook_ingest.job_history
            USING brin (external_id text_bloom_ops (n_distinct_per_range = 500, false_positive_rate = 0.01))
            WITH (pages_per_range = 8, autosummarize = on);
    ELSE
        CREATE INDEX job_history_object ON webhook_ingest.job_history (external_id);   -- (13: no Bloom BRIN)
    END IF;
END
$do$;
CREATE INDEX job_history_overflow_object ON webhook_ingest.job_history_overflow (external_id);

/*
 * _packed_jobs with the narrowings (job_id, external_ids, finished_from,
 * finished_to: src/job_history.c) and the jobs' errors; 0.8.0's
 * _packed_jobs(job_id) goes once the view reads this one.
 */
CREATE FUNCTION webhook_ingest._packed_jobs_support(internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'webhook_ingest_packed_jobs_support'
LANGUAGE C STRICT;
CREATE FUNCTION webhook_ingest._packed_jobs(job_id bigint DEFAULT NULL, external_ids text[] DEFAULT NULL,
    finished_from timestamptz DEFAULT NULL, finished_to timestamptz DEFAULT NULL,
    OUT id bigint, OUT finished_at timestamptz, OUT created_at timestamptz, OUT started_at timestamptz,
    OUT source_id integer, OUT events integer, OUT attempts smallint, OUT last_status smallint,
    OUT external_id text, OUT last_error text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'webhook_ingest_packed_jobs'
LANGUAGE C STABLE CALLED ON NULL INPUT ROWS 1000 SUPPORT webhook_ingest._packed_jobs_support;

/*
 * The jobs view's parts gain attempt_error: the last failed attempt's error
 * (a queued job's last_error; a done job's, kept in its history row).
 * _jobs_all is their union with it, read by history(); jobs is the union
 * of their 0.5.0 columns, as before (not a view over _jobs_all: each level
 * of views is one more copy of the whole tree for the planner to make, on
 * every statement that is not prepared; the branches' sources only id and
 * name for the same reason).  _jobs_queued's filter holds for every
 * row, but spelled as two cases it lets the planner find a queued object's
 * jobs through both partial indexes (a BitmapOr).
 */
CREATE INDEX queue_settled_object ON webhook_ingest.queue (source, external_id)
    WHERE state <> ALL ('{pending,running}'::webhook_ingest.job_state[]);
CREATE INDEX queue_finished ON webhook_ingest.queue (finished_at) WHERE finished_at IS NOT NULL;
CREATE OR REPLACE VIEW webhook_ingest._jobs_queued (id, source, external_id, state, payload, events, refetch, attempts,
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
CREATE OR REPLACE VIEW webhook_ingest._jobs_finished (id, source, external_id, state, payload, events, refetch, attempts,
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
CREATE OR REPLACE VIEW webhook_ingest._jobs_packed (id, source, external_id, state, payload, events, refetch, attempts,
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
CREATE OR REPLACE VIEW webhook_ingest._jobs_unmoved (id, source, external_id, state, payload, events, refetch, attempts,
    last_error, last_status, created_at, updated_at, next_attempt_at, lease_until, worker_pid, finished_at, started_at,
    done_lsn, attempt_error)
    WITH (security_barrier) AS
SELECT l.id, l.source, l.external_id, l.state, l.payload, l.events, l.refetch, l.attempts, l.last_error,
       l.last_status, l.created_at, l.updated_at, l.next_attempt_at, l.lease_until, l.worker_pid,
       l.finished_at, l.started_at, l.done_lsn, l.last_error
  FROM webhook_ingest.jobs_legacy l
 WHERE l.id > (SELECT m.moved_upto FROM webhook_ingest.legacy_migration m)
   AND webhook_ingest._may_read_jobs(l.source);
CREATE VIEW webhook_ingest._jobs_all WITH (security_barrier) AS
SELECT * FROM webhook_ingest._jobs_queued
UNION ALL
SELECT * FROM webhook_ingest._jobs_finished
UNION ALL
SELECT * FROM webhook_ingest._jobs_packed
UNION ALL
SELECT * FROM webhook_ingest._jobs_unmoved;
COMMENT ON VIEW webhook_ingest._jobs_all IS
    'every job, with the jobs view''s columns and attempt_error (the last failed attempt''s error, done jobs'' too)';
CREATE OR REPLACE VIEW webhook_ingest.jobs WITH (security_barrier) AS
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
DROP FUNCTION webhook_ingest._packed_jobs(bigint);
-- EXPLAIN of what _packed_jobs runs for these arguments (for operators, and the plan tests)
CREATE FUNCTION webhook_ingest._packed_jobs_plan(job_id bigint DEFAULT NULL, external_ids text[] DEFAULT NULL,
    finished_from timestamptz DEFAULT NULL, finished_to timestamptz DEFAULT NULL)
RETURNS TABLE (n integer, line text)
AS 'MODULE_PATHNAME', 'webhook_ingest_packed_jobs_plan'
LANGUAGE C VOLATILE CALLED ON NULL INPUT;
REVOKE ALL ON webhook_ingest._jobs_all FROM PUBLIC;
GRANT SELECT ON webhook_ingest._jobs_all TO webhook_ingest_admin;
REVOKE ALL ON FUNCTION webhook_ingest._object_keys(text[], smallint), webhook_ingest._object_checks(text[]),
                       webhook_ingest._object_bits(double precision), webhook_ingest._packed_jobs_support(internal),
                       webhook_ingest._packed_jobs(bigint, text[], timestamptz, timestamptz),
                       webhook_ingest._packed_jobs_plan(bigint, text[], timestamptz, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest._packed_jobs_plan(bigint, text[], timestamptz, timestamptz)
    TO webhook_ingest_admin;
GRANT EXECUTE ON FUNCTION webhook_ingest._packed_jobs(bigint, text[], timestamptz, timestamptz)
    TO webhook_ingest_admin, webhook_ingest_enqueue;

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

/*
 * (Since 0.10.0 a step makes partitions only with job_history locked.)  One step of the move of 0.5.0's rows: the next n rows of jobs_legacy by
 * id, done ones to job_history (those past retention are left behind),
 * cancelled ones to the queue; when all are moved, jobs_legacy is
 * truncated (its disk back at once).  One short transaction, the worker's.
 * A step that has to make partitions of job_history for those rows makes
 * them under an ACCESS EXCLUSIVE lock on job_history taken with NOWAIT (else
 * it moves nothing and returns 0: next round).  Returns the rows looked at
 * (0: nothing left, or nothing moved now).
 */
CREATE OR REPLACE FUNCTION webhook_ingest._move_legacy_jobs(n integer)
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

DROP FUNCTION webhook_ingest._packed_partition_for(timestamptz, timestamptz);
/*
 * (0.8.0's returned a boolean: 'made' is new.)  A partition of job_history_packed with the bounds of a partition of
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
 * 0.8.0's packing, the rows keyed as they are made: their object keys'
 * bits (from how many jobs their partition is expected to hold: what the
 * one before it held, or what it holds so far), the checks, last_finished
 * and the jobs' errors.  Then rows packed before 0.10.0 are
 * keyed (a batch a round), and the BRIN indexes of job_history kept up
 * (_summarize_history, below).
 */
CREATE OR REPLACE FUNCTION webhook_ingest._pack_history(settled_before timestamptz, budget interval DEFAULT '40 ms',
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

/*
 * 0.8.0's _unfile_job: a packed job's element leaves every array of its
 * row, the checks and errors too (last_finished stays: still a bound).
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
REVOKE ALL ON FUNCTION webhook_ingest._key_packed_rows(integer) FROM PUBLIC;

/*
 * Which job each accepted event id went to, and how often it came again
 * (a duplicate): enqueue writes job_id with the event id (src/enqueue.c)
 * and counts duplicates on its row.  NULL for event ids accepted before
 * 0.10.0 (and those an INSERT into the events view or import_events
 * adds).  history() finds a job's event ids through a btree index on
 * job_id (about 25 bytes an event id: a BRIN index on received was read
 * whole for each job, 4 ms a job at 10 M ids), partial: the ids 0.9.0's
 * ledger moves over name no job.
 */
ALTER TABLE webhook_ingest.event_ledger ADD COLUMN job_id bigint, ADD COLUMN duplicates integer;
COMMENT ON COLUMN webhook_ingest.event_ledger.job_id IS
    'the job the webhook went to (NULL: accepted before 0.10.0, or not through enqueue/receive)';
COMMENT ON COLUMN webhook_ingest.event_ledger.duplicates IS
    'how many more times the event id came and was refused as a duplicate, up to 1000 (NULL: none)';
CREATE INDEX event_ledger_job ON webhook_ingest.event_ledger (job_id) WHERE job_id IS NOT NULL;

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
REVOKE ALL ON FUNCTION webhook_ingest.history(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_ingest.history(text, text) TO webhook_ingest_admin;

/* ==== issue 29: one hand-kept schema file ==== */

/*
 * 0.5.0's ledger goes.  Since 0.6.0 it was events_legacy, which enqueue()
 * also checked until purge_events() truncated it (once every id in it was
 * older than dedup_window), and where the events view put the ids of a
 * 0.5.0 dump whose source was not restored yet.  Its ids still there (a
 * 0.9.0 database updated from 0.5.0 less than dedup_window ago; usually
 * none) move into the ledger, under their source's number (an id whose
 * source is gone could never be a duplicate again), and the table is
 * dropped: a fresh install (sql/webhook_ingest.sql) never has it.  An id
 * inserted through the events view for a source that does not exist is
 * now refused, as an update always was.
 */
LOCK TABLE webhook_ingest.events_legacy IN ACCESS EXCLUSIVE MODE;
INSERT INTO webhook_ingest.event_ledger (source_id, received, event_id)
SELECT s.id, webhook_ingest._seconds(l.received_at), l.event_id
  FROM webhook_ingest.events_legacy l
  JOIN webhook_ingest.sources s ON s.name = l.source
ON CONFLICT DO NOTHING;

CREATE OR REPLACE VIEW webhook_ingest.events AS
SELECT s.name AS source, e.event_id, webhook_ingest._at(e.received) AS received_at
  FROM webhook_ingest.event_ledger e
  JOIN webhook_ingest.sources s ON s.id = e.source_id
UNION ALL
SELECT s.name, o.event_id, webhook_ingest._at(o.received)
  FROM webhook_ingest.event_ledger_090 o
  JOIN webhook_ingest.sources s ON s.id = o.source_id;

CREATE OR REPLACE FUNCTION webhook_ingest._events_write()
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

/*
 * _purge_ledger: the walk over the ledger's pages, on received (seconds),
 * forgetting the ids older than dedup_window (purge_events calls it).
 */
CREATE OR REPLACE FUNCTION webhook_ingest._purge_ledger(max_pages integer DEFAULT 1000)
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

UPDATE webhook_ingest.legacy_migration SET events_truncated = true;
-- (out of the extension first: that takes it out of pg_extension's extconfig too)
ALTER EXTENSION webhook_ingest DROP TABLE webhook_ingest.events_legacy;
DROP TABLE webhook_ingest.events_legacy;
