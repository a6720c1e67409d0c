-- Reconciliation (issue 30, part A): the settings on add_source and
-- alter_source; list pages of the test upstream in the shapes of GitHub,
-- Shopify and Stripe, fetched here and handed to _reconcile_page as an
-- apply worker will; the fetcher's claim of due pages; the version kept per
-- object and recorded when a job completes (_reconcile_fetched); bad pages;
-- the missed-webhook figures.  The worker is off (regress.conf): this test
-- plays it (test/data/reconcile_client.sql).
\set VERBOSITY default
\set SHOW_CONTEXT never
-- test/: pg_regress 15+ names it in PG_ABS_SRCDIR; before, the suite runs from the tree's top
\set abs_srcdir `echo "${PG_ABS_SRCDIR:-$PWD/test}"`
SELECT set_config('wi.dir', :'abs_srcdir', false) IS NOT NULL AS dir_set;
-- the upstream's worlds of this run (shown as K): a fresh key each run
SELECT 'r21x' || left(md5(random()::text), 12) AS key \gset
SELECT set_config('wi.key', :'key', false) IS NOT NULL AS key_set;
\set ECHO none
\i :abs_srcdir/data/reconcile_client.sql
\set ECHO all
\set up 'http://127.0.0.1:18080'
\set gh_list :up/github/repos/acme/app/issues?key=:key&state=all&sort=updated&direction=asc&per_page=5&since={since}

-- 1. Settings: off unless configured; each bad one refused with 22023 and nothing written
SELECT key, type, default_value FROM webhook_ingest._reconcile_keys();
SELECT webhook_ingest.add_source('plain', 'http://127.0.0.1:9/p/{external_id}');
SELECT count(*) AS reconciling FROM webhook_ingest.reconcile_settings;
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '[]')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://127.0.0.1:9/l", "pages": 3}')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"every": "1 hour"}')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "ftp://127.0.0.1/l"}')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://127.0.0.1:9/l?after={cursor}"}')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://127.0.0.1:9/l?x={external_id}"}')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://{since}/l"}')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://127.0.0.1:9/l", "next_url": "http://127.0.0.1:9/l?page=2", "cursor": "$.next"}')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://127.0.0.1:9/l", "next_url": "http://127.0.0.1:9/l?after={cursor}"}')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://127.0.0.1:9/l", "cursor": "$.next"}')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://127.0.0.1:9/l", "items": "$.data[*"}')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://127.0.0.1:9/l", "id": 7}')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://127.0.0.1:9/l", "version_kind": "etag"}')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://127.0.0.1:9/l", "every": "soon"}')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://127.0.0.1:9/l", "every": "400 days"}')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://127.0.0.1:9/l", "share": 0}')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://127.0.0.1:9/l", "share": 1.5}')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://127.0.0.1:9/l", "pause_backlog": 2.5}')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://127.0.0.1:9/l", "max_page_size": 100000}')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://127.0.0.1:9/l", "since": "yesterday"}')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://127.0.0.1:9/l", "since": true}')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://127.0.0.1:9/l?t={since_epoch}", "version_kind": "integer"}')$$);
SELECT count(*) AS nothing_written FROM webhook_ingest.sources WHERE name = 'r1';
-- the one with its hint and detail
SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://127.0.0.1:9/l", "cursor": "$.next"}');
SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://127.0.0.1:9/l", "sweep": "daily"}');
-- a message quotes at most about 100 bytes of what it was given
SELECT code, octet_length(message) < 200 AS clipped FROM pg_temp.try(format(
    $$SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}', reconcile => %L)$$,
    jsonb_build_object('url', 'http://127.0.0.1:9/l', 'version_kind', repeat('k', 5000))));

-- set, changed, a key back to its default, dropped
SELECT webhook_ingest.add_source('r1', 'http://127.0.0.1:9/r/{external_id}',
                                 reconcile => '{"url": "http://127.0.0.1:9/l?since={since}", "every": "10 minutes", "since": "2024-01-01T00:00:00Z"}');
SELECT url, next_url, items, id, version, version_kind, fetched_version, cursor, has_more, every,
       webhook_ingest._reconcile_url('{since}', NULL, since, version_kind) AS since, share, pause_backlog,
       max_page_size, max_pages
  FROM webhook_ingest.reconcile_settings;
SELECT page_url, watermark, next_attempt_at <= now() AS first_sweep_due FROM webhook_ingest.reconcile_sweeps;
-- a claim starts the sweep at its first page, with {since} the watermark
SELECT source, url, page, attempt, lease_until > now() AS leased FROM webhook_ingest._reconcile_claim();
SELECT count(*) AS claimed_again_while_leased FROM webhook_ingest._reconcile_claim();
-- how often and the share: the sweep under way stays
SELECT webhook_ingest.alter_source('r1', reconcile => '{"every": "1 hour", "share": 0.25}');
SELECT every, share, (SELECT page_url IS NOT NULL FROM webhook_ingest.reconcile_sweeps) AS sweep_kept
  FROM webhook_ingest.reconcile_settings;
-- the list (its id path): the sweep starts over
SELECT webhook_ingest.alter_source('r1', reconcile => '{"id": "$.number"}');
SELECT id, (SELECT page_url IS NULL AND leased_until IS NULL FROM webhook_ingest.reconcile_sweeps) AS sweep_reset
  FROM webhook_ingest.reconcile_settings;
SELECT webhook_ingest.alter_source('r1', reconcile => '{"id": null, "every": null}');
SELECT webhook_ingest.alter_source('r1', reconcile => '{"items": "$[*] ? (exists(@.pull_request))"}');
SELECT items FROM webhook_ingest.reconcile_settings;
SELECT id, every FROM webhook_ingest.reconcile_settings;
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.alter_source('r1', reconcile => '{"url": null}')$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.alter_source('r1', reconcile => '{}', drop_reconcile => true)$$);
SELECT * FROM pg_temp.try($$SELECT webhook_ingest.alter_source('plain', reconcile => '{"every": "1 day"}')$$);
SELECT webhook_ingest.alter_source('r1', drop_reconcile => true);
SELECT (SELECT count(*) FROM webhook_ingest.reconcile_settings) AS settings,
       (SELECT count(*) FROM webhook_ingest.reconcile_sweeps) AS sweeps;
SELECT webhook_ingest.drop_source('r1');
-- an admin (no superuser) sets it through add_source and alter_source, and cannot write the tables
CREATE ROLE regress_rc_admin IN ROLE webhook_ingest_admin;
CREATE ROLE regress_rc_monitor IN ROLE webhook_ingest_monitor;
SET ROLE regress_rc_admin;
SELECT webhook_ingest.add_source('r2', 'http://127.0.0.1:9/r/{external_id}', reconcile => '{"url": "http://127.0.0.1:9/l"}');
SELECT webhook_ingest.alter_source('r2', reconcile => '{"every": "1 day"}');
SELECT every FROM webhook_ingest.reconcile_settings;
UPDATE webhook_ingest.reconcile_settings SET every = '1 second';
UPDATE webhook_ingest.reconcile_sweeps SET watermark = 0;
SELECT webhook_ingest.drop_source('r2');
RESET ROLE;

-- 2. Versions and URLs: the upstream's values read without an ERROR
SELECT v AS value, webhook_ingest._reconcile_version(v, 'timestamp') AS timestamp_version,
       webhook_ingest._reconcile_version(v, 'integer') AS integer_version
  FROM (VALUES ('"2024-01-01T00:00:00Z"'::jsonb), ('"2023-12-31T19:00:05-05:00"'), ('"2024-01-01 00:00:05.25+00"'),
               ('"2024-01-01"'), ('"2024-02-29T00:00:00Z"'), ('"2023-02-29T00:00:00Z"'), ('"2024-01-01T00:00:00"'),
               ('"2024-01-01T24:00:00Z"'), ('1704067205'), ('1704067205.5'), ('"42"'), ('42'), ('4.5'), ('-3'),
               ('99999999999999999999'), ('"tomorrow"'), ('null'), ('true'), ('{"a": 1}')) t(v);
SELECT webhook_ingest._reconcile_url('http://h/l?since={since}&t={since_epoch}&after={cursor}', 'cus_1/x y',
                                     1704067205999999, 'timestamp') AS timestamp_url,
       webhook_ingest._reconcile_url('http://h/l?since={since}', NULL, 17, 'integer') AS integer_url;
SELECT webhook_ingest._reconcile_link_next(l) AS next
  FROM (VALUES ('<https://api.github.com/repositories/1/issues?page=2>; rel="next", <https://api.github.com/repositories/1/issues?page=9>; rel="last"'),
               ('<https://x.myshopify.com/admin/api/2024-01/products.json?page_info=abc>; rel="previous", <https://x.myshopify.com/admin/api/2024-01/products.json?page_info=def>; rel="next"'),
               ('</items?page=3>; rel="prev next"'), ('<https://h/l?page=2>; rel="last"'), (NULL)) t(l);

-- 3. GitHub: issues since the watermark, oldest change first, the next page from Link rel="next".
-- 30 issues; the first sweep's watermark is issue 30's time: what changed before is current.
SELECT pg_temp.up('reconcile/reset?style=github&objects=30');
SELECT webhook_ingest.add_source('gh', :'up' || '/github/repos/acme/app/issues/{external_id}?key=' || :'key',
                                 reconcile => jsonb_build_object('url', :'gh_list', 'id', '$.number',
                                                                 'version', '$.updated_at',
                                                                 'since', '2024-01-01T00:00:30Z'));
-- 20 issues change; 2 of the changes send no webhook
SELECT pg_temp.up('reconcile/change?n=20') AS changes \gset
SELECT string_agg(c ->> 'id', ' ' ORDER BY (c ->> 'version')::int) FILTER (WHERE NOT (c ->> 'webhook')::boolean)
       AS no_webhook
  FROM jsonb_array_elements((:'changes'::jsonb) -> 'changes') c;
-- the 18 webhooks are taken and their jobs done by the worker (which records the versions fetched)
SELECT pg_temp.deliver('gh', :'changes') AS webhooks;
SELECT pg_temp.complete('gh') AS fetched;
SELECT count(*) AS objects_with_a_version, count(*) FILTER (WHERE listed IS NOT NULL) AS listed
  FROM webhook_ingest.reconcile_objects;
-- the sweep: 21 issues since the watermark (30 and the 20 changed), 5 a page
SELECT * FROM pg_temp.sweep('gh');
-- exactly the two that no webhook announced are queued, as jobs no webhook announced (events 0)
SELECT external_id, state, events, payload FROM webhook_ingest.jobs
 WHERE source = 'gh' AND state <> 'done' ORDER BY external_id;
SELECT state, page, last_pages, last_listed, last_changed, last_missed, last_missed_rate, lag > '0' AS lag_shown,
       last_sweep_took >= '0' AS took_shown, sweeps, listed, changed, missed, missed_rate, reconciled_jobs
  FROM webhook_ingest.reconcile_stats WHERE source = 'gh';
-- a webhook that comes late for a reconciled pending job coalesces into it, and counts
SELECT outcome FROM webhook_ingest.enqueue('gh', :'changes'::jsonb -> 'changes' -> 9 ->> 'id',
                                           :'changes'::jsonb -> 'changes' -> 9 -> 'payload');
SELECT external_id, events, payload IS NOT NULL AS has_payload FROM webhook_ingest.jobs
 WHERE source = 'gh' AND state = 'pending' ORDER BY external_id;
-- fetched: every changed issue's version is now its newest, and none was fetched twice
SELECT pg_temp.complete('gh') AS fetched;
SELECT count(*) AS changed_issues,
       count(*) FILTER (WHERE o.version = (1704067200 + s.v::bigint) * 1000000 AND o.listed IS NULL) AS at_newest
  FROM jsonb_each_text(pg_temp.up('reconcile/state')) s(id, v)
  LEFT JOIN webhook_ingest.reconcile_objects o
         ON o.source_id = (SELECT id FROM webhook_ingest.sources WHERE name = 'gh') AND o.external_id = s.id
 WHERE s.v::int > 30;
SELECT count(*) AS done_jobs, count(*) FILTER (WHERE events = 0) AS done_with_no_webhook
  FROM webhook_ingest.jobs WHERE source = 'gh';
-- the next sweep is due an hour after this one started; then it lists from the new watermark, and finds nothing
SELECT * FROM pg_temp.step('gh');
SELECT pg_temp.later('gh');
SELECT * FROM pg_temp.sweep('gh');
SELECT last_listed, last_changed, last_missed, last_missed_rate, sweeps, changed, missed, missed_rate
  FROM webhook_ingest.reconcile_stats WHERE source = 'gh';
SELECT count(*) AS active_jobs FROM webhook_ingest.jobs WHERE source = 'gh' AND state <> 'done';

-- 4. Changes whose webhooks are still pending coalesce: not missed.  And a sweep waits while
-- the source has pause_backlog due jobs, and while it is paused.
SELECT webhook_ingest.alter_source('gh', reconcile => '{"pause_backlog": 3}');
SELECT pg_temp.up('reconcile/change?n=3') AS changes \gset
SELECT pg_temp.deliver('gh', :'changes') AS webhooks;
SELECT pg_temp.later('gh');
SELECT state FROM webhook_ingest.reconcile_stats WHERE source = 'gh';
SELECT * FROM pg_temp.step('gh');
SELECT webhook_ingest.alter_source('gh', reconcile => '{"pause_backlog": 100}');
SELECT webhook_ingest.pause_source('gh');
SELECT state FROM webhook_ingest.reconcile_stats WHERE source = 'gh';
SELECT * FROM pg_temp.step('gh');
SELECT webhook_ingest.resume_source('gh');
SELECT * FROM pg_temp.sweep('gh');
SELECT last_listed, last_changed, last_missed FROM webhook_ingest.reconcile_stats WHERE source = 'gh';
SELECT external_id, events FROM webhook_ingest.jobs WHERE source = 'gh' AND state = 'pending' ORDER BY external_id;
SELECT pg_temp.complete('gh') AS fetched;

-- 5. The cursor is a row: a new session (a restarted worker) resumes the sweep at its page.
SELECT pg_temp.up('reconcile/change?n=12') AS changes \gset
SELECT pg_temp.deliver('gh', :'changes') AS webhooks;
SELECT pg_temp.later('gh');
SELECT * FROM pg_temp.step('gh');
SELECT * FROM pg_temp.step('gh');
SELECT pg_temp.k(page_url) AS page_due, pages FROM webhook_ingest.reconcile_sweeps sw
  JOIN webhook_ingest.sources s ON s.id = sw.source_id WHERE s.name = 'gh';
-- claimed, and the worker dies with it: the page comes back when the lease ends
SELECT page, pg_temp.k(url) AS url FROM webhook_ingest._reconcile_claim(ARRAY['gh']);
\c
SELECT set_config('wi.dir', :'abs_srcdir', false) IS NOT NULL AS dir_set,
       set_config('wi.key', :'key', false) IS NOT NULL AS key_set;
\set ECHO none
\i :abs_srcdir/data/reconcile_client.sql
\set ECHO all
SELECT * FROM pg_temp.step('gh');
UPDATE webhook_ingest.reconcile_sweeps SET leased_until = now()
 WHERE source_id = (SELECT id FROM webhook_ingest.sources WHERE name = 'gh');
SELECT * FROM pg_temp.sweep('gh');
-- a result for a page no longer due (a second fetch of an old lease) changes nothing
SELECT webhook_ingest._reconcile_page('gh', :'up' || '/github/repos/acme/app/issues?page=2', 200, NULL, '[]');
SELECT last_pages, last_listed, last_changed, last_missed, sweeps FROM webhook_ingest.reconcile_stats
 WHERE source = 'gh';
SELECT pg_temp.complete('gh') AS fetched;

-- 6. Bad pages: each is refused with a clear error, in last_error and recent_failures, the cursor
-- stays, nothing of the page is kept; retried after the back-off, it is taken (nothing lost).
-- A world of 12 issues, all unknown to the source (since 0): each sweep queues each once.
SELECT set_config('wi.key', :'key' || 'b', false) IS NOT NULL AS key_set;
SELECT webhook_ingest.add_source('bad', :'up' || '/github/repos/acme/app/issues/{external_id}?key=' || :'key' || 'b',
                                 max_attempts => 3);
CREATE FUNCTION pg_temp.bad_round(kind text) RETURNS TABLE (page integer, url text, outcome text)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_temp.up('reconcile/reset?style=github&objects=12');
    PERFORM pg_temp.up('reconcile/bad?page=2&kind=' || kind);
    DELETE FROM webhook_ingest.queue q WHERE q.source = 'bad';
    PERFORM webhook_ingest.alter_source('bad', drop_reconcile => true);
    PERFORM webhook_ingest.alter_source('bad', reconcile => jsonb_build_object(
        'url', 'http://127.0.0.1:18080/github/repos/acme/app/issues?key=' || current_setting('wi.key') || '&per_page=4&since={since}',
        'id', '$.number', 'since', 0));
    RETURN QUERY SELECT * FROM pg_temp.sweep('bad');
END $$;
CREATE FUNCTION pg_temp.bad_state(OUT jobs bigint, OUT page_due text, OUT attempts integer, OUT last_status integer,
                                  OUT last_error text, OUT backed_off boolean)
LANGUAGE sql AS $$
SELECT (SELECT count(*) FROM webhook_ingest.queue q WHERE q.source = 'bad'), pg_temp.k(sw.page_url), sw.attempts,
       sw.last_status, pg_temp.k(sw.last_error), sw.next_attempt_at > sw.last_error_at
  FROM webhook_ingest.reconcile_sweeps sw JOIN webhook_ingest.sources s ON s.id = sw.source_id WHERE s.name = 'bad' $$;
SELECT * FROM pg_temp.bad_round('notjson');
SELECT * FROM pg_temp.bad_state();
SELECT job_id, source, pg_temp.k(external_id) AS page_url, attempt, http_status, pg_temp.k(error) AS error, outcome
  FROM webhook_ingest.recent_failures WHERE source = 'bad';
SELECT pg_temp.later('bad');
SELECT * FROM pg_temp.sweep('bad');
SELECT * FROM pg_temp.bad_state();
SELECT * FROM pg_temp.bad_round('noid');
SELECT * FROM pg_temp.bad_state();
SELECT * FROM pg_temp.bad_round('repeat');
SELECT * FROM pg_temp.bad_state();
SELECT * FROM pg_temp.bad_round('huge');
SELECT * FROM pg_temp.bad_state();
SELECT * FROM pg_temp.bad_round('500');
SELECT * FROM pg_temp.bad_state();
SELECT pg_temp.later('bad');
SELECT * FROM pg_temp.sweep('bad');
SELECT * FROM pg_temp.bad_state();
-- a transfer that failed (no response) is a failed page too
SELECT pg_temp.up('reconcile/reset?style=github&objects=12') IS NOT NULL AS reset;
SELECT pg_temp.later('bad');
SELECT page, webhook_ingest._reconcile_page('bad', url, NULL, NULL, NULL, 'Timeout was reached')
  FROM webhook_ingest._reconcile_claim(ARRAY['bad']);
SELECT * FROM pg_temp.bad_state();
-- a page bad every time: after max_attempts (3) the sweep gives up; the next starts over at page 1
SELECT pg_temp.up('reconcile/bad?page=1&times=-1&kind=notjson') IS NOT NULL AS always_bad;
SELECT pg_temp.later('bad');
SELECT * FROM pg_temp.sweep('bad');
SELECT pg_temp.later('bad');
SELECT * FROM pg_temp.sweep('bad');
SELECT state, page, attempts, sweeps, sweeps_failed, next_page_at > now() AS next_sweep_later,
       pg_temp.k(last_error) AS last_error
  FROM webhook_ingest.reconcile_stats WHERE source = 'bad';
SELECT attempt, outcome FROM webhook_ingest.recent_failures WHERE source = 'bad' ORDER BY failed_at DESC LIMIT 2;
SELECT set_config('wi.key', :'key', false) IS NOT NULL AS key_set;
-- pages made here (the upstream cannot send them): each refused with what is wrong, nothing kept
SELECT webhook_ingest.add_source('syn', 'http://127.0.0.1:9/s/{external_id}', max_attempts => 100,
    reconcile => '{"url": "http://127.0.0.1:9/list", "next_url": "http://127.0.0.1:9/list?after={cursor}",
                   "items": "$.data[*]", "cursor": "$.next", "has_more": "$.more", "since": 0}');
CREATE FUNCTION pg_temp.syn(body bytea, link text DEFAULT NULL, OUT outcome text, OUT last_error text)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_temp.later('syn');
    outcome := webhook_ingest._reconcile_page('syn', (SELECT c.url FROM webhook_ingest._reconcile_claim(ARRAY['syn']) c),
                                              200, link, body);
    SELECT sw.last_error INTO last_error FROM webhook_ingest.reconcile_sweeps sw
      JOIN webhook_ingest.sources s ON s.id = sw.source_id WHERE s.name = 'syn';
END $$;
CREATE FUNCTION pg_temp.syn(body text, link text DEFAULT NULL, OUT outcome text, OUT last_error text)
LANGUAGE sql AS $$ SELECT * FROM pg_temp.syn(convert_to(body, 'UTF8'), link) $$;
SELECT * FROM pg_temp.syn('{"error": "Bad credentials"}');
SELECT * FROM pg_temp.syn('{"data": [{"id": "a", "updated_at": "yesterday"}]}');
SELECT * FROM pg_temp.syn('{"data": [{"id": "", "updated_at": "2024-01-01T00:00:00Z"}]}');
SELECT * FROM pg_temp.syn('{"data": [{"id": "../admin", "updated_at": "2024-01-01T00:00:00Z"}]}');
SELECT * FROM pg_temp.syn('{"data": [{"id": "a", "updated_at": "2024-01-01T00:00:00Z"}], "more": true}');
SELECT * FROM pg_temp.syn('\x7b2264617461223a205b5d2c20ff7d'::bytea);
SELECT count(*) AS jobs_kept FROM webhook_ingest.queue WHERE source = 'syn';
SELECT webhook_ingest.alter_source('syn', reconcile => '{"next_url": null, "cursor": null}');
SELECT * FROM pg_temp.syn('{"data": [{"id": "a", "updated_at": "2024-01-01T00:00:00Z"}]}',
                          '<http://127.0.0.2:9/list?page=2>; rel="next"');
SELECT * FROM pg_temp.syn('{"data": [{"id": "a", "updated_at": "2024-01-01T00:00:00Z"}]}', '<ftp://x/y>; rel="next"');
SELECT * FROM pg_temp.syn('{"data": [{"id": "a", "updated_at": "2024-01-01T00:00:00Z"}]}', '</list?page=2>; rel="next"');
SELECT count(*) AS jobs_kept FROM webhook_ingest.queue WHERE source = 'syn';

-- 7. Shopify: products updated_at_min, times at -05:00, the next page from Link page_info.
SELECT set_config('wi.key', :'key' || 's', false) IS NOT NULL AS key_set;
SELECT pg_temp.up('reconcile/reset?style=shopify&objects=30');
SELECT webhook_ingest.add_source('shop',
    :'up' || '/shopify/admin/api/2024-01/products/{external_id}.json?key=' || :'key' || 's',
    reconcile => jsonb_build_object(
        'url', :'up' || '/shopify/admin/api/2024-01/products.json?key=' || :'key' || 's' || '&limit=4&updated_at_min={since}',
        'items', '$.products[*]', 'id', '$.id', 'version', '$.updated_at',
        'fetched_version', '$.product.updated_at', 'since', '2023-12-31T19:00:30-05:00'));
SELECT pg_temp.up('reconcile/change?n=10') AS changes \gset
SELECT string_agg(c ->> 'id', ' ') FILTER (WHERE NOT (c ->> 'webhook')::boolean) AS no_webhook
  FROM jsonb_array_elements((:'changes'::jsonb) -> 'changes') c;
SELECT pg_temp.deliver('shop', :'changes') AS webhooks, pg_temp.complete('shop') AS fetched;
SELECT * FROM pg_temp.sweep('shop');
SELECT external_id, events FROM webhook_ingest.jobs WHERE source = 'shop' AND state = 'pending';
SELECT last_listed, last_changed, last_missed, last_missed_rate FROM webhook_ingest.reconcile_stats
 WHERE source = 'shop';

-- 8. Stripe: /v1/events since the watermark (epoch seconds), newest first, starting_after the
-- last event's id while has_more; the object is the event's data.object, its version the event's time.
SELECT set_config('wi.key', :'key' || 'p', false) IS NOT NULL AS key_set;
SELECT pg_temp.up('reconcile/reset?style=stripe&objects=30');
SELECT webhook_ingest.add_source('stripe', :'up' || '/stripe/v1/customers/{external_id}?key=' || :'key' || 'p',
    reconcile => jsonb_build_object(
        'url', :'up' || '/stripe/v1/events?key=' || :'key' || 'p'
               || '&limit=5&types[]=customer.created&types[]=customer.updated&created[gte]={since_epoch}',
        'next_url', :'up' || '/stripe/v1/events?key=' || :'key' || 'p'
               || '&limit=5&types[]=customer.created&types[]=customer.updated&created[gte]={since_epoch}&starting_after={cursor}',
        'items', '$.data[*]', 'id', '$.data.object.id', 'version', '$.created',
        'cursor', '$.data[last].id', 'has_more', '$.has_more', 'fetched_version', '$.created',
        'since', 1704067230));
SELECT pg_temp.up('reconcile/change?n=20') AS changes \gset
SELECT string_agg(c ->> 'id', ' ' ORDER BY c ->> 'id') FILTER (WHERE NOT (c ->> 'webhook')::boolean) AS no_webhook
  FROM jsonb_array_elements((:'changes'::jsonb) -> 'changes') c;
SELECT pg_temp.deliver('stripe', :'changes') AS webhooks, pg_temp.complete('stripe') AS fetched;
SELECT * FROM pg_temp.sweep('stripe');
SELECT external_id, events FROM webhook_ingest.jobs WHERE source = 'stripe' AND state = 'pending' ORDER BY 1;
SELECT last_listed, last_changed, last_missed, last_missed_rate FROM webhook_ingest.reconcile_stats
 WHERE source = 'stripe';
SELECT pg_temp.complete('stripe') AS fetched;
-- a cursor that repeats (the upstream answers page 2 with page 1 again)
SELECT pg_temp.deliver('stripe', pg_temp.up('reconcile/change?n=12')) AS webhooks;
SELECT pg_temp.up('reconcile/bad?page=2&kind=repeat&times=-1') IS NOT NULL AS repeating;
SELECT pg_temp.later('stripe');
SELECT * FROM pg_temp.sweep('stripe');
SELECT attempts, pg_temp.k(last_error) AS last_error FROM webhook_ingest.reconcile_stats WHERE source = 'stripe';
SELECT set_config('wi.key', :'key', false) IS NOT NULL AS key_set;

-- 9. The apply worker's calls cost nothing for a source that does not reconcile; what admins and monitors see
SELECT job_id AS plain_job FROM webhook_ingest.enqueue('plain', 'p1') \gset
SELECT webhook_ingest._reconcile_fetched(:plain_job, '{"updated_at": "2024-01-01T00:00:00Z"}');
SELECT webhook_ingest._reconcile_page('plain', 'http://127.0.0.1:9/l', 200, NULL, '[]');
SELECT count(*) AS rows_for_plain FROM webhook_ingest.reconcile_objects o
  JOIN webhook_ingest.sources s ON s.id = o.source_id WHERE s.name = 'plain';
SELECT source, state FROM webhook_ingest.reconcile_stats ORDER BY source;
SET ROLE regress_rc_monitor;
SELECT count(*) AS monitor_sees FROM webhook_ingest.reconcile_stats;
SELECT count(*) FROM webhook_ingest.reconcile_sweeps;
RESET ROLE;
-- dropping a source drops its reconciliation and its objects' versions
SELECT webhook_ingest.drop_source('gh', force => true);
SELECT webhook_ingest.drop_source('bad', force => true);
SELECT webhook_ingest.drop_source('shop', force => true);
SELECT webhook_ingest.drop_source('stripe', force => true);
SELECT webhook_ingest.drop_source('plain', force => true);
SELECT webhook_ingest.drop_source('syn', force => true);
SELECT (SELECT count(*) FROM webhook_ingest.reconcile_settings) AS settings,
       (SELECT count(*) FROM webhook_ingest.reconcile_sweeps) AS sweeps,
       (SELECT count(*) FROM webhook_ingest.reconcile_objects) AS objects;
DROP ROLE regress_rc_admin, regress_rc_monitor;
