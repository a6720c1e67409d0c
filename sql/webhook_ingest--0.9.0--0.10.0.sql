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
           (SELECT p.payload FROM gone p WHERE p.payload IS NOT NULL
             ORDER BY p.finished_at DESC, p.id DESC LIMIT 1) AS payload
      INTO older FROM gone g;
    NEW.events := NEW.events + older.events;
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
