/* webhook_ingest--0.8.0--0.9.0.sql: import_events() for the router's move_partition; the rest of 0.9.0 is the library's (failover) */

\echo Use "ALTER EXTENSION webhook_ingest UPDATE TO '0.9.0'" to load this file. \quit

/*
 * 0.9.0 is a library release (issue 16): wait_replayed() on a server promoted,
 * or switched to a new timeline, during the wait raises 40001 instead of
 * returning once the new timeline's positions pass the target; the worker of
 * a promoted server waits for default_transaction_read_only to be lifted
 * (pg_auto_failover keeps it on until the node is primary) instead of failing
 * and backing off.  The router for shards is the companion extension
 * webhook_ingest_router, whose move_partition needs one function here.
 */

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
REVOKE ALL ON FUNCTION webhook_ingest.import_events(text[], text[], timestamptz[]) FROM PUBLIC;
