/* webhook_ingest--0.9.0--0.10.0.sql: apply workers, hardening (third pass), history lookups, reconciliation */

\echo Use "ALTER EXTENSION webhook_ingest UPDATE TO '0.10.0'" to load this file. \quit
