-- Audit 0.10.0, third pass, item 3 (test/audit/FINDINGS-0.10.0-third.md):
-- dead jobs kept their payloads for ever.  With max_attempts 1 and an
-- upstream answering 400, eight webhooks of 875 kB for one object, each
-- after the job before it died, left eight dead rows holding 7 MB that
-- retention never removes.  Now an object keeps one dead job (the older
-- ones go into the newer), and a source's dead jobs keep at most
-- webhook_ingest.dead_payload_limit of payloads (a counted drop past it).
\set VERBOSITY terse
\set SHOW_CONTEXT never
\i test/worker/wait_until.sql

SELECT webhook_ingest.add_source('f', 'http://127.0.0.1:18080/badrequest/{external_id}', max_attempts => 1);
-- An 875 kB payload that does not compress (hex of md5s).
CREATE FUNCTION big_payload(seed text, kb int) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object('blob', string_agg(md5(seed || ':' || i), '')) FROM generate_series(1, kb * 32) i $$;
-- Enqueue one webhook for each object, wait until no job of theirs is active; n times over.
CREATE PROCEDURE die_in_turn(objects text[], n int, kb int) LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..n LOOP
        PERFORM webhook_ingest.enqueue('f', o, big_payload(o || i, kb)) FROM unnest(objects) o;
        COMMIT;
        PERFORM wait_until(format($q$SELECT NOT EXISTS (SELECT FROM webhook_ingest.queue
                                     WHERE source = 'f' AND external_id = ANY (%L) AND state IN ('pending', 'running'))$q$,
                                  objects));
    END LOOP;
END $$;
-- The accounting agrees with the rows: what dead_payloads says the source keeps, and what it keeps.
CREATE FUNCTION dead_of_f(OUT dead_jobs bigint, OUT webhooks bigint, OUT with_payload bigint, OUT mb numeric,
                          OUT counted boolean, OUT dropped bigint) LANGUAGE sql AS $$
    SELECT count(*), sum(q.events), count(q.payload),
           round(coalesce(sum(webhook_ingest._payload_size(q.payload)), 0) / 1048576.0, 1),
           coalesce(sum(webhook_ingest._payload_size(q.payload)), 0) = coalesce(p.bytes, 0), coalesce(p.dropped, 0)
      FROM webhook_ingest.queue q
      LEFT JOIN webhook_ingest.dead_payloads p ON p.source = 'f'
     WHERE q.source = 'f' AND q.state = 'dead'
     GROUP BY p.bytes, p.dropped $$;

-- 1. per object: eight deaths of one object leave one dead job, its 8 webhooks, one payload
CALL die_in_turn('{mode-e400}', 8, 875);
SELECT count(*) AS dead_rows, round(sum(pg_column_size(payload)) / 1048576.0, 1) AS payload_mb
  FROM webhook_ingest.queue WHERE source = 'f' AND state = 'dead';
SELECT * FROM dead_of_f();
SELECT external_id, events, attempts, last_status FROM webhook_ingest.jobs WHERE source = 'f' AND state = 'dead';

-- 2. per source: at most dead_payload_limit (2 MB here) of payloads; past it a dying job loses its
--    payload (its row stays, last_error says so, dead_payloads counts it)
ALTER SYSTEM SET webhook_ingest.dead_payload_limit = '2MB';
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);
CALL die_in_turn('{c-1,c-2,c-3,c-4}', 1, 875);
SELECT * FROM dead_of_f();
SELECT count(*) AS noted FROM webhook_ingest.queue
 WHERE source = 'f' AND state = 'dead' AND payload IS NULL
   AND last_error LIKE '%(payload dropped: the source''s dead jobs keep webhook_ingest.dead_payload_limit)';

-- 3. retry_dead: every object once more, dead again; still one job each, the accounting still right
SELECT webhook_ingest.retry_dead('f');
SELECT wait_until($$SELECT NOT EXISTS (SELECT FROM webhook_ingest.queue
                                        WHERE source = 'f' AND state IN ('pending', 'running'))$$);
SELECT dead_jobs, webhooks, mb <= 2 AS within_limit, counted FROM dead_of_f();

-- 4. a dead job deleted by hand is caught up by the recount at a later death (made due here)
DELETE FROM webhook_ingest.queue WHERE source = 'f' AND external_id = 'mode-e400';
UPDATE webhook_ingest.dead_payloads SET counted_at = now() - interval '1 hour' WHERE source = 'f';
CALL die_in_turn('{c-5}', 1, 10);
SELECT dead_jobs, webhooks, counted FROM dead_of_f();
-- 5. the event ids of the dead jobs an object's newer one takes in go with them: history() lists them all
--    under the one dead job
CREATE PROCEDURE die_with_events(object text, n int) LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..n LOOP
        PERFORM webhook_ingest.enqueue('f', object, '{}', object || '-ev-' || i);
        COMMIT;
        PERFORM wait_until(format($q$SELECT NOT EXISTS (SELECT FROM webhook_ingest.queue
                                     WHERE source = 'f' AND external_id = %L AND state IN ('pending', 'running'))$q$,
                                  object));
    END LOOP;
END $$;
CALL die_with_events('hist-1', 3);
SELECT state, webhooks, event_ids FROM webhook_ingest.history('f', 'hist-1');
DROP PROCEDURE die_with_events(text, int);
SELECT webhook_ingest.drop_source('f', force => true);
DELETE FROM webhook_ingest.dead_payloads WHERE source = 'f';
ALTER SYSTEM RESET webhook_ingest.dead_payload_limit;
SELECT pg_reload_conf();
DROP PROCEDURE die_in_turn(text[], int, int);
DROP FUNCTION dead_of_f(), big_payload(text, int);
