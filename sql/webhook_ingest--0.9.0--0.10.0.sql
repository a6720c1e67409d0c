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
