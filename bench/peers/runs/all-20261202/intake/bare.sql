\set ev random(1000000, 1000000000000000)
\set obj random(1, 1000000000000000)
INSERT INTO bare_events (event_id) VALUES (:ev) ON CONFLICT DO NOTHING
;
