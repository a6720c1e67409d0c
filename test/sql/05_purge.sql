-- Event ids are remembered for webhook_ingest.dedup_window, then forgotten in batches.
\set VERBOSITY default
\set SHOW_CONTEXT never

SHOW webhook_ingest.dedup_window;
SET webhook_ingest.dedup_window = '1h';
\echo :SQLSTATE
SELECT webhook_ingest.add_source('purge', 'http://127.0.0.1:8080/p/{external_id}');
SELECT count(*) FROM (SELECT webhook_ingest.enqueue('purge', 'p' || i % 7, NULL, 'old-' || i) FROM generate_series(1, 25) i) s;
SELECT outcome FROM webhook_ingest.enqueue('purge', 'p1', NULL, 'recent');
-- age 25 ids past the window, keep one inside it
UPDATE webhook_ingest.events SET received_at = now() - interval '8 days' WHERE source = 'purge' AND event_id LIKE 'old-%';
UPDATE webhook_ingest.events SET received_at = now() - interval '6 days' WHERE source = 'purge' AND event_id = 'recent';
-- still remembered until purged
SELECT outcome FROM webhook_ingest.enqueue('purge', 'p3', NULL, 'old-3');
SELECT webhook_ingest.purge_events(10);
SELECT webhook_ingest.purge_events(10);
SELECT webhook_ingest.purge_events();
SELECT webhook_ingest.purge_events();
SELECT event_id FROM webhook_ingest.events WHERE source = 'purge';
-- a forgotten event id is new again; the remembered one is still a duplicate
SELECT outcome FROM webhook_ingest.enqueue('purge', 'p3', NULL, 'old-3');
SELECT outcome FROM webhook_ingest.enqueue('purge', 'p1', NULL, 'recent');
SELECT webhook_ingest.purge_events(0);
\echo :SQLSTATE
