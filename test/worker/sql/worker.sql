-- The worker against a real HTTP server on 127.0.0.1:18080 (test/upstream.py).
\set VERBOSITY terse
\set SHOW_CONTEXT never

-- Wait (up to 60 s) until a query returns true.
\i test/worker/wait_until.sql

-- The seeds' example: a post with its tags and categories, written by the handler.
CREATE TABLE posts (id text PRIMARY KEY, title text);
CREATE TABLE post_tags (post_id text REFERENCES posts ON DELETE CASCADE, tag text, PRIMARY KEY (post_id, tag));
CREATE TABLE post_categories (post_id text REFERENCES posts ON DELETE CASCADE, category text,
                              PRIMARY KEY (post_id, category));
CREATE TABLE handler_calls (external_id text, gone boolean, payload jsonb);
CREATE FUNCTION store_post(external_id text, details jsonb, payload jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO handler_calls VALUES (external_id, details IS NULL, payload);
    IF details IS NULL THEN
        DELETE FROM posts WHERE id = external_id;
        RETURN;
    END IF;
    INSERT INTO posts (id, title) VALUES (external_id, details->>'title')
    ON CONFLICT (id) DO UPDATE SET title = EXCLUDED.title;
    DELETE FROM post_tags WHERE post_id = external_id;
    INSERT INTO post_tags SELECT external_id, jsonb_array_elements_text(details->'tags');
    DELETE FROM post_categories WHERE post_id = external_id;
    INSERT INTO post_categories SELECT external_id, jsonb_array_elements_text(details->'categories');
    IF external_id LIKE 'explode%' THEN
        RAISE EXCEPTION 'handler refused %', external_id;
    END IF;
END $$;

SELECT webhook_ingest.add_source('blog', 'http://127.0.0.1:18080/posts/{external_id}', 'store_post(text,jsonb,jsonb)',
                                 max_attempts => 2);

-- the worker is up and shows itself
SELECT wait_until($$SELECT EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker')$$);
SELECT application_name, datname FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker';

-- happy path: fetched, handled, done, in one go
SELECT outcome FROM webhook_ingest.enqueue('blog', 'p1', '{"action": "created"}', 'e1');
SELECT outcome FROM webhook_ingest.enqueue('blog', 'p2', NULL, 'e2');
SELECT wait_until($$SELECT count(*) = 2 FROM webhook_ingest.jobs WHERE source = 'blog' AND state = 'done'$$);
SELECT id, title FROM posts ORDER BY id;
SELECT post_id, tag FROM post_tags ORDER BY 1, 2;
SELECT post_id, category FROM post_categories ORDER BY 1, 2;
SELECT external_id, state, attempts, last_status, last_error, finished_at IS NOT NULL AS finished,
       lease_until, worker_pid
  FROM webhook_ingest.jobs WHERE source = 'blog' ORDER BY external_id;
SELECT external_id, gone, payload FROM handler_calls ORDER BY external_id;

-- a webhook while the fetch runs: requeued, fetched once more, never twice at once
SELECT webhook_ingest.add_source('slowblog', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=400',
                                 'store_post(text,jsonb,jsonb)');
TRUNCATE handler_calls;
SELECT outcome FROM webhook_ingest.enqueue('slowblog', 'p3', '{"v": 1}');
SELECT wait_until($$SELECT state = 'running' FROM webhook_ingest.jobs WHERE source = 'slowblog'$$);
SELECT outcome FROM webhook_ingest.enqueue('slowblog', 'p3', '{"v": 2}');
SELECT outcome FROM webhook_ingest.enqueue('slowblog', 'p3', '{"v": 3}');
SELECT wait_until($$SELECT state = 'done' FROM webhook_ingest.jobs WHERE source = 'slowblog'$$);
SELECT external_id, payload FROM handler_calls ORDER BY payload->>'v';
SELECT state, events, refetch, attempts FROM webhook_ingest.jobs WHERE source = 'slowblog';

-- 404: the handler hears the object is gone (details NULL), and the job is done
SELECT webhook_ingest.add_source('gone', 'http://127.0.0.1:18080/gone/{external_id}', 'store_post(text,jsonb,jsonb)');
SELECT outcome FROM webhook_ingest.enqueue('gone', 'p1');
SELECT wait_until($$SELECT state = 'done' FROM webhook_ingest.jobs WHERE source = 'gone'$$);
SELECT state, last_status FROM webhook_ingest.jobs WHERE source = 'gone';
SELECT count(*) AS p1_left FROM posts WHERE id = 'p1';

-- a failing handler rolls back its own writes only; retried, then dead
SELECT outcome FROM webhook_ingest.enqueue('blog', 'explode-1');
SELECT outcome FROM webhook_ingest.enqueue('blog', 'p4');
SELECT wait_until($$SELECT state = 'dead' FROM webhook_ingest.jobs WHERE external_id = 'explode-1'$$);
SELECT wait_until($$SELECT state = 'done' FROM webhook_ingest.jobs WHERE external_id = 'p4'$$);
SELECT count(*) AS exploded_rows FROM posts WHERE id = 'explode-1';
SELECT count(*) AS p4_rows FROM posts WHERE id = 'p4';
SELECT attempts, last_error LIKE 'attempt 2/2 after % ms: handler: handler refused explode-1' AS says_why
  FROM webhook_ingest.jobs WHERE external_id = 'explode-1';

-- 503 twice, then 200: retried with backoff, then done
SELECT webhook_ingest.add_source('flaky', 'http://127.0.0.1:18080/flaky/{external_id}', max_attempts => 5);
SELECT outcome FROM webhook_ingest.enqueue('flaky', 'f1');
SELECT wait_until($$SELECT state = 'done' FROM webhook_ingest.jobs WHERE source = 'flaky'$$);
SELECT state, attempts, last_status FROM webhook_ingest.jobs WHERE source = 'flaky';
-- without a handler the document is stored
SELECT source, external_id, details FROM webhook_ingest.documents WHERE source = 'flaky';

-- 500 every time: dead after max_attempts, saying why
SELECT webhook_ingest.add_source('broken', 'http://127.0.0.1:18080/error/{external_id}', max_attempts => 3);
SELECT outcome FROM webhook_ingest.enqueue('broken', 'b1');
SELECT wait_until($$SELECT state = 'dead' FROM webhook_ingest.jobs WHERE source = 'broken'$$);
SELECT state, attempts, last_status, last_error LIKE 'attempt 3/3 after % ms: HTTP 500' AS says_why,
       finished_at IS NOT NULL AS finished
  FROM webhook_ingest.jobs WHERE source = 'broken';

-- permanent failures end at once: 400, a body that is too big, a redirect to ftp://
SELECT webhook_ingest.add_source('badreq', 'http://127.0.0.1:18080/badrequest/{external_id}');
SELECT webhook_ingest.add_source('big', 'http://127.0.0.1:18080/big/{external_id}');
SELECT webhook_ingest.add_source('redirect', 'http://127.0.0.1:18080/redirect/{external_id}');
SELECT outcome FROM webhook_ingest.enqueue('badreq', 'x');
SELECT outcome FROM webhook_ingest.enqueue('big', 'x');
SELECT outcome FROM webhook_ingest.enqueue('redirect', 'x');
SELECT wait_until($$SELECT count(*) = 3 FROM webhook_ingest.jobs
                    WHERE source IN ('badreq', 'big', 'redirect') AND state = 'dead'$$);
SELECT source, state, attempts, last_status,
       regexp_replace(last_error, 'after \d+ ms', 'after N ms') AS last_error
  FROM webhook_ingest.jobs WHERE source IN ('badreq', 'big', 'redirect') ORDER BY source;

-- a body that is not JSON and a timeout are failed attempts (max_attempts 1 here)
SELECT webhook_ingest.add_source('invalid', 'http://127.0.0.1:18080/invalid/{external_id}', max_attempts => 1);
SELECT webhook_ingest.add_source('slow', 'http://127.0.0.1:18080/slow/{external_id}', timeout_ms => 300,
                                 max_attempts => 1);
SELECT outcome FROM webhook_ingest.enqueue('invalid', 'x');
SELECT outcome FROM webhook_ingest.enqueue('slow', 'x');
SELECT wait_until($$SELECT count(*) = 2 FROM webhook_ingest.jobs
                    WHERE source IN ('invalid', 'slow') AND state = 'dead'$$);
SELECT source, state, last_error LIKE '%invalid input syntax for type json%' AS not_json,
       last_error LIKE '%Timeout was reached%' AS timed_out
  FROM webhook_ingest.jobs WHERE source IN ('invalid', 'slow') ORDER BY source;

-- 429 with Retry-After: 1 is honoured
SELECT webhook_ingest.add_source('throttle', 'http://127.0.0.1:18080/throttle/{external_id}');
SELECT outcome FROM webhook_ingest.enqueue('throttle', 't1');
SELECT wait_until($$SELECT state = 'done' FROM webhook_ingest.jobs WHERE source = 'throttle'$$);
SELECT attempts, finished_at - created_at >= interval '1 s' AS waited_retry_after
  FROM webhook_ingest.jobs WHERE source = 'throttle';

-- a running job whose lease expired, held by someone else, is taken back and done
-- (claimed by an update, as claims are: a row inserted as running is a restored
-- one, pending at once, see 030_dump_restore.pl)
BEGIN;
INSERT INTO webhook_ingest.jobs (source, external_id, attempts) VALUES ('blog', 'leased', 1);
UPDATE webhook_ingest.jobs SET state = 'running', lease_until = now() - interval '1 s', worker_pid = 1
 WHERE external_id = 'leased';
COMMIT;
SELECT wait_until($$SELECT state = 'done' FROM webhook_ingest.jobs WHERE external_id = 'leased'$$);
SELECT state, attempts, last_status FROM webhook_ingest.jobs WHERE external_id = 'leased';

-- the worker forgets event ids past webhook_ingest.dedup_window on its own
UPDATE webhook_ingest.events SET received_at = now() - interval '8 days' WHERE event_id = 'e1';
SELECT wait_until($$SELECT NOT EXISTS (SELECT FROM webhook_ingest.events WHERE event_id = 'e1')$$);
SELECT count(*) > 0 AS others_remembered FROM webhook_ingest.events;

-- the worker's own view of itself, from shared memory
SELECT pid = (SELECT pid FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker') AS same_pid,
       database, state, in_flight, started_at <= now() AS started,
       claimed >= fetched AS claims_cover_fetches, fetched > 0 AS fetched, succeeded > 0 AS succeeded,
       retried > 0 AS retried, dead, handler_errors > 0 AS handler_errors, bytes > 0 AS bytes,
       last_error IS NOT NULL AS has_last_error, last_error_at <= now() AS last_error_at
  FROM webhook_ingest.worker_status WHERE role = 'fetcher';

-- done_lsn: every done job carries the LSN of its commit; wait_for_job
-- returns once the job is done, and the handler's rows are there
SELECT job_id AS waited FROM webhook_ingest.enqueue('blog', 'waited') \gset
SELECT webhook_ingest.wait_for_job(:waited, '30 s');
SELECT state, done_lsn IS NOT NULL AS has_lsn, done_lsn <= pg_current_wal_lsn() AS lsn_reached
  FROM webhook_ingest.jobs WHERE id = :waited;
SELECT count(*) AS waited_rows FROM posts WHERE id = 'waited';
SELECT count(*) AS done_without_lsn FROM webhook_ingest.jobs WHERE state = 'done' AND done_lsn IS NULL;
-- a dead job: false at once
SELECT webhook_ingest.wait_for_job(id, '30 s') FROM webhook_ingest.jobs WHERE source = 'broken';

-- cancel while the fetch runs: the worker drops the result, the handler's
-- writes with it, and counts no failure
SELECT webhook_ingest.alter_source('slowblog', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=1000');
SELECT handler_errors AS errors_before, fetched AS fetched_before FROM webhook_ingest.worker_status WHERE role = 'fetcher' \gset
SELECT job_id AS cancelled FROM webhook_ingest.enqueue('slowblog', 'cancelled-post') \gset
SELECT wait_until($$SELECT state = 'running' FROM webhook_ingest.jobs WHERE external_id = 'cancelled-post'$$);
SELECT webhook_ingest.cancel(:cancelled);
SELECT wait_until(format($$SELECT fetched > %s AND in_flight = 0 FROM webhook_ingest.worker_status WHERE role = 'fetcher'$$,
                         :fetched_before));
SELECT state, last_error FROM webhook_ingest.jobs WHERE id = :cancelled;
SELECT count(*) AS cancelled_rows FROM posts WHERE id = 'cancelled-post';
SELECT count(*) AS cancelled_calls FROM handler_calls WHERE external_id = 'cancelled-post';
SELECT handler_errors - :errors_before AS new_handler_errors FROM webhook_ingest.worker_status WHERE role = 'fetcher';
-- retry brings it back: fetched and handled this time
SELECT webhook_ingest.retry(:cancelled);
SELECT webhook_ingest.wait_for_job(:cancelled, '30 s');
SELECT count(*) AS cancelled_rows FROM posts WHERE id = 'cancelled-post';

-- retry_dead replays the dead job, which runs (and dies) again
SELECT webhook_ingest.retry_dead('broken', now() - interval '1 hour');
SELECT state IN ('pending', 'running') AS replayed, attempts <= 1 AS attempts_reset
  FROM webhook_ingest.jobs WHERE source = 'broken';
SELECT wait_until($$SELECT state = 'dead' FROM webhook_ingest.jobs WHERE source = 'broken'$$);
SELECT state, attempts FROM webhook_ingest.jobs WHERE source = 'broken';

-- pause: webhooks are taken and wait, nothing is fetched; resume: fetched
SELECT webhook_ingest.pause_source('blog');
SELECT outcome FROM webhook_ingest.enqueue('blog', 'paused-post');
SELECT pg_sleep(1);
SELECT state, attempts, next_attempt_at FROM webhook_ingest.jobs WHERE external_id = 'paused-post';
SELECT paused, pending, due_now FROM webhook_ingest.queue_stats WHERE source = 'blog';
SELECT webhook_ingest.resume_source('blog');
SELECT wait_until($$SELECT state = 'done' FROM webhook_ingest.jobs WHERE external_id = 'paused-post'$$);

-- the views, from the worker's figures in shared memory
SELECT source, done_last_hour > 0 AS done, retried_last_hour > 0 AS retried, dead > 0 AS dead,
       pending, running
  FROM webhook_ingest.queue_stats WHERE source IN ('blog', 'broken', 'flaky', 'slowblog') ORDER BY source;
-- slowblog's two fetches, 400 ms and 1 s, within the histogram's resolution
SELECT source, jobs, fetch_p50_ms BETWEEN 360 AND 480 AS p50_400ms, fetch_p99_ms BETWEEN 900 AND 1300 AS p99_1s,
       done_p50_ms >= fetch_p50_ms AS done_after_fetch,
       fetch_p50_ms <= fetch_p95_ms AND fetch_p95_ms <= fetch_p99_ms AS fetch_ordered,
       done_p50_ms <= done_p95_ms AND done_p95_ms <= done_p99_ms AS done_ordered
  FROM webhook_ingest.latency WHERE source = 'slowblog';
SELECT count(*) > 0 AS blog_measured FROM webhook_ingest.latency WHERE source = 'blog' AND fetch_p99_ms < 1000;
-- milliseconds to 0.1 (as text: no 1116.7765254005983)
SELECT bool_and(v::text ~ '^[0-9]+(\.[0-9])?$') AS latency_in_tenths
  FROM webhook_ingest.latency,
       unnest(ARRAY[done_p50_ms, done_p95_ms, done_p99_ms, fetch_p50_ms, fetch_p95_ms, fetch_p99_ms]) v;
SELECT bool_and(fetch_ms::text ~ '^[0-9]+(\.[0-9])?$') AS failures_in_tenths FROM webhook_ingest.recent_failures;
-- the latest failures, newest first: broken's 500s, the dead one last
SELECT source, external_id, attempt, http_status, error, outcome
  FROM webhook_ingest.recent_failures WHERE source = 'broken' ORDER BY failed_at DESC, attempt DESC LIMIT 3;
SELECT count(*) AS cancelled_failures FROM webhook_ingest.recent_failures WHERE external_id = 'cancelled-post';

-- retention (1 hour in worker.conf): done jobs past it are deleted, others kept
UPDATE webhook_ingest.jobs SET finished_at = now() - interval '2 hours' WHERE source = 'flaky';
UPDATE webhook_ingest.jobs SET finished_at = now() - interval '2 hours' WHERE source = 'broken';
SELECT wait_until($$SELECT NOT EXISTS (SELECT FROM webhook_ingest.jobs WHERE source = 'flaky')$$);
SELECT source, state FROM webhook_ingest.jobs WHERE source IN ('flaky', 'broken');

-- nothing is left running or leased
SELECT count(*) AS running FROM webhook_ingest.jobs WHERE state = 'running' OR lease_until IS NOT NULL;
