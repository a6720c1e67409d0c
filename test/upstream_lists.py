"""test/upstream_lists.py: the paginated list endpoints of test/upstream.py, for
reconciliation (issue 30): worlds of objects that change, listed in the shapes
of GitHub (since, Link rel="next"), Shopify (updated_at_min, Link page_info; a Link header per rel)
and Stripe (/v1/events, starting_after, has_more).  Standard library only;
upstream.py routes /reconcile, /github, /shopify and /stripe here.

A world (one per ?key=K) holds N objects; object i was last changed at
version i, and every change takes the world's next version.  A version is a
number of seconds after RECONCILE_EPOCH (2024-01-01T00:00:00Z): GitHub shows
it as an ISO 8601 UTC time, Shopify as one at -05:00, Stripe as epoch seconds
(an event's created).  Every 10th change of a world sends no webhook: the one
reconciliation must find.  Each handler returns (status, body, extra headers).
"""
import base64
import json
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from urllib.parse import urlencode

RECONCILE_EPOCH = 1704067200        # 2024-01-01T00:00:00Z
NO_WEBHOOK_EVERY = 10
HUGE_BYTES = 10 * 1024 * 1024
SHOPIFY_OFFSET = timezone(timedelta(hours=-5))

worlds = {}     # key -> {"style", "n", "versions": {i: v}, "clock", "changes", "events": [(seq, v, i)], "bad",
#                  "pages": Counter, "fetches": Counter, "log": [[what, answered at, credential]], "credential"}


def arg(query, name, default):
    return query.get(name, [default])[0]


def iso(version, tz=timezone.utc):
    t = datetime.fromtimestamp(RECONCILE_EPOCH + version, timezone.utc).astimezone(tz)
    return t.isoformat().replace("+00:00", "Z")


def version_of(text):
    """A since/updated_at_min/created[gte] argument as a version (seconds after the epoch)."""
    if text.lstrip("-").isdigit():
        return int(text) - RECONCILE_EPOCH
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()) - RECONCILE_EPOCH


def external_id(world, i):
    return {"github": str(i), "shopify": str(7000 + i), "stripe": "cus_%04d" % i}[world["style"]]


def issue(world, i):
    v = world["versions"][i]
    return {"id": 100000 + i, "number": i, "title": f"Issue {i}", "state": "open", "updated_at": iso(v),
            "body": f"revision at version {v}"}


def product(world, i):
    v = world["versions"][i]
    return {"id": 7000 + i, "title": f"Product {i}", "updated_at": iso(v, SHOPIFY_OFFSET),
            "body_html": f"revision at version {v}"}


def customer(world, i, version=None):
    """Customer i, as it is (or as it was at version, for an event)."""
    return {"id": external_id(world, i), "object": "customer", "created": RECONCILE_EPOCH + i,
            "name": f"Customer {i}", "metadata": {"version": str(version or world["versions"][i])}}


def event(world, seq, version, i):
    return {"id": "evt_%06d" % seq, "object": "event",
            "type": "customer.created" if seq <= world["n"] else "customer.updated",
            "created": RECONCILE_EPOCH + version, "data": {"object": customer(world, i, version)}}


def webhook_payload(world, i, seq):
    style = world["style"]
    if style == "github":
        return {"action": "edited", "issue": issue(world, i)}
    if style == "shopify":
        return product(world, i)
    return event(world, seq, world["versions"][i], i)


def reset(query):
    style, n = arg(query, "style", "github"), int(arg(query, "objects", "30"))
    if style not in ("github", "shopify", "stripe"):
        return 400, json.dumps({"error": "style is github, shopify or stripe"}), []
    world = {"style": style, "n": n, "versions": {i: i for i in range(1, n + 1)}, "clock": n, "changes": 0,
             "events": [(i, i, i) for i in range(1, n + 1)], "bad": None,
             "pages": Counter(), "fetches": Counter(), "log": [], "credential": None}
    worlds[arg(query, "key", "")] = world
    return 200, json.dumps({"objects": n, "clock": n}), []


def change(world, query):
    ids = [int(x) for x in arg(query, "ids", "").split(",") if x]
    changes = []
    for k in range(len(ids) or int(arg(query, "n", "1"))):
        i = ids[k] if ids else (7 * world["changes"]) % world["n"] + 1
        world["changes"] += 1
        world["clock"] += 1
        world["versions"][i] = world["clock"]
        seq = len(world["events"]) + 1
        world["events"].append((seq, world["clock"], i))
        changes.append({"id": external_id(world, i), "version": world["clock"],
                        "webhook": world["changes"] % NO_WEBHOOK_EVERY != 0,
                        "payload": webhook_payload(world, i, seq)})
    return 200, json.dumps({"changes": changes}), []


def bad(world, query):
    world["bad"] = {"kind": arg(query, "kind", "notjson"), "page": int(arg(query, "page", "1")),
                    "times": int(arg(query, "times", "1"))}
    return 200, json.dumps(world["bad"]), []


def requested(world, what, name):
    """Count a request of a list page (what "page", name its number) or of an object ("fetch", its id)."""
    world["pages" if what == "page" else "fetches"][str(name)] += 1
    world["log"].append([f"{what} {name}", time.time(), world["credential"]])


def badness(world, page):
    """The bad kind this request of page gets, if any (and count the request)."""
    requested(world, "page", page)
    b = world["bad"]
    if b is None or b["page"] != page or b["times"] == 0:
        return None
    if b["times"] > 0:
        b["times"] -= 1
    return b["kind"]


def serve_page(kind, items, body_of, id_path, next_link):
    """A page's (status, body, headers) as the bad kind asks, or as it is."""
    if kind == "notjson":
        return 200, "<html><body>502 Bad Gateway</body></html>", []
    if kind == "500":
        return 500, '{"error": "list failed"}', []
    if kind == "retryafter":
        return 503, '{"error": "later"}', ["Retry-After: 3"]
    if kind == "noid" and len(items) > 1:
        item = items[1]
        for key in id_path[:-1]:
            item = item[key]
        del item[id_path[-1]]
    body = body_of(items)
    if kind == "huge":      # valid JSON: the size alone is wrong
        padding = "x" * HUGE_BYTES
        body = body + [{"padding": padding}] if isinstance(body, list) else {**body, "padding": padding}
    return 200, json.dumps(body), next_link


def link(host, path, params, rels):
    return ", ".join(f'<http://{host}{path}?{urlencode({**params, **extra})}>; rel="{rel}"' for rel, extra in rels)


def github_list(world, path, query, host):
    since = version_of(arg(query, "since", str(RECONCILE_EPOCH)))
    per_page, page = int(arg(query, "per_page", "30")), int(arg(query, "page", "1"))
    order = sorted((v, i) for i, v in world["versions"].items() if v >= since)
    last = max(1, -(-len(order) // per_page))
    items = [issue(world, i) for _, i in order[(page - 1) * per_page:page * per_page]]
    params = {k: v[0] for k, v in query.items()}
    kind = badness(world, page)
    rels = [("next", {"page": page + 1}), ("last", {"page": last})] if page < last else []
    if page > 1:
        rels += [("prev", {"page": page - 1}), ("first", {"page": 1})]
    if kind == "repeat":
        rels = [("next", {"page": page})]
    header = [f"Link: {link(host, path, params, rels)}"] if rels else []
    return serve_page(kind, items, lambda xs: xs, ["number"], header)


def page_info(token):
    return json.loads(base64.urlsafe_b64decode(token.encode()).decode())


def token(info):
    return base64.urlsafe_b64encode(json.dumps(info).encode()).decode()


def shopify_list(world, path, query, host):
    limit = int(arg(query, "limit", "50"))
    info = page_info(arg(query, "page_info", "")) if "page_info" in query else \
        {"min": version_of(arg(query, "updated_at_min", str(RECONCILE_EPOCH))), "after": 0, "page": 1}
    ids = sorted(i for i, v in world["versions"].items() if v >= info["min"] and i > info["after"])
    items = [product(world, i) for i in ids[:limit]]
    kind = badness(world, info["page"])
    params = {"key": arg(query, "key", ""), "limit": limit}
    rels = []
    if info["page"] > 1:
        rels.append(("previous", {"page_info": token({**info, "page": info["page"] - 1})}))
    if len(ids) > limit:
        rels.append(("next", {"page_info": token({**info, "after": ids[limit - 1], "page": info["page"] + 1})}))
    if kind == "repeat":
        rels = [("next", {"page_info": arg(query, "page_info", token(info))})]
    # a Link header per rel (rel="next" in the second from page 2 on): a client must read them all
    header = [f"Link: {link(host, path, params, [rel])}" for rel in rels]
    return serve_page(kind, items, lambda xs: {"products": xs}, ["id"], header)


def stripe_list(world, query):
    limit = int(arg(query, "limit", "10"))
    since = version_of(arg(query, "created[gte]", str(RECONCILE_EPOCH)))
    events = sorted((e for e in world["events"] if e[1] >= since), key=lambda e: (-e[1], -e[0]))
    after = arg(query, "starting_after", None)
    start = 0
    if after is not None:
        start = next((k + 1 for k, e in enumerate(events) if "evt_%06d" % e[0] == after), len(events))
    page = 1 + -(-start // limit)
    kind = badness(world, page)
    if kind == "repeat" and start >= limit:
        start -= limit      # the previous page again: its last id is the cursor just sent
    chosen = events[start:start + limit]
    has_more = start + limit < len(events) or kind == "repeat"
    items = [event(world, seq, v, i) for seq, v, i in chosen]
    return serve_page(kind, items, lambda xs: {"object": "list", "url": "/v1/events", "has_more": has_more,
                                               "data": xs}, ["data", "object", "id"], [])


def document(world, i):
    """What a fetch of object i returns (its URL: /github/.../issues/N, /shopify/.../products/N.json, /stripe/...)."""
    style = world["style"]
    if style == "github":
        return issue(world, i)
    if style == "shopify":
        return {"product": product(world, i)}
    return customer(world, i)


def index_of(world, oid):
    """The object whose external id is oid, or None (without a walk over the world: a bench asks thousands)."""
    digits = {"github": oid, "shopify": oid, "stripe": oid[4:] if oid.startswith("cus_") else ""}[world["style"]]
    if not digits.isdigit():
        return None
    i = int(digits) - (7000 if world["style"] == "shopify" else 0)
    return i if i in world["versions"] and external_id(world, i) == oid else None


def one(world, oid):
    requested(world, "fetch", oid)
    i = index_of(world, oid)
    if i is None:
        return 404, json.dumps({"error": "not found"}), []
    return 200, json.dumps(document(world, i)), []


def documents(world, query):
    """/reconcile/documents?ids=A,B: each object's document as its fetch returns it (one request for a test)."""
    ids = [x for x in arg(query, "ids", "").split(",") if x]
    return 200, json.dumps({oid: document(world, index_of(world, oid)) for oid in ids
                            if index_of(world, oid) is not None}), []


def route(kind, parts, query, headers):
    """(status, body, extra headers) for the routes of this module, or None for another's."""
    key = arg(query, "key", "")
    if kind == "reconcile" and parts[1:2] == ["reset"]:
        return reset(query)
    world = worlds.get(key)
    if kind not in ("reconcile", "github", "shopify", "stripe"):
        return None
    if world is None:
        return 404, json.dumps({"error": "no such world (GET /reconcile/reset?key=K first)"}), []
    host, path, action = headers.get("host", "127.0.0.1"), "/" + "/".join(parts), parts[1:2]
    # what the request was sent with (the source's headers), for the log
    world["credential"] = headers.get("authorization") or headers.get("x-shopify-access-token")
    if kind == "reconcile":
        if action == ["change"]:
            return change(world, query)
        if action == ["bad"]:
            return bad(world, query)
        if action == ["documents"]:
            return documents(world, query)
        if action == ["requests"]:
            return 200, json.dumps({"pages": world["pages"], "fetches": world["fetches"], "log": world["log"]}), []
        return 200, json.dumps({external_id(world, i): v for i, v in world["versions"].items()}), []
    if kind == "github" and parts[-1] == "issues":
        return github_list(world, path, query, host)
    if kind == "github":
        return one(world, parts[-1])
    if kind == "shopify" and parts[-1] == "products.json":
        return shopify_list(world, path, query, host)
    if kind == "shopify":
        return one(world, parts[-1].removesuffix(".json"))
    if parts[-1] == "events":
        return stripe_list(world, query)
    return one(world, parts[-1])
