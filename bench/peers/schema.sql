-- bench/peers/schema.sql: the same tables and handler in every system's database.
-- plan: the webhooks to send (seq order; first = the first delivery of its event id).
CREATE TABLE plan (seq int PRIMARY KEY, event_id text NOT NULL, object_id text NOT NULL, first boolean NOT NULL);
-- sent: when each webhook was handed to the system (the enqueue transaction's clock); in the storm,
-- the object's version on the upstream, bumped just before the first delivery of each event.
CREATE TABLE sent (seq int PRIMARY KEY, object_id text NOT NULL, at timestamptz NOT NULL, version int);
-- The handler's rows: a post and its tags, written in one transaction.  post_tags has no unique key
-- and the handler replaces an object's tags before it upserts the post, as many apps would: two runs
-- of one object's handler at once (each deletes the rows it sees, then inserts) leave its tags twice,
-- and the one that commits last stores its version, older or not: the storm counts both.
CREATE TABLE posts (id text PRIMARY KEY, title text NOT NULL, version text, done_at timestamptz NOT NULL);
CREATE TABLE post_tags (post_id text NOT NULL, tag text NOT NULL);
CREATE INDEX ON post_tags (post_id);
-- One row per handler run (its fetch and its write), for enqueue -> done latency and counts.
CREATE TABLE runs (id bigserial PRIMARY KEY, object_id text NOT NULL, version text,
                   done_at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE INDEX ON runs (object_id, done_at);
-- store_post(the fetched object): the handler every system runs, in one transaction.
CREATE FUNCTION store_post(p jsonb) RETURNS void LANGUAGE sql AS $$
	DELETE FROM post_tags WHERE post_id = p->>'id';
	INSERT INTO post_tags SELECT p->>'id', t FROM jsonb_array_elements_text(p->'tags') t;
	INSERT INTO posts VALUES (p->>'id', p->>'title', p->>'version', clock_timestamp())
	ON CONFLICT (id) DO UPDATE SET title = EXCLUDED.title, version = EXCLUDED.version, done_at = EXCLUDED.done_at;
	INSERT INTO runs (object_id, version) VALUES (p->>'id', p->>'version');
$$;
