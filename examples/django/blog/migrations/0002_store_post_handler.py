"""The handler that webhook_ingest's worker calls with each fetched post, and
the app role's read access to the tables it writes.

It writes the tables of 0001 outside the ORM, so it does what Django would do
in Python: fill created_at/updated_at (auto_now_add/auto_now), status and
fetch_count (default=), write both through tables (blog_post_tags, automatic;
blog_filing, explicit), and delete the through rows before the post (Django
emulates on_delete=CASCADE in Python; the database's foreign keys have no
ON DELETE).  Its parameters are named p_* so that none clashes with a column
(a parameter named external_id would make "external_id" ambiguous in the
INSERT ... ON CONFLICT below; `#variable_conflict use_column` is the other
way out).  It runs as its owner, blog_owner, the role that runs this
migration.
"""
from django.conf import settings
from django.db import migrations

HANDLER = r"""
CREATE FUNCTION blog_store_post(p_external_id text, p_details jsonb, p_payload jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = public, pg_temp
AS $fn$
DECLARE
    v_post_id bigint;
    v_tags text[];
    v_categories text[];
BEGIN
    -- Django makes every foreign key DEFERRABLE INITIALLY DEFERRED; the worker
    -- calls handlers with all constraints immediate, so each is checked at its
    -- statement, inside this call.
    IF p_details IS NULL THEN   -- the upstream answered 404 or 410: the post is gone
        DELETE FROM blog_post_tags WHERE post_id IN (SELECT id FROM blog_post WHERE external_id = p_external_id);
        DELETE FROM blog_filing WHERE post_id IN (SELECT id FROM blog_post WHERE external_id = p_external_id);
        DELETE FROM blog_post WHERE external_id = p_external_id;
        RETURN;
    END IF;

    v_tags := ARRAY(SELECT DISTINCT jsonb_array_elements_text(coalesce(p_details->'tags', '[]')));
    v_categories := ARRAY(SELECT DISTINCT jsonb_array_elements_text(coalesce(p_details->'categories', '[]')));

    INSERT INTO blog_post (external_id, title, status, fetch_count, created_at, updated_at)
    VALUES (p_external_id, coalesce(p_details->>'title', ''), 'published', 1, now(), now())
    ON CONFLICT (external_id) DO UPDATE
       SET title = EXCLUDED.title,
           fetch_count = blog_post.fetch_count + 1,
           updated_at = EXCLUDED.updated_at
    RETURNING id INTO v_post_id;

    INSERT INTO blog_tag (name, created_at)
    SELECT t, now() FROM unnest(v_tags) t
    ON CONFLICT (name) DO NOTHING;
    DELETE FROM blog_post_tags
     WHERE post_id = v_post_id
       AND tag_id NOT IN (SELECT id FROM blog_tag WHERE name = ANY (v_tags));
    INSERT INTO blog_post_tags (post_id, tag_id)
    SELECT v_post_id, id FROM blog_tag WHERE name = ANY (v_tags)
    ON CONFLICT (post_id, tag_id) DO NOTHING;

    INSERT INTO blog_category (name, created_at)
    SELECT c, now() FROM unnest(v_categories) c
    ON CONFLICT (name) DO NOTHING;
    DELETE FROM blog_filing
     WHERE post_id = v_post_id
       AND category_id NOT IN (SELECT id FROM blog_category WHERE name = ANY (v_categories));
    INSERT INTO blog_filing (post_id, category_id, filed_at)
    SELECT v_post_id, id, now() FROM blog_category WHERE name = ANY (v_categories)
    ON CONFLICT (post_id, category_id) DO NOTHING;
END
$fn$;
"""

# django_migrations too: `manage.py runserver` (as the app) checks which migrations ran.
TABLES = "blog_post, blog_tag, blog_category, blog_post_tags, blog_filing, django_migrations"


def grant_reads(apps, schema_editor):
    app_role = schema_editor.quote_name(settings.DATABASES["default"]["USER"])
    schema_editor.execute(f"GRANT SELECT ON {TABLES} TO {app_role}")


def revoke_reads(apps, schema_editor):
    app_role = schema_editor.quote_name(settings.DATABASES["default"]["USER"])
    schema_editor.execute(f"REVOKE SELECT ON {TABLES} FROM {app_role}")


class Migration(migrations.Migration):
    dependencies = [("blog", "0001_initial")]

    operations = [
        migrations.RunSQL(HANDLER, "DROP FUNCTION blog_store_post(text, jsonb, jsonb)"),
        migrations.RunPython(grant_reads, revoke_reads),
    ]
