-- Scheduling against test/upstream.py on 127.0.0.1:18080 (issue 11): fair
-- claims across sources, weights, the token bucket, max_in_flight, the
-- source-wide pause on 429 / rate-limit headers, and the limits' validation.
-- Every check prints a boolean; the timings stay out of the expected output.
\set VERBOSITY terse
\set SHOW_CONTEXT never

\i test/worker/wait_until.sql

-- What the upstream answered, per job: the handler keeps the body.
CREATE TABLE sched_calls (external_id text PRIMARY KEY, details jsonb, handled_at timestamptz);
CREATE FUNCTION keep(external_id text, details jsonb, payload jsonb) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO sched_calls VALUES (external_id, details, clock_timestamp())
    ON CONFLICT (external_id) DO UPDATE SET details = EXCLUDED.details, handled_at = EXCLUDED.handled_at
$$;

-- The SQLSTATE a statement raises ('ok' if none).
CREATE FUNCTION sqlstate_of(stmt text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;

-- The most requests of a source queue_stats showed in flight at once, sampled
-- every 10 ms until the source has no pending or running job left.
CREATE FUNCTION in_flight_peak(src text, timeout interval DEFAULT '20 s') RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    deadline timestamptz := clock_timestamp() + timeout;
    peak integer := 0;
    now_in_flight integer;
BEGIN
    LOOP
        PERFORM pg_stat_clear_snapshot();
        SELECT q.in_flight INTO now_in_flight FROM webhook_ingest.queue_stats q WHERE q.source = src;
        peak := greatest(peak, now_in_flight);
        EXIT WHEN NOT EXISTS (SELECT FROM webhook_ingest.jobs j
                               WHERE j.source = src AND j.state IN ('pending', 'running'))
               OR clock_timestamp() > deadline;
        PERFORM pg_sleep(0.01);
    END LOOP;
    RETURN peak;
END $$;

SELECT wait_until($$SELECT EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker')$$);

-- the defaults do not bottleneck
SHOW webhook_ingest.max_concurrent_requests;
SHOW webhook_ingest.max_host_connections;

--
-- (a) fairness: a 20 000-job backlog of one source (200 ms upstream, 100 in
-- flight: a drain of about 40 s) does not hold up another source's webhook.
--
ALTER SYSTEM SET webhook_ingest.max_concurrent_requests = 100;
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);
SELECT webhook_ingest.add_source('backlog', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=200',
                                 'keep(text,jsonb,jsonb)', timeout_ms => 30000);
SELECT webhook_ingest.add_source('small', 'http://127.0.0.1:18080/posts/{external_id}', 'keep(text,jsonb,jsonb)');
SELECT count(*) = 20000 AS backlog_enqueued
  FROM generate_series(1, 20000) i, webhook_ingest.enqueue('backlog', 'backlog-' || i) e;
SELECT pg_sleep(1);
SELECT outcome FROM webhook_ingest.enqueue('small', 'small-1');
SELECT wait_until($$SELECT state = 'done' FROM webhook_ingest.jobs WHERE source = 'small'$$, '10 s') AS small_done;
SELECT finished_at - created_at < interval '2 s' AS small_done_within_2s
  FROM webhook_ingest.jobs WHERE source = 'small';
-- while the backlog still drains, 100 at a time
SELECT count(*) > 10000 AS backlog_still_pending FROM webhook_ingest.jobs WHERE source = 'backlog' AND state = 'pending';
SELECT in_flight BETWEEN 1 AND 100 AS capped_at_100 FROM webhook_ingest.worker_status WHERE role = 'fetcher';
SELECT webhook_ingest.drop_source('backlog', force => true);
ALTER SYSTEM RESET webhook_ingest.max_concurrent_requests;
SELECT pg_reload_conf();
SELECT wait_until($$SELECT in_flight = 0 FROM webhook_ingest.worker_status WHERE role = 'fetcher'$$) AS backlog_drained;

--
-- (b) token bucket: 20 requests/s with a burst of 2.  From the arrival times at
-- the upstream: no span of requests holds more than burst + rate * duration
-- (+1 for the edges), the 40 took at least (40 - 2) / 20 s (less slack), and
-- nobody was charged an attempt for waiting.
--
SELECT webhook_ingest.add_source('bucket', 'http://127.0.0.1:18080/stamp/{external_id}', 'keep(text,jsonb,jsonb)',
                                 rate_limit => 20, rate_burst => 2);
SELECT count(*) = 40 AS bucket_enqueued
  FROM generate_series(1, 40) i, webhook_ingest.enqueue('bucket', 'bucket-' || i) e;
SELECT wait_until($$SELECT count(*) = 40 FROM webhook_ingest.jobs WHERE source = 'bucket' AND state = 'done'$$,
                  '20 s') AS bucket_done;
WITH t AS (SELECT (details->>'at')::float8 AS at, row_number() OVER (ORDER BY (details->>'at')::float8) AS n
             FROM sched_calls WHERE external_id LIKE 'bucket-%')
SELECT count(*) = 40 AS all_stamped,
       (SELECT bool_and(b.n - a.n + 1 <= 2 + 20 * (b.at - a.at) + 1) FROM t a JOIN t b ON b.n > a.n) AS within_bucket,
       max(at) - min(at) >= 1.7 AS not_faster_than_the_rate,
       max(at) - min(at) < 8 AS not_stalled
  FROM t;
SELECT bool_and(attempts = 1) AS one_attempt_each, bool_and(last_status = 200) AS all_200
  FROM webhook_ingest.jobs WHERE source = 'bucket';
-- without rate_burst the bucket holds max(1, ceil(rate_limit / 10)): 1 at 10/s
SELECT webhook_ingest.add_source('bucket1', 'http://127.0.0.1:18080/stamp/{external_id}', 'keep(text,jsonb,jsonb)',
                                 rate_limit => 10);
SELECT rate_burst IS NULL AS burst_defaulted FROM webhook_ingest.sources WHERE name = 'bucket1';
SELECT count(*) = 6 AS bucket1_enqueued
  FROM generate_series(1, 6) i, webhook_ingest.enqueue('bucket1', 'bucket1-' || i) e;
SELECT wait_until($$SELECT count(*) = 6 FROM webhook_ingest.jobs WHERE source = 'bucket1' AND state = 'done'$$,
                  '10 s') AS bucket1_done;
WITH t AS (SELECT (details->>'at')::float8 AS at, row_number() OVER (ORDER BY (details->>'at')::float8) AS n
             FROM sched_calls WHERE external_id LIKE 'bucket1-%')
SELECT (SELECT bool_and(b.n - a.n + 1 <= 1 + 10 * (b.at - a.at) + 1) FROM t a JOIN t b ON b.n > a.n) AS within_bucket,
       max(at) - min(at) >= 0.4 AS not_faster_than_the_rate
  FROM t;

--
-- (c) a 429 (or a 503) with Retry-After: 2 pauses the whole source: the 20
-- webhooks that come in meanwhile wait (pending, not charged) and none
-- reaches the upstream inside the window; the job that got the 429 counts one
-- attempt.
--
SELECT webhook_ingest.add_source('quota', 'http://127.0.0.1:18080/quota/{external_id}?key=c', 'keep(text,jsonb,jsonb)');
SELECT webhook_ingest.add_source('unavailable', 'http://127.0.0.1:18080/quota/{external_id}?key=c503&status=503',
                                 'keep(text,jsonb,jsonb)');
SELECT outcome FROM webhook_ingest.enqueue('quota', 'quota-0');
SELECT outcome FROM webhook_ingest.enqueue('unavailable', 'unavailable-0');
SELECT wait_until($$SELECT count(*) = 2 FROM webhook_ingest.jobs
                    WHERE source IN ('quota', 'unavailable') AND attempts = 1 AND state = 'pending'$$) AS got_429_503;
SELECT source, last_status FROM webhook_ingest.jobs WHERE source IN ('quota', 'unavailable') ORDER BY source;
-- (queue_stats shows the worker's state as published every 100 ms or so)
SELECT wait_until($$SELECT count(*) = 2 FROM webhook_ingest.queue_stats
                    WHERE source IN ('quota', 'unavailable') AND throttled_until > now()$$, '1 s') AS throttled;
SELECT source, throttled_until <= now() + interval '2 s' AS for_retry_after, throttled_by
  FROM webhook_ingest.queue_stats WHERE source IN ('quota', 'unavailable') ORDER BY source;
SELECT count(*) = 40 AS quota_enqueued
  FROM generate_series(1, 20) i, unnest(ARRAY['quota', 'unavailable']) s, webhook_ingest.enqueue(s, s || '-' || i) e;
SELECT pg_sleep(0.5);
SELECT count(*) = 40 AS held_back FROM webhook_ingest.jobs
 WHERE source IN ('quota', 'unavailable') AND external_id NOT LIKE '%-0' AND state = 'pending' AND attempts = 0;
SELECT wait_until($$SELECT count(*) = 42 FROM webhook_ingest.jobs
                    WHERE source IN ('quota', 'unavailable') AND state = 'done'$$, '15 s') AS quota_done;
SELECT j.source, count(*) AS answered, bool_and((c.details->>'during')::int = 0) AS none_inside_window
  FROM webhook_ingest.jobs j JOIN sched_calls c USING (external_id)
 WHERE j.source IN ('quota', 'unavailable') GROUP BY j.source ORDER BY j.source;
SELECT source, external_id LIKE '%-0' AS throttled_first, attempts, count(*)
  FROM webhook_ingest.jobs WHERE source IN ('quota', 'unavailable') GROUP BY 1, 2, 3 ORDER BY 1, 2;
SELECT wait_until($$SELECT bool_and(throttled_until IS NULL AND throttled_by IS NULL) FROM webhook_ingest.queue_stats
                    WHERE source IN ('quota', 'unavailable')$$, '1 s') AS no_longer_throttled;

-- a throttle is cleared early by resume_source, and by alter_source (the
-- upstream says Retry-After: 60 once and answers at once afterwards)
SELECT webhook_ingest.add_source('resumed', 'http://127.0.0.1:18080/quota/{external_id}?key=resume&retry_after=60&window=0',
                                 'keep(text,jsonb,jsonb)');
SELECT webhook_ingest.add_source('altered', 'http://127.0.0.1:18080/quota/{external_id}?key=alter&retry_after=60&window=0',
                                 'keep(text,jsonb,jsonb)');
SELECT outcome FROM webhook_ingest.enqueue('resumed', 'resumed-0');
SELECT outcome FROM webhook_ingest.enqueue('altered', 'altered-0');
SELECT wait_until($$SELECT count(*) = 2 FROM webhook_ingest.jobs
                    WHERE source IN ('resumed', 'altered') AND attempts = 1 AND last_status = 429$$) AS both_got_429;
SELECT count(*) = 6 AS enqueued
  FROM generate_series(1, 3) i, unnest(ARRAY['resumed', 'altered']) s, webhook_ingest.enqueue(s, s || '-' || i) e;
SELECT pg_sleep(0.3);
SELECT wait_until($$SELECT count(*) = 2 FROM webhook_ingest.queue_stats
                    WHERE source IN ('resumed', 'altered') AND throttled_until > now() + interval '50 s'$$, '1 s')
       AS throttled_for_a_minute;
SELECT count(*) = 6 AS held_back FROM webhook_ingest.jobs
 WHERE source IN ('resumed', 'altered') AND external_id NOT LIKE '%-0' AND state = 'pending' AND attempts = 0;
SELECT webhook_ingest.resume_source('resumed');
SELECT webhook_ingest.alter_source('altered', timeout_ms => 5000);
SELECT wait_until($$SELECT count(*) = 2 FROM webhook_ingest.queue_stats
                    WHERE source IN ('resumed', 'altered') AND throttled_until IS NULL$$, '1 s') AS cleared;
SELECT wait_until($$SELECT count(*) = 6 FROM webhook_ingest.jobs
                    WHERE source IN ('resumed', 'altered') AND external_id NOT LIKE '%-0' AND state = 'done'$$,
                  '10 s') AS held_back_done;
SELECT webhook_ingest.drop_source('resumed', force => true);
SELECT webhook_ingest.drop_source('altered', force => true);

--
-- (d) rate-limit headers that say the budget is spent pause the source until
-- the reset: GitHub's X-RateLimit-Reset (epoch seconds, or seconds from now
-- below 10^9) and the IETF draft's RateLimit-Reset (seconds).  A budget of 3
-- per 2 s, one request at a time, 6 jobs: 3 go, 3 wait for the reset.
--
SELECT webhook_ingest.add_source('github', 'http://127.0.0.1:18080/ghlimit/{external_id}?key=d',
                                 'keep(text,jsonb,jsonb)', max_in_flight => 1);
SELECT webhook_ingest.add_source('github_rel', 'http://127.0.0.1:18080/ghlimit/{external_id}?key=d_rel&relative=1',
                                 'keep(text,jsonb,jsonb)', max_in_flight => 1);
SELECT webhook_ingest.add_source('ietf', 'http://127.0.0.1:18080/ietflimit/{external_id}?key=d',
                                 'keep(text,jsonb,jsonb)', max_in_flight => 1);
SELECT count(*) = 18 AS limits_enqueued
  FROM generate_series(1, 6) i, unnest(ARRAY['github', 'github_rel', 'ietf']) s,
       webhook_ingest.enqueue(s, s || '-' || i) e;
SELECT wait_until($$SELECT count(*) = 9 FROM webhook_ingest.jobs
                    WHERE source IN ('github', 'github_rel', 'ietf') AND state = 'done'$$) AS first_three_each;
SELECT wait_until($$SELECT count(*) = 3 FROM webhook_ingest.queue_stats
                    WHERE source IN ('github', 'github_rel', 'ietf') AND throttled_until > now()$$, '1 s')
       AS all_throttled;
SELECT source, throttled_by FROM webhook_ingest.queue_stats
 WHERE source IN ('github', 'github_rel', 'ietf') ORDER BY source;
SELECT source, count(*) FILTER (WHERE state = 'done') AS done,
       count(*) FILTER (WHERE state = 'pending' AND attempts = 0) AS held_back
  FROM webhook_ingest.jobs WHERE source IN ('github', 'github_rel', 'ietf') GROUP BY source ORDER BY source;
SELECT wait_until($$SELECT count(*) = 18 FROM webhook_ingest.jobs
                    WHERE source IN ('github', 'github_rel', 'ietf') AND state = 'done'$$, '15 s') AS limits_done;
SELECT j.source, string_agg(c.details->>'remaining', ',' ORDER BY c.handled_at) AS remaining_seen,
       bool_and((c.details->>'during')::int = 0) AS none_before_reset,
       bool_and(j.attempts = 1) AS one_attempt_each
  FROM webhook_ingest.jobs j JOIN sched_calls c USING (external_id)
 WHERE j.source IN ('github', 'github_rel', 'ietf') GROUP BY j.source ORDER BY j.source;
-- the first three went at once (a budget left is no pause), the fourth waited for the reset (2 s)
WITH t AS (SELECT j.source, (c.details->>'at')::float8 AS at,
                  row_number() OVER (PARTITION BY j.source ORDER BY (c.details->>'at')::float8) AS n
             FROM webhook_ingest.jobs j JOIN sched_calls c USING (external_id)
            WHERE j.source IN ('github', 'github_rel', 'ietf'))
SELECT source, max(at) FILTER (WHERE n = 3) - min(at) < 1.5 AS first_three_at_once,
       max(at) FILTER (WHERE n = 4) - max(at) FILTER (WHERE n = 3) >= 1.5 AS fourth_after_the_reset
  FROM t GROUP BY source ORDER BY source;

--
-- (e) max_in_flight 3: the upstream never sees more than 3 requests of the
-- source at once (and does see more than one), nor does queue_stats.
--
SELECT webhook_ingest.add_source('capped', 'http://127.0.0.1:18080/concurrent/{external_id}?key=e&delay_ms=300',
                                 'keep(text,jsonb,jsonb)', max_in_flight => 3);
SELECT count(*) = 12 AS capped_enqueued
  FROM generate_series(1, 12) i, webhook_ingest.enqueue('capped', 'capped-' || i) e;
SELECT in_flight_peak('capped') BETWEEN 1 AND 3 AS view_peak_at_most_3;
SELECT wait_until($$SELECT count(*) = 12 FROM webhook_ingest.jobs WHERE source = 'capped' AND state = 'done'$$)
       AS capped_done;
SELECT max((details->>'peak')::int) <= 3 AS upstream_peak_at_most_3,
       max((details->>'peak')::int) >= 2 AS upstream_peak_at_least_2
  FROM sched_calls WHERE external_id LIKE 'capped-%';

--
-- (f) weights: two backlogs due at once, weights 3 and 1, 12 slots: over the
-- first seconds the heavier source gets about three times the fetches.
--
ALTER SYSTEM SET webhook_ingest.max_concurrent_requests = 12;
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);
SELECT webhook_ingest.add_source('heavy', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=200',
                                 'keep(text,jsonb,jsonb)', weight => 3);
SELECT webhook_ingest.add_source('light', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=200',
                                 'keep(text,jsonb,jsonb)', weight => 1);
SELECT count(*) = 2000 AS weighted_enqueued
  FROM generate_series(1, 1000) i, unnest(ARRAY['heavy', 'light']) s, webhook_ingest.enqueue(s, s || '-' || i) e;
SELECT pg_sleep(3);
SELECT heavy > 0 AND light > 0 AS both_served, heavy::float8 / nullif(light, 0) BETWEEN 2 AND 4.5 AS about_3_to_1
  FROM (SELECT count(*) FILTER (WHERE source = 'heavy') AS heavy, count(*) FILTER (WHERE source = 'light') AS light
          FROM webhook_ingest.jobs WHERE source IN ('heavy', 'light') AND state IN ('running', 'done')) c;
SELECT webhook_ingest.drop_source('heavy', force => true);
SELECT webhook_ingest.drop_source('light', force => true);
-- a heavy source held to max_in_flight 2 leaves the other slots to the light one
SELECT webhook_ingest.add_source('heavy_capped', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=200',
                                 'keep(text,jsonb,jsonb)', weight => 100, max_in_flight => 2);
SELECT webhook_ingest.add_source('light_free', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=200',
                                 'keep(text,jsonb,jsonb)');
SELECT count(*) = 1000 AS capped_backlogs_enqueued
  FROM generate_series(1, 500) i, unnest(ARRAY['heavy_capped', 'light_free']) s, webhook_ingest.enqueue(s, s || '-' || i) e;
SELECT wait_until($$SELECT in_flight >= 8 FROM webhook_ingest.queue_stats WHERE source = 'light_free'$$, '5 s')
       AS light_gets_the_rest;
SELECT in_flight BETWEEN 1 AND 2 AS heavy_held_to_2 FROM webhook_ingest.queue_stats WHERE source = 'heavy_capped';
SELECT webhook_ingest.drop_source('heavy_capped', force => true);
SELECT webhook_ingest.drop_source('light_free', force => true);
ALTER SYSTEM RESET webhook_ingest.max_concurrent_requests;
SELECT pg_reload_conf();
SELECT wait_until($$SELECT in_flight = 0 FROM webhook_ingest.worker_status WHERE role = 'fetcher'$$) AS weighted_drained;

--
-- (g) the limits are checked: SQLSTATE 22023 for a bad value, on add and alter;
-- reset_limits clears rate_limit, rate_burst and max_in_flight
--
SELECT sqlstate_of($$SELECT webhook_ingest.add_source('bad', 'http://127.0.0.1:18080/posts/{external_id}', weight => 0)$$)
       = '22023' AS weight_0,
       sqlstate_of($$SELECT webhook_ingest.add_source('bad', 'http://127.0.0.1:18080/posts/{external_id}', weight => 1001)$$)
       = '22023' AS weight_1001;
SELECT sqlstate_of($$SELECT webhook_ingest.add_source('bad', 'http://127.0.0.1:18080/posts/{external_id}', rate_limit => 0)$$)
       = '22023' AS rate_limit_0,
       sqlstate_of($$SELECT webhook_ingest.add_source('bad', 'http://127.0.0.1:18080/posts/{external_id}', rate_limit => -1)$$)
       = '22023' AS rate_limit_negative,
       sqlstate_of($$SELECT webhook_ingest.add_source('bad', 'http://127.0.0.1:18080/posts/{external_id}', rate_limit => 'NaN')$$)
       = '22023' AS rate_limit_nan,
       sqlstate_of($$SELECT webhook_ingest.add_source('bad', 'http://127.0.0.1:18080/posts/{external_id}', rate_limit => 'Infinity')$$)
       = '22023' AS rate_limit_infinite,
       sqlstate_of($$SELECT webhook_ingest.add_source('bad', 'http://127.0.0.1:18080/posts/{external_id}', rate_limit => 0.0001)$$)
       = '22023' AS rate_limit_below_a_thousandth;
SELECT sqlstate_of($$SELECT webhook_ingest.add_source('bad', 'http://127.0.0.1:18080/posts/{external_id}', rate_burst => 5)$$)
       = '22023' AS burst_without_rate,
       sqlstate_of($$SELECT webhook_ingest.add_source('bad', 'http://127.0.0.1:18080/posts/{external_id}', rate_limit => 5, rate_burst => 0)$$)
       = '22023' AS burst_0,
       sqlstate_of($$SELECT webhook_ingest.add_source('bad', 'http://127.0.0.1:18080/posts/{external_id}', max_in_flight => 0)$$)
       = '22023' AS max_in_flight_0,
       sqlstate_of($$SELECT webhook_ingest.add_source('bad', 'http://127.0.0.1:18080/posts/{external_id}', max_in_flight => -1)$$)
       = '22023' AS max_in_flight_negative;
SELECT NOT EXISTS (SELECT FROM webhook_ingest.sources WHERE name = 'bad') AS none_added;
SELECT sqlstate_of($$SELECT webhook_ingest.alter_source('small', weight => 0)$$) = '22023' AS alter_weight_0,
       sqlstate_of($$SELECT webhook_ingest.alter_source('small', rate_limit => 0)$$) = '22023' AS alter_rate_limit_0,
       sqlstate_of($$SELECT webhook_ingest.alter_source('small', rate_burst => 3)$$) = '22023' AS alter_burst_without_rate,
       sqlstate_of($$SELECT webhook_ingest.alter_source('small', max_in_flight => 0)$$) = '22023' AS alter_max_in_flight_0;
SELECT webhook_ingest.alter_source('small', weight => 7, rate_limit => 2.5, rate_burst => 4, max_in_flight => 9);
SELECT weight, rate_limit, rate_burst, max_in_flight FROM webhook_ingest.sources WHERE name = 'small';
SELECT webhook_ingest.alter_source('small', reset_limits => true);
SELECT weight, rate_limit, rate_burst, max_in_flight FROM webhook_ingest.sources WHERE name = 'small';
SELECT webhook_ingest.alter_source('small', rate_limit => 2.5);
SELECT sqlstate_of($$SELECT webhook_ingest.alter_source('small', rate_burst => 3)$$) = 'ok' AS burst_with_rate_set;
SELECT weight, rate_limit, rate_burst, max_in_flight FROM webhook_ingest.sources WHERE name = 'small';
