/* webhook_ingest--0.2.0--0.3.0.sql: production-safe - handlers run as their owners, an admin role, per-source app access */

\echo Use "ALTER EXTENSION webhook_ingest UPDATE TO '0.3.0'" to load this file. \quit
