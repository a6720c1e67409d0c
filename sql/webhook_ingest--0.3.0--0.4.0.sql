/* webhook_ingest--0.3.0--0.4.0.sql: signature verification (issue 10 item 1; the lead replaces this file when merging) */

\echo Use "ALTER EXTENSION webhook_ingest UPDATE TO '0.4.0'" to load this file. \quit

/*
 * Signature verification (issue 10, item 1): true when the request carries
 * a valid signature by secret for the scheme, signed within tolerance of now
 * where the scheme signs a timestamp.  Pure: reads no table.
 */
CREATE FUNCTION webhook_ingest.verify_signature(scheme text, secret text, headers jsonb, body text,
                                                tolerance interval DEFAULT '5 minutes')
RETURNS boolean
AS 'MODULE_PATHNAME', 'webhook_ingest_verify_signature'
LANGUAGE C STABLE PARALLEL SAFE;
GRANT EXECUTE ON FUNCTION webhook_ingest.verify_signature(text, text, jsonb, text, interval) TO PUBLIC;
