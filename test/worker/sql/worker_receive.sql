-- receive() end to end: a signed webhook as the app passes it (headers and
-- raw body) becomes a job, the worker fetches the object and the handler
-- writes its rows; a redelivery is a duplicate; a tampered one writes
-- nothing.  And a handler error that no retry can fix (SQLSTATE class 42 or
-- 0A: here the README's parameter names clashing with the app's own column)
-- ends the job dead at its first attempt, with the SQLSTATE in last_error.
-- Against test/upstream.py on 127.0.0.1:18080.
\set VERBOSITY terse
\set SHOW_CONTEXT never
CREATE EXTENSION pgcrypto;

\i test/worker/wait_until.sql

-- What a GitHub-style sender would send for this body and delivery id.
CREATE FUNCTION github_headers(body text, delivery text, secret text DEFAULT 'worker-secret') RETURNS jsonb
LANGUAGE sql AS $$
    SELECT jsonb_build_object('X-Hub-Signature-256', 'sha256=' || encode(hmac(body, secret, 'sha256'), 'hex'),
                              'X-GitHub-Delivery', delivery, 'Content-Type', 'application/json') $$;

CREATE TABLE rx_posts (id serial PRIMARY KEY, external_id text UNIQUE NOT NULL, title text NOT NULL,
                    tags text[] NOT NULL, created_at timestamptz NOT NULL);
CREATE FUNCTION rx_store_post(p_external_id text, p_details jsonb, p_payload jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rx_posts (external_id, title, tags, created_at)
    VALUES (p_external_id, p_details->>'title',
            ARRAY(SELECT jsonb_array_elements_text(p_details->'tags')), now())
    ON CONFLICT (external_id) DO UPDATE SET title = EXCLUDED.title, tags = EXCLUDED.tags;
END $$;
-- the README's parameter names: external_id is also a column of rx_posts
CREATE FUNCTION rx_store_post_ambiguous(external_id text, details jsonb, payload jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rx_posts (external_id, title, tags, created_at)
    VALUES (external_id, details->>'title', '{}', now())
    ON CONFLICT (external_id) DO UPDATE SET title = EXCLUDED.title
    WHERE rx_posts.external_id = external_id;
END $$;
-- a feature the server does not support (0A000)
CREATE FUNCTION rx_store_post_unsupported(p_external_id text, p_details jsonb, p_payload jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM count(*) FROM rx_posts FOR UPDATE;
END $$;

SELECT webhook_ingest.add_source('hub', 'http://127.0.0.1:18080/posts/{external_id}', 'rx_store_post(text,jsonb,jsonb)',
                                 signature_scheme => 'github', signing_secrets => '{worker-secret}',
                                 external_id_path => '$.post.id');
SELECT webhook_ingest.add_source('hub_amb', 'http://127.0.0.1:18080/posts/{external_id}',
                                 'rx_store_post_ambiguous(text,jsonb,jsonb)', max_attempts => 10,
                                 signature_scheme => 'github', signing_secrets => '{worker-secret}',
                                 external_id_path => '$.post.id');
SELECT webhook_ingest.add_source('hub_0a', 'http://127.0.0.1:18080/posts/{external_id}',
                                 'rx_store_post_unsupported(text,jsonb,jsonb)', max_attempts => 10,
                                 signature_scheme => 'github', signing_secrets => '{worker-secret}',
                                 external_id_path => '$.post.id');

-- a signed delivery: queued, then fetched and handled
\set body '{"action": "published", "post": {"id": "r1"}}'
SELECT outcome FROM webhook_ingest.receive('hub', github_headers(:'body', 'delivery-1'), :'body');
SELECT wait_until($$SELECT EXISTS (SELECT FROM webhook_ingest.jobs WHERE source = 'hub' AND state = 'done')$$);
SELECT external_id, title, tags FROM rx_posts;
-- the same delivery again: a duplicate, nothing new
SELECT outcome FROM webhook_ingest.receive('hub', github_headers(:'body', 'delivery-1'), :'body');
-- tampered: 28000, nothing written
\set VERBOSITY default
SELECT * FROM webhook_ingest.receive('hub', github_headers(:'body', 'delivery-2'),
                                     replace(:'body', 'r1', 'r2'));
\set VERBOSITY terse
SELECT count(*) AS jobs, count(*) FILTER (WHERE external_id = 'r2') AS tampered_jobs
  FROM webhook_ingest.jobs WHERE source = 'hub';
SELECT count(*) AS events FROM webhook_ingest.events WHERE source = 'hub';

-- class 42: dead at the first attempt, though max_attempts is 10
\set body '{"post": {"id": "amb"}}'
SELECT outcome FROM webhook_ingest.receive('hub_amb', github_headers(:'body', 'delivery-3'), :'body');
SELECT wait_until($$SELECT state IN ('done', 'dead') FROM webhook_ingest.jobs WHERE source = 'hub_amb'$$);
SELECT state, attempts, regexp_replace(last_error, 'after \d+ ms', 'after N ms') AS last_error FROM webhook_ingest.jobs WHERE source = 'hub_amb';
-- class 0A: the same
\set body '{"post": {"id": "unsupported"}}'
SELECT outcome FROM webhook_ingest.receive('hub_0a', github_headers(:'body', 'delivery-4'), :'body');
SELECT wait_until($$SELECT state IN ('done', 'dead') FROM webhook_ingest.jobs WHERE source = 'hub_0a'$$);
SELECT state, attempts, regexp_replace(last_error, 'after \d+ ms', 'after N ms') AS last_error FROM webhook_ingest.jobs WHERE source = 'hub_0a';

-- once the handler is fixed, retry_dead runs it again
CREATE OR REPLACE FUNCTION rx_store_post_ambiguous(external_id text, details jsonb, payload jsonb) RETURNS void
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
BEGIN
    INSERT INTO rx_posts (external_id, title, tags, created_at)
    VALUES (external_id, details->>'title', '{}', now())
    ON CONFLICT ON CONSTRAINT rx_posts_external_id_key DO UPDATE SET title = EXCLUDED.title;
END $$;
SELECT webhook_ingest.retry_dead('hub_amb');
SELECT wait_until($$SELECT state = 'done' FROM webhook_ingest.jobs WHERE source = 'hub_amb'$$);
SELECT external_id, title FROM rx_posts WHERE external_id = 'amb';

-- Django's foreign keys are DEFERRABLE INITIALLY DEFERRED, and a deferred check
-- cannot be queued in a security-restricted operation: the worker makes every
-- constraint immediate for the handler, so they are checked statement by
-- statement inside its subtransaction (a violation is the handler's error).
CREATE TABLE rx_authors (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE rx_books (id text PRIMARY KEY,
                       author_id int NOT NULL REFERENCES rx_authors DEFERRABLE INITIALLY DEFERRED);
CREATE FUNCTION rx_store_book(p_external_id text, p_details jsonb, p_payload jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rx_authors VALUES (1, 'ann') ON CONFLICT DO NOTHING;
    INSERT INTO rx_books VALUES (p_external_id, CASE WHEN p_external_id = 'orphan' THEN 2 ELSE 1 END)
    ON CONFLICT (id) DO NOTHING;
END $$;
SELECT webhook_ingest.add_source('hub_fk', 'http://127.0.0.1:18080/posts/{external_id}',
                                 'rx_store_book(text,jsonb,jsonb)', max_attempts => 1,
                                 signature_scheme => 'github', signing_secrets => '{worker-secret}',
                                 external_id_path => '$.post.id');
\set body '{"post": {"id": "book1"}}'
SELECT outcome FROM webhook_ingest.receive('hub_fk', github_headers(:'body', 'delivery-5'), :'body');
\set body '{"post": {"id": "orphan"}}'
SELECT outcome FROM webhook_ingest.receive('hub_fk', github_headers(:'body', 'delivery-6'), :'body');
SELECT wait_until($$SELECT count(*) = 2 FROM webhook_ingest.jobs WHERE source = 'hub_fk' AND state IN ('done', 'dead')$$);
SELECT external_id, state, regexp_replace(last_error, 'after \d+ ms', 'after N ms') AS last_error FROM webhook_ingest.jobs WHERE source = 'hub_fk' ORDER BY external_id;
SELECT id, author_id FROM rx_books;

SELECT webhook_ingest.drop_source(s, force => true) FROM unnest(ARRAY['hub', 'hub_amb', 'hub_0a', 'hub_fk']) s;
DROP EXTENSION pgcrypto;
