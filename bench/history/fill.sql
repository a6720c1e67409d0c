-- bench/history/fill.sql: done jobs straight into the packed layout, as the
-- storage round would have left them (bench/history/run calls it chunk by
-- chunk).  psql variables: lo, hi (the ids of this chunk), n (jobs packed in
-- all), objects, t0 (when the first one finished, epoch seconds).
--
-- Job i is a job of object o = 1 + (i - 1) % objects (so an object's jobs are
-- spread evenly over the whole history), of source 'src' || (1 + o % 3),
-- external id 'pi_' || left(md5(o), 24); the jobs finish in id order, eight to
-- a completion batch (one done_batches row each), over 7 days; one in 50 took
-- two attempts (its first failed, last_error kept), one in 7 had two webhooks.
-- Each webhook's event id is in the ledger with its job (one in 100 also came
-- once more, a duplicate).  The packed rows are made as _pack_history makes
-- them: a block of 128 ids of one partition's time to a row, keyed at the
-- bits for a partition of n / 7 jobs (0.10.0; an earlier version's rows as
-- it packed them, for a run beside it).
\set ON_ERROR_STOP on
CREATE TEMP TABLE chunk AS
SELECT i, o, 1 + o % 3 AS source_id, 'pi_' || left(md5(o::text), 24) AS external_id,
       to_timestamp(:t0 + (i / 8) * (7 * 86400.0 / (:n / 8))) AS finished_at,
       1 + (i % 7 = 0)::integer AS events, (1 + (i % 50 = 0)::integer)::smallint AS attempts,
       CASE WHEN i % 50 = 0 THEN 'attempt 1/10 after 41 ms: HTTP 503; retrying in 1000 ms' END AS last_error
  FROM generate_series(:lo::bigint, :hi::bigint) i, LATERAL (SELECT 1 + (i - 1) % :objects AS o) x;
-- (0.10.0's packed rows carry their keys, span and errors; an earlier version's, for a run beside it, do not)
SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'webhook_ingest.job_history_packed'::regclass
                                         AND attname = 'object_bits') AS keyed \gset
\if :keyed
INSERT INTO webhook_ingest.job_history_packed (finished_at, block, ids, finished, created, started, source_ids, events,
                                               attempts, statuses, external_ids, last_finished, object_bits,
                                               object_checks, errors)
SELECT min(finished_at), i >> 7, array_agg(i ORDER BY i), array_agg(finished_at ORDER BY i),
       array_agg(finished_at - interval '612.345 ms' ORDER BY i), array_agg(finished_at - interval '303.21 ms' ORDER BY i),
       array_agg(source_id ORDER BY i), array_agg(events ORDER BY i), array_agg(attempts ORDER BY i),
       array_agg(200::smallint ORDER BY i), array_agg(external_id ORDER BY i), max(finished_at),
       webhook_ingest._object_bits(:n / 7.0), webhook_ingest._object_checks(array_agg(external_id ORDER BY i)),
       array_agg(last_error ORDER BY i)
  FROM chunk GROUP BY i >> 7, date_bin('1 day', finished_at, timestamptz '2000-01-01 00:00+00');
\else
INSERT INTO webhook_ingest.job_history_packed (finished_at, block, ids, finished, created, started, source_ids, events,
                                               attempts, statuses, external_ids)
SELECT min(finished_at), i >> 7, array_agg(i ORDER BY i), array_agg(finished_at ORDER BY i),
       array_agg(finished_at - interval '612.345 ms' ORDER BY i), array_agg(finished_at - interval '303.21 ms' ORDER BY i),
       array_agg(source_id ORDER BY i), array_agg(events ORDER BY i), array_agg(attempts ORDER BY i),
       array_agg(200::smallint ORDER BY i), array_agg(external_id ORDER BY i)
  FROM chunk GROUP BY i >> 7, date_bin('1 day', finished_at, timestamptz '2000-01-01 00:00+00');
\endif
INSERT INTO webhook_ingest.done_batches (finished_at, done_lsn)
SELECT finished_at, '0/1000000'::pg_lsn + i * 100 FROM chunk WHERE i % 8 = 0
ON CONFLICT (finished_at) DO NOTHING;
\if :keyed
INSERT INTO webhook_ingest.event_ledger (source_id, received, event_id, job_id, duplicates)
SELECT source_id, webhook_ingest._seconds(finished_at - interval '612.345 ms'), 'evt_' || left(md5(e || ':' || i), 24), i,
       CASE WHEN i % 100 = 0 AND e = 1 THEN 1 END
  FROM chunk, LATERAL generate_series(1, events) e;
\else
INSERT INTO webhook_ingest.event_ledger (source_id, received, event_id)
SELECT source_id, webhook_ingest._seconds(finished_at - interval '612.345 ms'), 'evt_' || left(md5(e || ':' || i), 24)
  FROM chunk, LATERAL generate_series(1, events) e;
\endif
DROP TABLE chunk;
