-- test/data/reconcile_client.sql: the regress tests' stand-in for the worker
-- around reconciliation (\i'd by test/sql/21_reconcile.sql, again after a
-- reconnect): an HTTP client (test/fetch_page.py through COPY ... FROM
-- PROGRAM, test/upstream.py only), the fetcher's claim and the apply
-- worker's page call, webhooks delivered, jobs completed.  Everything in
-- pg_temp: gone with the session.  Needs wi.dir (test/) and wi.key (the
-- upstream world's key, shown as K).
CREATE TEMP TABLE fetched (status integer, link text, body text);

-- GET url from the test upstream: status, Link header, body.
CREATE FUNCTION pg_temp.get(url text, OUT status integer, OUT link text, OUT body bytea)
LANGUAGE plpgsql AS $$
BEGIN
    IF url !~ '^http://127\.0\.0\.1:18080/[!-&(-~]*$' THEN
        RAISE EXCEPTION 'not a URL of the test upstream: %', url;
    END IF;
    TRUNCATE fetched;
    EXECUTE format('COPY fetched FROM PROGRAM %L',
                   format('python3 %s/fetch_page.py ''%s''', current_setting('wi.dir'), url));
    SELECT f.status, nullif(convert_from(decode(f.link, 'base64'), 'UTF8'), ''), decode(f.body, 'base64')
      INTO status, link, body FROM fetched f;
END $$;

-- GET a JSON answer of the upstream (/reconcile/...: path and query after the world's key).
CREATE FUNCTION pg_temp.up(path text) RETURNS jsonb
LANGUAGE sql AS $$
SELECT convert_from((pg_temp.get(format('http://127.0.0.1:18080/%s%skey=%s', path,
                                        CASE WHEN path LIKE '%?%' THEN '&' ELSE '?' END,
                                        current_setting('wi.key')))).body, 'UTF8')::jsonb $$;

-- A URL as shown: the world's key as K.
CREATE FUNCTION pg_temp.k(t text) RETURNS text
LANGUAGE sql AS $$ SELECT replace(t, current_setting('wi.key'), 'K') $$;

-- One page: the fetcher's claim (this source), the fetch, the apply worker's call.
CREATE FUNCTION pg_temp.step(src text, OUT page integer, OUT url text, OUT outcome text)
LANGUAGE plpgsql AS $$
DECLARE
    c record;
    g record;
BEGIN
    SELECT * INTO c FROM webhook_ingest._reconcile_claim(ARRAY[src]);
    IF NOT FOUND THEN
        outcome := 'nothing due';
        RETURN;
    END IF;
    g := pg_temp.get(c.url);
    page := c.page;
    url := pg_temp.k(c.url);
    outcome := webhook_ingest._reconcile_page(src, c.url, g.status, g.link, g.body);
END $$;

-- Pages until the sweep is done, fails a page or nothing is due.
CREATE FUNCTION pg_temp.sweep(src text) RETURNS TABLE (page integer, url text, outcome text)
LANGUAGE plpgsql AS $$
BEGIN
    LOOP
        SELECT * INTO page, url, outcome FROM pg_temp.step(src);
        RETURN NEXT;
        EXIT WHEN outcome <> 'next';
    END LOOP;
END $$;

-- The webhooks of the changes (upstream /reconcile/change) that send one: how many enqueued.
CREATE FUNCTION pg_temp.deliver(src text, changes jsonb) RETURNS bigint
LANGUAGE sql AS $$
SELECT count(*) FROM jsonb_array_elements(changes -> 'changes') c
 CROSS JOIN LATERAL webhook_ingest.enqueue(src, c ->> 'id', c -> 'payload') e
 WHERE (c ->> 'webhook')::boolean $$;

-- The worker: every pending job of src fetched (the upstream's documents, in one request), its
-- version recorded (_reconcile_fetched), done.
CREATE FUNCTION pg_temp.complete(src text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    docs jsonb;
    j record;
    n integer := 0;
BEGIN
    SELECT pg_temp.up('reconcile/documents?ids=' || string_agg(q.external_id, ',')) INTO docs
      FROM webhook_ingest.queue q WHERE q.source = src AND q.state = 'pending';
    FOR j IN SELECT q.id, q.external_id FROM webhook_ingest.queue q
              WHERE q.source = src AND q.state = 'pending' ORDER BY q.id LOOP
        PERFORM webhook_ingest._reconcile_fetched(j.id, docs -> j.external_id);
        UPDATE webhook_ingest.jobs SET state = 'done', finished_at = now() WHERE id = j.id;
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;

-- Time passes: the sweep's next page (or next sweep) is due now.
CREATE FUNCTION pg_temp.later(src text) RETURNS void
LANGUAGE sql AS $$
UPDATE webhook_ingest.reconcile_sweeps sw SET next_attempt_at = now(), leased_until = NULL
  FROM webhook_ingest.sources s WHERE s.id = sw.source_id AND s.name = src $$;

-- The error a statement raises: SQLSTATE and message.
CREATE FUNCTION pg_temp.try(q text, OUT code text, OUT message text)
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    code := 'none';
EXCEPTION WHEN OTHERS THEN
    code := SQLSTATE;
    message := SQLERRM;
END $$;
