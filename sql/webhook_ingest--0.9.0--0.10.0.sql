/* webhook_ingest--0.9.0--0.10.0.sql: apply workers, hardening (third pass), history lookups, reconciliation */

\echo Use "ALTER EXTENSION webhook_ingest UPDATE TO '0.10.0'" to load this file. \quit

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
 *   max_payload_size measures them: _payload_size) each
 *   source's dead jobs keep, kept by the triggers below on every write of
 *   queue that touches a dead row; a job that dies while its source keeps
 *   webhook_ingest.dead_payload_limit loses its payload (a counted drop:
 *   dead_payloads.dropped, and its last_error says so).  Rows written to the
 *   jobs view or restored are counted, not capped.
 *
 * enqueue() only makes pending rows: the triggers' WHEN clauses keep them
 * off its path (the BEFORE trigger is on UPDATE OF state, which enqueue's
 * upsert never sets).
 */
CREATE TABLE webhook_ingest.dead_payloads (
    source          text COLLATE "C" PRIMARY KEY,
    bytes           bigint NOT NULL DEFAULT 0,
    dropped         bigint NOT NULL DEFAULT 0
);
COMMENT ON TABLE webhook_ingest.dead_payloads IS
    'per source: the payload bytes (uncompressed, as max_payload_size counts them) its dead jobs keep, and how many payloads webhook_ingest.dead_payload_limit dropped';

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

-- A job dies: the object's older dead jobs go into it, and its payload goes if its source keeps the limit.
CREATE FUNCTION webhook_ingest._job_dies()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    older record;
    kept bigint;
    cap bigint := webhook_ingest._dead_payload_limit();
BEGIN
    -- (rows some session holds, a retry under way, are left to it)
    WITH gone AS (
        DELETE FROM webhook_ingest.queue q
         WHERE q.id = ANY (ARRAY(SELECT d.id FROM webhook_ingest.queue d
                                  WHERE d.source = NEW.source AND d.external_id = NEW.external_id
                                    AND d.state = 'dead' AND d.id <> NEW.id
                                  FOR UPDATE SKIP LOCKED))
           AND q.state = 'dead'
        RETURNING q.id, q.events, q.payload, q.finished_at)
    SELECT coalesce(sum(g.events), 0) AS events,
           (SELECT p.payload FROM gone p WHERE p.payload IS NOT NULL
             ORDER BY p.finished_at DESC, p.id DESC LIMIT 1) AS payload
      INTO older FROM gone g;
    NEW.events := NEW.events + older.events;
    NEW.payload := coalesce(NEW.payload, older.payload);
    IF NEW.payload IS NULL OR cap IS NULL THEN
        RETURN NEW;
    END IF;
    SELECT p.bytes INTO kept FROM webhook_ingest.dead_payloads p WHERE p.source = NEW.source;
    IF coalesce(kept, 0) + webhook_ingest._payload_size(NEW.payload) > cap THEN
        NEW.payload := NULL;
        NEW.last_error := NEW.last_error || ' (payload dropped: the source''s dead jobs keep webhook_ingest.dead_payload_limit)';
        INSERT INTO webhook_ingest.dead_payloads AS p (source, dropped) VALUES (NEW.source, 1)
        ON CONFLICT (source) DO UPDATE SET dropped = p.dropped + 1;
    END IF;
    RETURN NEW;
END
$fn$;

-- dead_payloads follows every write of a dead row's payload.
CREATE FUNCTION webhook_ingest._count_dead_payloads()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        UPDATE webhook_ingest.dead_payloads SET bytes = 0 WHERE bytes <> 0;
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        IF OLD.state = 'dead' AND OLD.payload IS NOT NULL THEN
            UPDATE webhook_ingest.dead_payloads p SET bytes = p.bytes - webhook_ingest._payload_size(OLD.payload)
             WHERE p.source = OLD.source;
        END IF;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        IF NEW.state = 'dead' AND NEW.payload IS NOT NULL THEN
            INSERT INTO webhook_ingest.dead_payloads AS p (source, bytes) VALUES (NEW.source, webhook_ingest._payload_size(NEW.payload))
            ON CONFLICT (source) DO UPDATE SET bytes = p.bytes + EXCLUDED.bytes;
        END IF;
    END IF;
    RETURN NULL;
END
$fn$;

-- (the object's dead job first: the merge above and retry_dead's DISTINCT ON read it in that order)
DROP INDEX webhook_ingest.queue_dead;
CREATE INDEX queue_dead ON webhook_ingest.queue (source, external_id, finished_at)
    WHERE state = 'dead';
CREATE TRIGGER queue_job_dies
    BEFORE UPDATE OF state ON webhook_ingest.queue
    FOR EACH ROW WHEN (NEW.state OPERATOR(pg_catalog.=) 'dead'::webhook_ingest.job_state
                       AND OLD.state OPERATOR(pg_catalog.<>) 'dead'::webhook_ingest.job_state)
    EXECUTE FUNCTION webhook_ingest._job_dies();
CREATE TRIGGER queue_dead_inserted
    AFTER INSERT ON webhook_ingest.queue
    FOR EACH ROW WHEN (NEW.state OPERATOR(pg_catalog.=) 'dead'::webhook_ingest.job_state AND NEW.payload IS NOT NULL)
    EXECUTE FUNCTION webhook_ingest._count_dead_payloads();
CREATE TRIGGER queue_dead_changed
    AFTER UPDATE OF state, payload ON webhook_ingest.queue
    FOR EACH ROW WHEN ((OLD.state OPERATOR(pg_catalog.=) 'dead'::webhook_ingest.job_state AND OLD.payload IS NOT NULL)
                       OR (NEW.state OPERATOR(pg_catalog.=) 'dead'::webhook_ingest.job_state AND NEW.payload IS NOT NULL))
    EXECUTE FUNCTION webhook_ingest._count_dead_payloads();
CREATE TRIGGER queue_dead_deleted
    AFTER DELETE ON webhook_ingest.queue
    FOR EACH ROW WHEN (OLD.state OPERATOR(pg_catalog.=) 'dead'::webhook_ingest.job_state AND OLD.payload IS NOT NULL)
    EXECUTE FUNCTION webhook_ingest._count_dead_payloads();
CREATE TRIGGER queue_truncated
    AFTER TRUNCATE ON webhook_ingest.queue
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_ingest._count_dead_payloads();
-- What the dead jobs of 0.9.0 keep (the triggers hold the queue's writers off until commit).
INSERT INTO webhook_ingest.dead_payloads (source, bytes)
SELECT q.source, sum(webhook_ingest._payload_size(q.payload)) FROM webhook_ingest.queue q
 WHERE q.state = 'dead' AND q.payload IS NOT NULL GROUP BY q.source;

REVOKE ALL ON webhook_ingest.dead_payloads FROM PUBLIC;
GRANT SELECT ON webhook_ingest.dead_payloads TO webhook_ingest_admin;
REVOKE ALL ON FUNCTION webhook_ingest._payload_size(jsonb), webhook_ingest._dead_payload_limit(), webhook_ingest._job_dies(),
                       webhook_ingest._count_dead_payloads() FROM PUBLIC;
