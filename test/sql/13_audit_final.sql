-- Final audit of 0.4.0 (app role's side): wait_for_job's timeout and job id
-- at their extremes, and the SECURITY DEFINER behind queue_stats.
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE ROLE regress_final_app LOGIN IN ROLE webhook_ingest_enqueue;
SELECT webhook_ingest.add_source('au_final', 'http://127.0.0.1:9/o/{external_id}');
SELECT webhook_ingest.pause_source('au_final');
SELECT job_id AS jid FROM webhook_ingest.enqueue('au_final', 'o1') \gset
SET ROLE regress_final_app;

-- 1. Job ids no sequence makes: negative, zero, the largest bigint.  Each is
-- simply a job that does not exist (they hash to a bucket like any other).
SELECT webhook_ingest.wait_for_job(-1, '10ms');
SELECT webhook_ingest.wait_for_job(0, '10ms');
SELECT webhook_ingest.wait_for_job(9223372036854775807, '10ms');
SELECT webhook_ingest.wait_for_job(-9223372036854775808, '10ms');

-- 2. A timeout too long to count in microseconds is capped at a year, like
-- any timeout over a year: the call waits (here until statement_timeout),
-- it does not call a positive interval negative.
SET statement_timeout = '200ms';
SELECT webhook_ingest.wait_for_job(:jid, '2147483647 months');
SELECT webhook_ingest.wait_for_job(:jid, interval '106751991 days' + interval '1 day');
SELECT webhook_ingest.wait_for_job(:jid, '2 years');
RESET statement_timeout;
SELECT webhook_ingest.wait_for_job(:jid, '-1 second');

-- 3. queue_stats' SECURITY DEFINER function is not the app role's to call,
-- nor the view (which would show every source's name).
SELECT * FROM webhook_ingest._queue_stats();
SELECT source FROM webhook_ingest.queue_stats;
RESET ROLE;
SELECT p.proconfig FROM pg_proc p WHERE p.oid = 'webhook_ingest._queue_stats'::regproc;

SELECT webhook_ingest.drop_source('au_final', force => true);
DROP ROLE regress_final_app;
