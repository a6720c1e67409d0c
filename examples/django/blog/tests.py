"""The blog's webhook endpoint against a real PostgreSQL with webhook_ingest
and its worker, and the upstream stand-in (test/upstream.py) on
127.0.0.1:18080.

TransactionTestCase, not TestCase: the view's transaction must commit for the
worker to see the job, and the worker writes the rows in a transaction of its
own afterwards; the tests wait for it with webhook_ingest.wait_for_job().
Deliveries are signed as the Standard Webhooks spec says, with hmac/hashlib.
"""
import base64
import hashlib
import hmac
import json
import time
import urllib.request
import uuid

from django.conf import settings
from unittest import mock

from django.db import OperationalError, connections
from django.test import TransactionTestCase

from .models import Category, Post, Tag

UPSTREAM = "http://127.0.0.1:18080/posts/"


def sign(secret, msg_id, timestamp, body):
    key = base64.b64decode(secret.removeprefix("whsec_"))
    mac = hmac.new(key, f"{msg_id}.{timestamp}.{body}".encode(), hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def upstream_post(post_id):
    with urllib.request.urlopen(UPSTREAM + post_id, timeout=5) as r:
        return json.load(r)


def event(post_id, kind="post.updated"):
    return json.dumps({"type": kind, "timestamp": "2026-12-01T12:00:00Z", "data": {"post_id": post_id}})


def new_id(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class WebhookTests(TransactionTestCase):
    databases = {"default", "owner"}

    def deliver(self, body, msg_id=None, timestamp=None, secret=None, signature=None, signed_body=None):
        msg_id = msg_id or new_id("msg")
        timestamp = str(int(time.time()) if timestamp is None else timestamp)
        if signature is None:
            signature = sign(secret or settings.BLOG_WEBHOOK_SECRETS[0], msg_id, timestamp,
                             body if signed_body is None else signed_body)
        headers = {"HTTP_WEBHOOK_ID": msg_id, "HTTP_WEBHOOK_TIMESTAMP": timestamp}
        if signature:
            headers["HTTP_WEBHOOK_SIGNATURE"] = signature
        return self.client.post("/webhooks/blog", data=body, content_type="application/json", **headers)

    def wait(self, job_id):
        with connections["default"].cursor() as cur:  # as blog_app
            cur.execute("SELECT webhook_ingest.wait_for_job(%s, '30 s')", [job_id])
            done = cur.fetchone()[0]
        if not done:  # say why: the job's state and error, which only an admin may read
            with connections["owner"].cursor() as cur:
                cur.execute("SELECT state, last_error FROM webhook_ingest.jobs WHERE id = %s", [job_id])
                self.fail(f"job {job_id} did not end done: {cur.fetchone()}")

    def admin_count(self, sql, params):
        with connections["owner"].cursor() as cur:  # blog_owner reads webhook_ingest's tables
            cur.execute(sql, params)
            return cur.fetchone()[0]

    def jobs_for(self, post_id):
        return self.admin_count("SELECT count(*) FROM webhook_ingest.jobs WHERE source = 'blog' AND external_id = %s",
                                [post_id])

    def events_for(self, msg_id):
        return self.admin_count("SELECT count(*) FROM webhook_ingest.events WHERE source = 'blog' AND event_id = %s",
                                [msg_id])

    def assert_post_as_fetched(self, post_id, fetches=1):
        want = upstream_post(post_id)
        post = Post.objects.get(external_id=post_id)
        self.assertEqual(post.title, want["title"])
        self.assertEqual(post.status, "published")
        self.assertEqual(post.fetch_count, fetches)
        self.assertIsNotNone(post.created_at)
        self.assertGreaterEqual(post.updated_at, post.created_at)
        self.assertEqual(sorted(t.name for t in post.tags.all()), sorted(want["tags"]))
        self.assertEqual(sorted(c.name for c in post.categories.all()), sorted(want["categories"]))
        self.assertEqual(post.tags.count(), len(want["tags"]))  # no duplicate through rows
        self.assertEqual(post.filing_set.count(), len(want["categories"]))
        return post

    def test_app_and_owner_are_not_superusers(self):
        # What the example claims: no superuser after dba-setup.sql.
        for alias, member_of in (("default", "webhook_ingest_enqueue"), ("owner", "webhook_ingest_admin")):
            with connections[alias].cursor() as cur:
                cur.execute("SELECT current_user, rolsuper, pg_has_role(current_user, %s, 'USAGE') "
                            "FROM pg_roles WHERE rolname = current_user", [member_of])
                user, superuser, member = cur.fetchone()
            self.assertEqual(user, settings.DATABASES[alias]["USER"])
            self.assertEqual((superuser, member), (False, True), alias)
        with connections["owner"].cursor() as cur:  # the handler runs as its owner, the migration role
            cur.execute("SELECT pg_get_userbyid(p.proowner) FROM webhook_ingest.sources s "
                        "JOIN pg_proc p ON p.oid = s.handler WHERE s.name = 'blog'")
            self.assertEqual(cur.fetchone()[0], settings.DATABASES["owner"]["USER"])

    def test_fresh_delivery_is_queued_and_fetched(self):
        post_id = new_id("post")
        r = self.deliver(event(post_id))
        self.assertEqual(r.status_code, 202, r.content)
        self.assertEqual(r.json()["outcome"], "queued")
        self.assertIsInstance(r.json()["job_id"], int)
        self.wait(r.json()["job_id"])
        self.assert_post_as_fetched(post_id)
        self.assertEqual(Post.objects.filter(external_id=post_id).count(), 1)

    def test_shared_tags_and_categories_exist_once(self):
        post_ids = [new_id("post") for _ in range(6)]
        jobs = []
        for post_id in post_ids:
            r = self.deliver(event(post_id))
            self.assertEqual(r.status_code, 202, r.content)
            jobs.append(r.json()["job_id"])
        for job_id in jobs:
            self.wait(job_id)
        for post_id in post_ids:
            self.assert_post_as_fetched(post_id)
        wanted_tags = {t for p in post_ids for t in upstream_post(p)["tags"]}
        wanted_categories = {c for p in post_ids for c in upstream_post(p)["categories"]}
        self.assertLess(len(wanted_tags), 2 * len(post_ids))  # the posts do share tags
        self.assertEqual(sorted(Tag.objects.values_list("name", flat=True)), sorted(wanted_tags))
        self.assertEqual(sorted(Category.objects.values_list("name", flat=True)), sorted(wanted_categories))

    def test_tampered_body_is_401_and_writes_nothing(self):
        post_id, other_id = new_id("post"), new_id("post")
        msg_id = new_id("msg")
        r = self.deliver(event(other_id), msg_id=msg_id, signed_body=event(post_id))
        self.assertEqual(r.status_code, 401, r.content)
        self.assertEqual(self.jobs_for(post_id) + self.jobs_for(other_id), 0)
        self.assertEqual(self.events_for(msg_id), 0)
        # The same event id, now signed correctly, is still new: the 401 kept nothing.
        r = self.deliver(event(post_id), msg_id=msg_id)
        self.assertEqual((r.status_code, r.json()["outcome"]), (202, "queued"))
        self.wait(r.json()["job_id"])

    def test_bad_signatures_are_401(self):
        post_id = new_id("post")
        body = event(post_id)
        wrong_key = "whsec_" + base64.b64encode(b"not the sender's secret").decode()
        cases = {
            "wrong secret": dict(secret=wrong_key),
            "garbage signature": dict(signature="v1,AAAA"),
            "no signature header": dict(signature=""),
            "timestamp an hour old": dict(timestamp=int(time.time()) - 3600),
            "timestamp an hour ahead": dict(timestamp=int(time.time()) + 3600),
        }
        for name, kwargs in cases.items():
            with self.subTest(name):
                r = self.deliver(body, **kwargs)
                self.assertEqual(r.status_code, 401, r.content)
        self.assertEqual(self.jobs_for(post_id), 0)
        self.assertFalse(Post.objects.filter(external_id=post_id).exists())

    def test_rotated_secret_is_accepted(self):
        post_id = new_id("post")
        r = self.deliver(event(post_id), secret=settings.BLOG_WEBHOOK_SECRETS[1])
        self.assertEqual((r.status_code, r.json()["outcome"]), (202, "queued"))
        self.wait(r.json()["job_id"])
        self.assert_post_as_fetched(post_id)

    def test_redelivery_is_duplicate(self):
        post_id, msg_id = new_id("post"), new_id("msg")
        first = self.deliver(event(post_id), msg_id=msg_id)
        self.assertEqual((first.status_code, first.json()["outcome"]), (202, "queued"))
        again = self.deliver(event(post_id), msg_id=msg_id)
        self.assertEqual((again.status_code, again.json()["outcome"]), (202, "duplicate"))
        # The object's pending or running job, or none if it already ran.
        self.assertIn(again.json()["job_id"], (first.json()["job_id"], None))
        self.wait(first.json()["job_id"])
        later = self.deliver(event(post_id), msg_id=msg_id)  # after the fetch, still a duplicate
        self.assertEqual((later.status_code, later.json()["outcome"]), (202, "duplicate"))
        self.assertEqual(self.jobs_for(post_id), 1)
        self.assertEqual(self.events_for(msg_id), 1)
        self.assert_post_as_fetched(post_id, fetches=1)

    def test_two_deliveries_close_together_make_one_job(self):
        # The upstream answers after 300 ms here, so the second delivery finds
        # the first one's job still pending (coalesced) or being fetched (requeued).
        with connections["owner"].cursor() as cur:
            cur.execute("SELECT webhook_ingest.alter_source('blog', url_template => %s)",
                        [settings.BLOG_UPSTREAM_URL + "?delay_ms=300"])
        try:
            post_id = new_id("post")
            first = self.deliver(event(post_id, "post.created"))
            second = self.deliver(event(post_id, "post.tagged"))
            self.assertEqual((first.status_code, first.json()["outcome"]), (202, "queued"))
            self.assertEqual(second.status_code, 202, second.content)
            self.assertIn(second.json()["outcome"], ("coalesced", "requeued"))
            self.assertEqual(second.json()["job_id"], first.json()["job_id"])
            self.wait(first.json()["job_id"])
            fetches = 2 if second.json()["outcome"] == "requeued" else 1
            self.assert_post_as_fetched(post_id, fetches=fetches)
            self.assertEqual(self.jobs_for(post_id), 1)
        finally:
            with connections["owner"].cursor() as cur:
                cur.execute("SELECT webhook_ingest.alter_source('blog', url_template => %s)",
                            [settings.BLOG_UPSTREAM_URL])

    def test_unusable_bodies_are_400(self):
        big = json.dumps({"data": {"post_id": new_id("post")}, "padding": "x" * (1100 * 1024)})
        cases = {
            "not JSON": ("this is not json", "22P02"),
            "no post id": (json.dumps({"type": "post.updated", "data": {}}), "22023"),
            "post id not a scalar": (json.dumps({"data": {"post_id": {"id": 1}}}), "22023"),
            "over max_payload_size": (big, "54000"),
        }
        last_job = self.admin_count("SELECT coalesce(max(id), 0) FROM webhook_ingest.jobs", [])
        for name, (body, sqlstate) in cases.items():
            with self.subTest(name):
                msg_id = new_id("msg")
                r = self.deliver(body, msg_id=msg_id)
                self.assertEqual((r.status_code, r.json().get("sqlstate")), (400, sqlstate), r.content[:200])
                self.assertEqual(self.events_for(msg_id), 0)
        self.assertEqual(self.admin_count("SELECT count(*) FROM webhook_ingest.jobs WHERE id > %s", [last_job]), 0)

    def test_unreachable_shard_and_closed_intake_are_503(self):
        # What the router (webhook_ingest_router) raises: 08006 for an unreachable shard, 57P03
        # while its intake is closed.  The view's mapping only: a cursor that raises it.
        for code in ("08006", "08001", "57P03"):
            with self.subTest(code):
                cause = Exception("shard 2 of webhook_ingest_shards is unreachable")
                cause.pgcode = code
                error = OperationalError(str(cause))
                error.__cause__ = cause
                cursor = mock.MagicMock()
                cursor.__enter__.return_value.execute.side_effect = error
                with mock.patch("blog.views.connection") as conn, self.assertLogs("django.request", "ERROR"):
                    conn.cursor.return_value = cursor
                    r = self.deliver(event(new_id("post")))
                self.assertEqual((r.status_code, r["Retry-After"], r.json().get("sqlstate")), (503, "5", code))
