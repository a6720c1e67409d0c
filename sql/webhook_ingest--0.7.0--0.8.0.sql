/* webhook_ingest--0.7.0--0.8.0.sql: the ledger's time conversions inlined (enqueue runs no SQL function) */

\echo Use "ALTER EXTENSION webhook_ingest UPDATE TO '0.8.0'" to load this file. \quit

/*
 * _seconds() is event_ledger.received's default, so every accepted event id
 * evaluated it.  0.6.0 wrote its body with extract(epoch FROM timestamptz),
 * which is only STABLE: an IMMUTABLE SQL function whose body is not
 * immutable is never inlined, so each enqueue ran it through the SQL
 * function executor (its body read back from the catalog and planned at
 * every statement): about a sixth of enqueue's time (bench/enqueue, issue
 * 17).  The same value from immutable parts (timestamptz minus timestamptz
 * is an interval of days and seconds; its epoch is exact), which the
 * planner inlines into the statement; _at() likewise, for the events view.
 */
CREATE OR REPLACE FUNCTION webhook_ingest._seconds(t timestamptz)
RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN extract(epoch FROM t - timestamptz '2000-01-01 00:00:00+00')::integer;

CREATE OR REPLACE FUNCTION webhook_ingest._at(seconds integer)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN pg_catalog.to_timestamp(seconds::double precision + 946684800);
