-- examples/express/db/schema.sql: the blog's tables and the handler that
-- webhook_ingest's worker calls with each fetched post.  Run by the owner role
-- (scripts/migrate.js); every statement may run again.
CREATE TABLE IF NOT EXISTS posts (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    external_id text NOT NULL UNIQUE,           -- the sender's id of the post
    title       text NOT NULL,
    fetch_count integer NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS tags (
    id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS categories (
    id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS post_tags (
    post_id bigint NOT NULL REFERENCES posts ON DELETE CASCADE,
    tag_id  bigint NOT NULL REFERENCES tags,
    PRIMARY KEY (post_id, tag_id)
);
CREATE TABLE IF NOT EXISTS post_categories (
    post_id     bigint NOT NULL REFERENCES posts ON DELETE CASCADE,
    category_id bigint NOT NULL REFERENCES categories,
    PRIMARY KEY (post_id, category_id)
);

-- The parameters carry the names webhook_ingest documents (external_id,
-- details, payload); posts has a column external_id too, so the function says
-- that a bare name means the column (#variable_conflict use_column) and names
-- the parameter as store_post.external_id.  Here the tables' defaults are the
-- database's own, so the INSERTs may leave created_at and fetch_count out.
CREATE OR REPLACE FUNCTION store_post(external_id text, details jsonb, payload jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = public, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    post bigint;
    wanted_tags text[] := ARRAY(SELECT DISTINCT jsonb_array_elements_text(coalesce(details->'tags', '[]')));
    wanted_categories text[] := ARRAY(SELECT DISTINCT jsonb_array_elements_text(coalesce(details->'categories', '[]')));
BEGIN
    IF details IS NULL THEN   -- the upstream answered 404 or 410: the post is gone (ON DELETE CASCADE)
        DELETE FROM posts WHERE external_id = store_post.external_id;
        RETURN;
    END IF;
    INSERT INTO posts AS p (external_id, title, fetch_count)
    VALUES (store_post.external_id, coalesce(details->>'title', ''), 1)
    ON CONFLICT (external_id) DO UPDATE
       SET title = EXCLUDED.title, fetch_count = p.fetch_count + 1, updated_at = now()
    RETURNING id INTO post;

    INSERT INTO tags (name) SELECT unnest(wanted_tags) ON CONFLICT (name) DO NOTHING;
    DELETE FROM post_tags
     WHERE post_id = post AND tag_id NOT IN (SELECT id FROM tags WHERE name = ANY (wanted_tags));
    INSERT INTO post_tags (post_id, tag_id)
    SELECT post, id FROM tags WHERE name = ANY (wanted_tags)
    ON CONFLICT DO NOTHING;

    INSERT INTO categories (name) SELECT unnest(wanted_categories) ON CONFLICT (name) DO NOTHING;
    DELETE FROM post_categories
     WHERE post_id = post AND category_id NOT IN (SELECT id FROM categories WHERE name = ANY (wanted_categories));
    INSERT INTO post_categories (post_id, category_id)
    SELECT post, id FROM categories WHERE name = ANY (wanted_categories)
    ON CONFLICT DO NOTHING;
END
$fn$;
