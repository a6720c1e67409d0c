-- Audit 0.10.0, third pass, item 6 (test/audit/FINDINGS-0.10.0-third.md):
-- nothing in schema webhook_ingest is executable or readable by PUBLIC.
-- 0.9.0's _packed_jobs() was (=X, a function's default ACL), and it admits
-- any caller for the sources whose enqueue_roles is NULL: a role with no
-- grant at all read the ids, finished_at and source of the packed history.
-- A function made without a REVOKE gets that default, so the checks read a
-- NULL ACL as its default (acldefault), not as "no grant".
\set VERBOSITY terse

-- Each object's privileges as grantee=privileges (the owner as "owner").
CREATE FUNCTION pg_temp.acl_of(acl aclitem[], owner oid) RETURNS text LANGUAGE sql STABLE AS $$
SELECT coalesce(string_agg(a.who || '=' || a.privs, ', ' ORDER BY a.rank, a.who), '(none)')
  FROM (SELECT CASE e.grantee WHEN 0 THEN 'PUBLIC' WHEN owner THEN 'owner' ELSE e.grantee::regrole::text END AS who,
               CASE e.grantee WHEN owner THEN 0 WHEN 0 THEN 1 ELSE 2 END AS rank,
               string_agg(e.privilege_type, ',' ORDER BY e.privilege_type) AS privs
          FROM pg_catalog.aclexplode(acl) e GROUP BY e.grantee) a
$$;
-- Every function, relation (tables, views, sequences; partitions too) and
-- column of the schema, and the schema itself, with its effective ACL.
CREATE VIEW pg_temp.schema_acls AS
SELECT 'function' AS kind, p.oid::regprocedure::text AS object,
       pg_temp.acl_of(coalesce(p.proacl, acldefault('f', p.proowner)), p.proowner) AS acl,
       false AS partition
  FROM pg_proc p WHERE p.pronamespace = 'webhook_ingest'::regnamespace
UNION ALL
SELECT CASE WHEN c.relkind = 'S' THEN 'sequence' WHEN c.relkind = 'v' THEN 'view' ELSE 'table' END,
       c.oid::regclass::text,
       pg_temp.acl_of(coalesce(c.relacl, acldefault(CASE WHEN c.relkind = 'S' THEN 's' ELSE 'r' END::"char",
                                                    c.relowner)), c.relowner),
       c.relispartition
  FROM pg_class c WHERE c.relnamespace = 'webhook_ingest'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
UNION ALL
SELECT 'column', a.attrelid::regclass::text || '.' || a.attname, pg_temp.acl_of(a.attacl, c.relowner), c.relispartition
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
 WHERE c.relnamespace = 'webhook_ingest'::regnamespace AND a.attacl IS NOT NULL AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'schema', n.nspname::text, pg_temp.acl_of(coalesce(n.nspacl, acldefault('n', n.nspowner)), n.nspowner), false
  FROM pg_namespace n WHERE n.nspname = 'webhook_ingest';

-- 1. what PUBLIC may do in the schema: nothing (a row here is a new grant to
--    PUBLIC, or an object made without its REVOKE; README must say why first)
SELECT kind, object, acl FROM pg_temp.schema_acls WHERE acl ~ '(^|, )PUBLIC=' ORDER BY kind, object COLLATE "C";

-- 2. every object's grants, for review: a change here is a change of who may
--    do what (partitions, which the worker makes and drops, are counted:
--    they carry no grant of their own)
\pset format unaligned
SELECT kind, object, acl FROM pg_temp.schema_acls WHERE NOT partition ORDER BY kind, object COLLATE "C";
\pset format aligned
SELECT count(*) AS partitions_with_grants FROM pg_temp.schema_acls WHERE partition AND acl !~ '^owner=[a-zA-Z,]*$';

-- 3. _packed_jobs(): a role with no grant cannot call it; an app role reads
--    the jobs of the sources it may enqueue into, as through the jobs view
CREATE ROLE regress_acl_nobody LOGIN;
CREATE ROLE regress_acl_app LOGIN IN ROLE webhook_ingest_enqueue;
SELECT webhook_ingest.add_source('acl_open', 'http://127.0.0.1:9/o/{external_id}');
SELECT id AS acl_open FROM webhook_ingest.sources WHERE name = 'acl_open' \gset
BEGIN;
SELECT webhook_ingest._ensure_partitions('webhook_ingest.job_history', now() - interval '3 days', now()) >= 0 AS made;
INSERT INTO webhook_ingest.jobs (source, external_id, state, attempts, finished_at)
SELECT 'acl_open', 'packed-' || g, 'done', 1, now() - interval '2 days' + g * interval '1 min'
  FROM generate_series(1, 3) g;
COMMIT;
SELECT packed >= 3 AS packed FROM webhook_ingest._pack_history(now() - interval '1 minute', '1 minute');
GRANT USAGE ON SCHEMA webhook_ingest TO regress_acl_nobody;
SET ROLE regress_acl_nobody;
SELECT count(*) FROM webhook_ingest._packed_jobs() WHERE source_id = :acl_open;
RESET ROLE;
-- (and were it granted to a role that is neither an app nor the admin role: no job)
GRANT EXECUTE ON FUNCTION webhook_ingest._packed_jobs(bigint, text[], timestamptz, timestamptz) TO regress_acl_nobody;
SET ROLE regress_acl_nobody;
SELECT count(*) AS granted_reads FROM webhook_ingest._packed_jobs() WHERE source_id = :acl_open;
RESET ROLE;
REVOKE EXECUTE ON FUNCTION webhook_ingest._packed_jobs(bigint, text[], timestamptz, timestamptz) FROM regress_acl_nobody;
SET ROLE regress_acl_app;
SELECT count(*) AS app_reads FROM webhook_ingest._packed_jobs() WHERE source_id = :acl_open;
RESET ROLE;
REVOKE USAGE ON SCHEMA webhook_ingest FROM regress_acl_nobody;
SELECT webhook_ingest.drop_source('acl_open', force => true);
DROP ROLE regress_acl_nobody, regress_acl_app;
