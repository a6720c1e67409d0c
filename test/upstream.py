#!/usr/bin/env python3
"""test/upstream.py: the stand-in for a sender's API, for tests, the demo and
the benchmarks.  Listens on 127.0.0.1:PORT, and on every extra HOST:PORT
given (loopback only: 127.0.0.0/8, ::1); asyncio, so it holds thousands of
connections.  Standard library only.  Counts are shared by all listeners.

  /posts/<id>      200, a post with tags and categories (the seeds' example)
  /gone/<id>       404
  /error/<id>      500, always
  /flaky/<id>      503 twice per id, then 200
  /throttle/<id>   429 with Retry-After: 1 once per id, then 200
  /throttled/<id>  429 with Retry-After: 1, always
  /slow/<id>       200 after 5 s
  /invalid/<id>    200 with a body that is not JSON
  /big/<id>        200 with a 256 kB JSON body (?kb=N: about N kB)
  /keys/<id>       200 with a JSON object of ?n=N keys (60 000: about 1 MB, slow to parse)
  /badrequest/<id> 400
  /redirect/<id>   302 to an ftp:// URL
  /retryafter/<id> 503 with Retry-After: 5abc (not a valid value) once per id, then 200
  /retrydate/<id>  503 with Retry-After: an HTTP-date 2 s ahead once per id, then 200
  /echo/<id>       200: the listener and the request headers it received (names lowercased)
  /sameredirect/<id>   302 to /echo/<id> on the same origin
  /crossredirect/<id>  302 to http://127.0.0.1:18081/echo/<id> (another origin)
  /deniedredirect/<id> 302 to http://127.0.0.3:18083/echo/<id>
  /redirectloop/<id>   302 to itself
  /stamp/<id>      200 {"id", "at"}: "at" is the arrival time at the upstream (epoch seconds, float)
  /quota/<id>      the first request of a key gets 429 (?status=503: 503) with Retry-After: R and
                   opens a window of W s; requests inside the window get the same and are counted
                   ("quota_during"); after it, 200 {"id", "during"}: the requests that came inside
                   the window after the first
  /ghlimit/<id>    GitHub-style budget of B requests per key: 200 with X-RateLimit-Limit,
                   X-RateLimit-Remaining counting down and X-RateLimit-Reset (epoch seconds; with
                   ?relative=1 seconds from now); the one that spends the budget says Remaining: 0
                   and a Reset S s ahead (rounded up to a whole second); requests before it get 429
                   with the same headers and are counted ("ghlimit_during"); at the reset the budget
                   refills; 200 {"id", "remaining", "during", "at"} ("at": the arrival time)
  /ietflimit/<id>  the same with the IETF draft's RateLimit-Limit, RateLimit-Remaining and
                   RateLimit-Reset (seconds from now) ("ietflimit_during")
  /concurrent/<id> 200 {"id", "peak"} after the delay: "peak" is the most requests of the key that
                   were in progress at once so far
  /stats           counts of requests per route, and per listener ("listener HOST:PORT"), as JSON

Paginated lists over objects that change, for reconciliation (worlds, one per ?key=K):
  /reconcile/reset?style=S&objects=N   a new world of N objects in the shape of S (github, shopify or
                   stripe); object i was last changed at version i; versions are seconds after
                   2024-01-01T00:00:00Z (RECONCILE_EPOCH)
  /reconcile/change?n=M[&ids=I,J]      M changes (object (7 k mod N) + 1 for the world's k-th change,
                   or the ids given), each at the next version; every 10th change of a world sends no
                   webhook; returns {"changes": [{"id", "version", "webhook", "payload"}]}: id the
                   external id, payload what the sender's webhook carries
  /reconcile/bad?kind=K&page=P[&times=T]  page P of the world's list answers badly T times (1; -1: always):
                   notjson (200, HTML), noid (an item without its id), repeat (the next page is this
                   one again), huge (a valid 10 MB page), 500, retryafter (503 with Retry-After: 3)
  /reconcile/state                     every object's current version, {"<id>": version}
  /reconcile/documents?ids=A,B         those objects as their fetches return them, {"<id>": document}
  /reconcile/requests                  what the world was asked: {"pages": {"<page>": requests},
                   "fetches": {"<id>": requests}, "log": [["page N" or "fetch ID", at, credential]]}:
                   at, when it was answered (after any delay_ms); credential, the request's
                   Authorization or X-Shopify-Access-Token header
  /github/repos/O/R/issues?since=ISO&per_page=P&page=N   issues updated at or after since, oldest
                   first, a JSON array, Link: <...>; rel="next" (and "last", "prev", "first")
  /github/repos/O/R/issues/<number>    one issue
  /shopify/admin/api/V/products.json?updated_at_min=ISO&limit=L   {"products": [...]} by id, then
                   ?page_info=T&limit=L from Link: <...>; rel="next" (rel="previous" too, first, in a
                   Link header of its own)
  /shopify/admin/api/V/products/<id>.json   {"product": {...}}
  /stripe/v1/events?created[gte]=T&limit=L&starting_after=evt   {"object": "list", "data": [events,
                   newest first], "has_more"}: one customer.updated event per change
  /stripe/v1/customers/<id>            one customer

Any route takes ?delay_ms=N to answer after N ms.  The stateful routes (quota, ghlimit,
ietflimit, concurrent) keep their state per ?key=K (default ""), so a test can start afresh
under a new key; /quota takes ?retry_after=R (2) and ?window=W (R), the limit routes ?budget=B
(3) and ?reset=S (2).  quota, ghlimit and ietflimit decide on arrival, before the delay.
Usage: upstream.py PORT [DEFAULT_DELAY_MS [HOST:PORT ...]]
"""
import asyncio
import functools
import ipaddress
import json
import math
import sys
import time
from collections import Counter
from email.utils import formatdate
from urllib.parse import urlsplit, parse_qs, unquote

import upstream_lists

counts = Counter()
seen = Counter()
default_delay_ms = 0
quotas = {}       # key -> {"until", "during"}
budgets = {}      # (route, key) -> {"left", "reset", "during"}
in_progress = {}  # key -> {"now", "peak"}


def respond(status, body, extra=()):
    reason = {200: "OK", 302: "Found", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests",
              500: "Internal Server Error", 503: "Service Unavailable"}[status]
    data = body.encode() if isinstance(body, str) else body
    head = [f"HTTP/1.1 {status} {reason}", f"Content-Length: {len(data)}",
            "Content-Type: application/json", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + data


def redirect(location):
    return respond(302, "", [f"Location: {location}"])


def arg(query, name, default):
    return query.get(name, [default])[0]


def quota(oid, query, now):
    """/quota: one window per key, opened by its first request."""
    retry_after, status = int(arg(query, "retry_after", "2")), int(arg(query, "status", "429"))
    q = quotas.get(arg(query, "key", ""))
    if q is None:
        quotas[arg(query, "key", "")] = {"until": now + float(arg(query, "window", retry_after)), "during": 0}
        return respond(status, '{"error": "quota exceeded"}', [f"Retry-After: {retry_after}"])
    if now < q["until"]:
        q["during"] += 1
        counts["quota_during"] += 1
        return respond(status, '{"error": "quota exceeded"}', [f"Retry-After: {max(1, math.ceil(q['until'] - now))}"])
    return respond(200, json.dumps({"id": oid, "during": q["during"]}))


def limit_headers(kind, budget, left, reset, now, relative):
    if kind == "ghlimit":
        value = math.ceil(reset - now) if relative else int(reset)
        return [f"X-RateLimit-Limit: {budget}", f"X-RateLimit-Remaining: {left}", f"X-RateLimit-Reset: {value}"]
    return [f"RateLimit-Limit: {budget}", f"RateLimit-Remaining: {left}",
            f"RateLimit-Reset: {max(0, math.ceil(reset - now))}"]


def limited(kind, oid, query, now):
    """/ghlimit and /ietflimit: a budget of requests per key that refills at its reset."""
    budget, reset_s = int(arg(query, "budget", "3")), float(arg(query, "reset", "2"))
    relative = arg(query, "relative", "0") == "1"
    b = budgets.setdefault((kind, arg(query, "key", "")), {"left": budget, "reset": 0.0, "during": 0})
    if b["left"] == 0 and now < b["reset"]:
        b["during"] += 1
        counts[f"{kind}_during"] += 1
        return respond(429, '{"error": "rate limit exceeded"}',
                       limit_headers(kind, budget, 0, b["reset"], now, relative))
    if b["left"] == 0:
        b["left"] = budget
    b["left"] -= 1
    # GitHub's reset is a whole epoch second: round up, so the window is at least reset_s long.
    reset = math.ceil(now + reset_s) if kind == "ghlimit" else now + reset_s
    if b["left"] == 0:
        b["reset"] = reset
    return respond(200, json.dumps({"id": oid, "remaining": b["left"], "during": b["during"], "at": now}),
                   limit_headers(kind, budget, b["left"], reset, now, relative))


async def concurrent(oid, query, delay):
    """/concurrent: counts the requests of a key in progress during the delay."""
    c = in_progress.setdefault(arg(query, "key", ""), {"now": 0, "peak": 0})
    c["now"] += 1
    c["peak"] = max(c["peak"], c["now"])
    try:
        await asyncio.sleep(delay / 1000)
    finally:
        c["now"] -= 1
    return respond(200, json.dumps({"id": oid, "peak": c["peak"]}))


async def route(path, query, headers, listener):
    arrived = time.time()
    parts = [p for p in path.split("/") if p]
    kind = parts[0] if parts else ""
    oid = unquote(parts[1]) if len(parts) > 1 else ""
    counts[kind] += 1
    delay = int(query.get("delay_ms", [default_delay_ms])[0])
    if kind == "slow":
        delay = max(delay, 5000)
    if kind == "concurrent":
        return await concurrent(oid, query, delay)
    decided = None
    if kind == "quota":
        decided = quota(oid, query, arrived)
    elif kind in ("ghlimit", "ietflimit"):
        decided = limited(kind, oid, query, arrived)
    if delay:
        await asyncio.sleep(delay / 1000)
    if decided is not None:
        return decided
    listed = upstream_lists.route(kind, parts, query, headers)
    if listed is not None:
        return respond(*listed)
    if kind == "stamp":
        return respond(200, json.dumps({"id": oid, "at": arrived}))
    if kind == "stats":
        return respond(200, json.dumps(counts))
    if kind == "posts":
        n = sum(map(ord, oid)) if oid else 0
        return respond(200, json.dumps({"id": oid, "title": f"Post {oid}",
                                        "tags": [f"tag-{n % 3}", f"tag-{n % 5 + 3}"],
                                        "categories": [f"cat-{n % 2}"]}))
    if kind == "gone":
        return respond(404, '{"error": "not found"}')
    if kind == "error":
        return respond(500, '{"error": "boom"}')
    if kind == "flaky":
        seen[path] += 1
        if seen[path] <= 2:
            return respond(503, '{"error": "try later"}')
        return respond(200, json.dumps({"id": oid, "attempt": seen[path]}))
    if kind == "throttle":
        seen[path] += 1
        if seen[path] == 1:
            return respond(429, '{"error": "slow down"}', ["Retry-After: 1"])
        return respond(200, json.dumps({"id": oid}))
    if kind == "throttled":
        return respond(429, '{"error": "slow down"}', ["Retry-After: 1"])
    if kind == "slow":
        return respond(200, json.dumps({"id": oid}))
    if kind == "invalid":
        return respond(200, "this is not json")
    if kind == "big":
        size = int(arg(query, "kb", "0")) * 1024 - 64 if "kb" in query else 256 * 1024
        return respond(200, json.dumps({"id": oid, "blob": "x" * size}))
    if kind == "keys":
        return respond(200, "{" + ",".join('"k%d": %d' % (i, i) for i in range(int(arg(query, "n", "60000")))) + "}")
    if kind == "badrequest":
        return respond(400, '{"error": "bad request"}')
    if kind == "redirect":
        return redirect("ftp://127.0.0.1/secret")
    if kind == "retryafter":
        seen[path] += 1
        if seen[path] == 1:
            return respond(503, '{"error": "later"}', ["Retry-After: 5abc"])
        return respond(200, json.dumps({"id": oid}))
    if kind == "retrydate":
        seen[path] += 1
        if seen[path] == 1:
            return respond(503, '{"error": "later"}', [f"Retry-After: {formatdate(time.time() + 2, usegmt=True)}"])
        return respond(200, json.dumps({"id": oid}))
    if kind == "echo":
        return respond(200, json.dumps({"id": oid, "listener": listener, "headers": headers}))
    if kind == "sameredirect":
        return redirect(f"/echo/{parts[1]}")
    if kind == "crossredirect":
        return redirect(f"http://127.0.0.1:18081/echo/{parts[1]}")
    if kind == "deniedredirect":
        return redirect(f"http://127.0.0.3:18083/echo/{parts[1]}")
    if kind == "redirectloop":
        return redirect(path)
    return respond(404, '{"error": "no such route"}')


async def serve(listener, reader, writer):
    try:
        while True:
            line = await reader.readline()
            if not line:
                break
            method, target, _ = line.decode("latin-1").split(" ", 2)
            headers = {}
            while True:
                h = await reader.readline()
                if h in (b"\r\n", b"\n", b""):
                    break
                name, _, value = h.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            counts[f"listener {listener}"] += 1
            url = urlsplit(target)
            writer.write(await route(url.path, parse_qs(url.query), headers, listener))
            await writer.drain()
    except (ConnectionError, ValueError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


def loopback(host):
    addr = ipaddress.ip_address(host)
    if not addr.is_loopback:
        sys.exit(f"upstream.py: {host} is not a loopback address")
    return host


async def main(listeners):
    servers = []
    for host, port in listeners:
        servers.append(await asyncio.start_server(functools.partial(serve, f"{host}:{port}"), loopback(host), port,
                                                  backlog=4096, reuse_address=True))
        print(f"upstream listening on {host}:{port}", flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


if __name__ == "__main__":
    if len(sys.argv) > 2:
        default_delay_ms = int(sys.argv[2])
    extra = [a.rsplit(":", 1) for a in sys.argv[3:]]
    asyncio.run(main([("127.0.0.1", int(sys.argv[1]))] + [(h.strip("[]"), int(p)) for h, p in extra]))
