"""Register the source "blog" with webhook_ingest: where the worker fetches a
post, the handler of 0002, and how receive() checks a delivery (Standard
Webhooks signatures with the secrets from settings, the post id at
$.data.post_id; the event id is the webhook-id header).

Run by blog_owner, a member of webhook_ingest_admin (no superuser needed).
add_source lets an admin register only a function whose owner's privileges it
has: here it owns it.  Running the migration again after a secret rotation
(new BLOG_WEBHOOK_SECRETS) is `manage.py migrate blog 0002 && manage.py
migrate`, or a call of alter_source(signing_secrets => ...).
"""
from django.conf import settings
from django.db import migrations

SETTINGS = """
    url_template => %s,
    handler => 'blog_store_post(text,jsonb,jsonb)'::regprocedure,
    signature_scheme => 'standard-webhooks',
    signing_secrets => %s::text[],
    external_id_path => '$.data.post_id'::jsonpath
"""


def register(apps, schema_editor):
    with schema_editor.connection.cursor() as cur:
        cur.execute("SELECT webhook_ingest.add_source(name => %s, " + SETTINGS + ")",
                    [settings.BLOG_WEBHOOK_SOURCE, settings.BLOG_UPSTREAM_URL, settings.BLOG_WEBHOOK_SECRETS])


def unregister(apps, schema_editor):
    with schema_editor.connection.cursor() as cur:
        cur.execute("SELECT webhook_ingest.drop_source(%s, force => true)", [settings.BLOG_WEBHOOK_SOURCE])


class Migration(migrations.Migration):
    dependencies = [("blog", "0002_store_post_handler")]

    operations = [migrations.RunPython(register, unregister)]
