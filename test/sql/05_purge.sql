-- Event ids are remembered for webhook_ingest.dedup_window, then forgotten by
-- purge_events(), which walks the table in page slices.
\set VERBOSITY default
\set SHOW_CONTEXT never

SHOW webhook_ingest.dedup_window;
SET webhook_ingest.dedup_window = '1h';
\echo :SQLSTATE
SELECT webhook_ingest.add_source('purge', 'http://127.0.0.1:8080/p/{external_id}');
-- enough ids to fill several pages
SELECT count(*) FROM (SELECT webhook_ingest.enqueue('purge', 'p' || i % 7, NULL, 'old-' || i) FROM generate_series(1, 1000) i) s;
SELECT outcome FROM webhook_ingest.enqueue('purge', 'p1', NULL, 'recent');
SELECT pg_relation_size('webhook_ingest.event_ledger') / current_setting('block_size')::int > 3 AS several_pages;
-- age the 1000 ids past the window, keep one inside it
UPDATE webhook_ingest.events SET received_at = now() - interval '8 days' WHERE source = 'purge' AND event_id LIKE 'old-%';
UPDATE webhook_ingest.events SET received_at = now() - interval '6 days' WHERE source = 'purge' AND event_id = 'recent';
VACUUM webhook_ingest.event_ledger;
-- still remembered until purged
SELECT outcome FROM webhook_ingest.enqueue('purge', 'p3', NULL, 'old-3');
-- one page per call: each call forgets some, none forgets all (the walk
-- starts at the first page holding ids: the updates above moved them all)
UPDATE webhook_ingest.purge_position
   SET next_page = (SELECT min((ctid::text::point)[0]) FROM webhook_ingest.event_ledger)::bigint;
CREATE TEMP TABLE purged AS SELECT webhook_ingest.purge_events(1) AS n;
SELECT n > 0 AND n < 1000 AS partial FROM purged;
-- keep walking until the ids are gone; the walk wraps around at the end of the table
DO $$
BEGIN
    FOR i IN 1..100 LOOP
        EXIT WHEN NOT EXISTS (SELECT FROM webhook_ingest.events WHERE event_id LIKE 'old-%');
        PERFORM webhook_ingest.purge_events(1);
    END LOOP;
END
$$;
SELECT event_id FROM webhook_ingest.events WHERE source = 'purge';
SELECT webhook_ingest.purge_events();
-- a forgotten event id is new again; the remembered one is still a duplicate
SELECT outcome FROM webhook_ingest.enqueue('purge', 'p3', NULL, 'old-3');
SELECT outcome FROM webhook_ingest.enqueue('purge', 'p1', NULL, 'recent');
SELECT webhook_ingest.purge_events(0);
\echo :SQLSTATE
