-- sql/pending/router.sql: for webhook_ingest 0.9.0's update script (helper "router", issue 16); plain SQL the
-- lead folds in.  webhook_ingest_router's move_partition (router/) copies a shard's dedup ledger to a new
-- shard through PL/Proxy, whose remote statements can only be SELECTs: it needs a function to call there.
--
-- import_events(sources, event_ids, received): the given event ids into the dedup ledger, as an INSERT into
-- the events view does, skipping those already there; returns how many it added.  Superusers only (the
-- ledger is the dedup guarantee; a wrong entry makes a real webhook a duplicate).
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
REVOKE ALL ON FUNCTION webhook_ingest.import_events(text[], text[], timestamptz[]) FROM PUBLIC;
