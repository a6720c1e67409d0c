-- bench/peers/schema.sql: the same tables and handler in every system's database.
-- plan: the webhooks to send (seq order; first = the first delivery of its event id).
CREATE TABLE plan (seq int PRIMARY KEY, event_id text NOT NULL, object_id text NOT NULL, first boolean NOT NULL);
-- sent: when each webhook was handed to the system (the enqueue transaction's clock).
CREATE TABLE sent (seq int PRIMARY KEY, object_id text NOT NULL, at timestamptz NOT NULL);
-- The handler's rows: a post and its tags, written in one transaction.
CREATE TABLE posts (id text PRIMARY KEY, title text NOT NULL, version text, done_at timestamptz NOT NULL);
CREATE TABLE post_tags (post_id text NOT NULL REFERENCES posts ON DELETE CASCADE, tag text NOT NULL,
                        PRIMARY KEY (post_id, tag));
-- One row per handler run (its fetch and its write), for enqueue -> done latency and counts.
CREATE TABLE runs (id bigserial PRIMARY KEY, object_id text NOT NULL, version text,
                   done_at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE INDEX ON runs (object_id, done_at);
-- store_post(the fetched object): the handler every system runs, in one transaction.
CREATE FUNCTION store_post(p jsonb) RETURNS void LANGUAGE sql AS $$
	INSERT INTO posts VALUES (p->>'id', p->>'title', p->>'version', clock_timestamp())
	ON CONFLICT (id) DO UPDATE SET title = EXCLUDED.title, version = EXCLUDED.version, done_at = EXCLUDED.done_at;
	DELETE FROM post_tags WHERE post_id = p->>'id';
	INSERT INTO post_tags SELECT p->>'id', t FROM jsonb_array_elements_text(p->'tags') t ON CONFLICT DO NOTHING;
	INSERT INTO runs (object_id, version) VALUES (p->>'id', p->>'version');
$$;
