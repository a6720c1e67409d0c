-- doc/history-batches-prototype.sql: what one history row per completion batch would cost
-- (issue 17, the path to <= 200 B per finished webhook; not the shipped design).
-- Run in a scratch database: psql -X -f doc/history-batches-prototype.sql
-- hrow: one row per done job, as job_history (0.6.0/0.7.0) with its btree on id;
-- hbatch: one row per batch of 100 jobs, arrays TOAST-compressed, a GiST on the id range.
-- Measured 2026-12-01 (1 M jobs, random 27-character external ids): 123.7 B/job against 62.8 B/job;
-- a lookup by id 0.30 ms against 0.76 ms.
DROP TABLE IF EXISTS hrow, hbatch;
CREATE TABLE hrow (id bigint NOT NULL, finished_at timestamptz NOT NULL, created_at timestamptz NOT NULL,
  started_at timestamptz, source_id int NOT NULL, events int NOT NULL, attempts smallint NOT NULL,
  last_status smallint, external_id text COLLATE "C" NOT NULL);
INSERT INTO hrow SELECT g, now() + (g / 100) * interval '10 ms', now() - interval '1 s' + g * interval '1 ms',
  now() - interval '0.5 s' + g * interval '1 ms', 1, 1, 1, 200, 'pi_' || left(translate(encode(sha256(g::text::bytea), 'base64'), '+/=', 'abc'), 24)
  FROM generate_series(1, 1000000) g;
CREATE INDEX ON hrow (id);
CREATE TABLE hbatch AS
SELECT min(finished_at) AS finished_at, int8range(min(id), max(id), '[]') AS ids_range, array_agg(id ORDER BY id) AS ids,
       array_agg(extract(epoch FROM finished_at - created_at)::real ORDER BY id) AS waited,
       array_agg(extract(epoch FROM finished_at - started_at)::real ORDER BY id) AS ran,
       array_agg(source_id ORDER BY id) AS sources, array_agg(events ORDER BY id) AS events,
       array_agg(attempts ORDER BY id) AS attempts, array_agg(last_status ORDER BY id) AS statuses,
       array_agg(external_id ORDER BY id) AS external_ids
  FROM hrow GROUP BY id / 100;
CREATE INDEX ON hbatch USING gist (ids_range);
VACUUM ANALYZE hrow; VACUUM ANALYZE hbatch;
SELECT pg_total_relation_size('hrow') / 1e6 AS row_per_job_b, pg_total_relation_size('hbatch') / 1e6 AS batch_per_job_b,
       pg_relation_size('hbatch') / 1e6 AS batch_heap, (SELECT sum(pg_relation_size(i.indexrelid)) FROM pg_index i WHERE i.indrelid = 'hbatch'::regclass) / 1e6 AS batch_idx;
\timing on
SELECT x.* FROM hbatch b, unnest(b.ids, b.external_ids) AS x(id, external_id) WHERE b.ids_range @> 654321::bigint AND x.id = 654321;
SELECT id, external_id FROM hrow WHERE id = 654321;
