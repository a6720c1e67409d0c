-- What the worker keeps of a finished webhook (0.6.0): a done job leaves the
-- queue for job_history in its completion, its payload is dropped unless the
-- source keeps payloads (then retry hands it to the handler again), its
-- done_lsn comes from the batch's done_batches row, and the worker keeps
-- partitions ahead (retention 1 h here: minute partitions).
-- Against test/upstream.py on 127.0.0.1:18080.
\set VERBOSITY terse
\set SHOW_CONTEXT never

\i test/worker/wait_until.sql

CREATE TABLE handled (external_id text, payload jsonb, at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION record_payload(external_id text, details jsonb, payload jsonb) RETURNS void
LANGUAGE sql AS $$ INSERT INTO handled (external_id, payload) VALUES (external_id, payload) $$;

SELECT webhook_ingest.add_source('kept', 'http://127.0.0.1:18080/posts/{external_id}',
                                 handler => 'record_payload(text, jsonb, jsonb)', keep_payloads => '30 minutes');
SELECT webhook_ingest.add_source('dropped', 'http://127.0.0.1:18080/posts/{external_id}',
                                 handler => 'record_payload(text, jsonb, jsonb)');
-- (kept payloads are in kept_payloads, or its overflow table until the worker's next round has made
-- partitions as far ahead as keep_payloads reaches)
CREATE TEMP VIEW kept AS SELECT * FROM webhook_ingest.kept_payloads
                         UNION ALL SELECT * FROM webhook_ingest.kept_payloads_overflow;
SELECT job_id AS kept_job FROM webhook_ingest.enqueue('kept', 'k1', '{"n": 1}', 'kept-e1') \gset
SELECT job_id AS dropped_job FROM webhook_ingest.enqueue('dropped', 'd1', '{"n": 2}', 'dropped-e1') \gset
SELECT webhook_ingest.wait_for_job(:kept_job, '30 s') AND webhook_ingest.wait_for_job(:dropped_job, '30 s') AS both_done;

-- done: out of the queue, into the history; done_lsn set; the payload kept only where asked
SELECT (SELECT count(*) FROM webhook_ingest.queue WHERE id IN (:kept_job, :dropped_job)) AS in_queue,
       (SELECT count(*) FROM webhook_ingest.job_history WHERE id IN (:kept_job, :dropped_job)) AS in_history,
       (SELECT count(*) FROM kept WHERE job_id = :kept_job) AS payloads_kept,
       (SELECT count(*) FROM kept WHERE job_id = :dropped_job) AS payloads_dropped;
SELECT external_id, state, payload, done_lsn IS NOT NULL AS has_done_lsn, attempts, last_status,
       started_at >= created_at AND finished_at >= started_at AS times_in_order
  FROM webhook_ingest.jobs WHERE id IN (:kept_job, :dropped_job) ORDER BY id;
SELECT count(*) AS done_batches FROM webhook_ingest.done_batches b
  JOIN webhook_ingest.job_history h ON h.finished_at = b.finished_at WHERE h.id IN (:kept_job, :dropped_job);
SELECT k.kept_until - h.finished_at AS kept_for
  FROM kept k JOIN webhook_ingest.job_history h ON h.id = k.job_id WHERE k.job_id = :kept_job;

-- retry of a done job: back in the queue under its id; the handler gets the
-- kept payload, or NULL where none was kept
SELECT webhook_ingest.retry(:kept_job) AND webhook_ingest.retry(:dropped_job) AS retried;
SELECT wait_until($$SELECT count(*) = 4 FROM handled$$) AS handled_again;
SELECT external_id, payload FROM handled ORDER BY external_id, at;
SELECT external_id, state FROM webhook_ingest.jobs WHERE id IN (:kept_job, :dropped_job) ORDER BY id;

-- partitions ahead: minute-wide (retention 1 h), at least three from now on, members of the extension
SELECT count(*) >= 3 AS ahead, bool_and(p.upper_bound - p.lower_bound = interval '1 minute') AS minute_wide
  FROM webhook_ingest._partitions('webhook_ingest.job_history') p WHERE p.upper_bound > now();
SELECT count(*) AS not_members FROM webhook_ingest._partitions('webhook_ingest.job_history') p
 WHERE NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                     AND d.objid = ('webhook_ingest.' || p.name)::regclass AND d.deptype = 'e');
-- kept payloads partitioned by kept_until, up to the longest keep_payloads ahead
-- (a range whose rows went to the DEFAULT before its partition was made stays there)
SELECT wait_until($$SELECT count(*) >= 25 FROM webhook_ingest._partitions('webhook_ingest.kept_payloads') p
                    WHERE p.upper_bound > now()$$) AS kept_ahead;

SELECT webhook_ingest.drop_source('kept');
SELECT webhook_ingest.drop_source('dropped');

-- history() of an object whose job failed twice before it was done (0.10.0):
-- the error of its last failed attempt kept with the done job (jobs shows
-- NULL, as before), its event id and the duplicate of it, done_lsn; the
-- same once the job is packed
SELECT webhook_ingest.add_source('flaky_history', 'http://127.0.0.1:18080/flaky/{external_id}');
SELECT job_id AS flaky_job FROM webhook_ingest.enqueue('flaky_history', 'f-28', NULL, 'flaky-e1') \gset
SELECT outcome FROM webhook_ingest.enqueue('flaky_history', 'f-28', NULL, 'flaky-e1');
SELECT webhook_ingest.wait_for_job(:flaky_job, '30 s') AS done;
SELECT state, attempts, last_error FROM webhook_ingest.jobs WHERE id = :flaky_job;
CREATE TEMP VIEW flaky_history AS
SELECT state, webhooks, event_ids, duplicates, attempts, last_status,
       regexp_replace(last_error, '[0-9]+ ms', 'N ms', 'g') AS last_error, done_lsn IS NOT NULL AS has_done_lsn,
       created_at <= started_at AND started_at <= finished_at AS times_in_order
  FROM webhook_ingest.history('flaky_history', 'f-28');
SELECT * FROM flaky_history;
SELECT wait_until(format($$SELECT (webhook_ingest._pack_history(now() + interval '1 hour')).packed >= 0
                            AND NOT EXISTS (SELECT FROM webhook_ingest.job_history WHERE id = %s)$$, :flaky_job))
       AS packed;
SELECT count(*) AS in_packed_history FROM webhook_ingest.job_history_packed p WHERE :flaky_job = ANY (p.ids);
SELECT * FROM flaky_history;
SELECT webhook_ingest.drop_source('flaky_history');
