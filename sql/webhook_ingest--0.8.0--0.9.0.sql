/* webhook_ingest--0.8.0--0.9.0.sql: no change to the schema (0.9.0 changes the library: failover) */

\echo Use "ALTER EXTENSION webhook_ingest UPDATE TO '0.9.0'" to load this file. \quit

/*
 * 0.9.0 is a library release (issue 16): wait_replayed() on a server promoted,
 * or switched to a new timeline, during the wait raises 40001 instead of
 * returning once the new timeline's positions pass the target; the worker of
 * a promoted server waits for default_transaction_read_only to be lifted
 * (pg_auto_failover keeps it on until the node is primary) instead of failing
 * and backing off.  The router for shards is the companion extension
 * webhook_ingest_router.  Nothing in the schema changes.
 */
