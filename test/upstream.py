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
  /big/<id>        200 with a 256 kB JSON body
  /badrequest/<id> 400
  /redirect/<id>   302 to an ftp:// URL
  /retryafter/<id> 503 with Retry-After: 5abc (not a valid value) once per id, then 200
  /retrydate/<id>  503 with Retry-After: an HTTP-date 2 s ahead once per id, then 200
  /echo/<id>       200: the listener and the request headers it received (names lowercased)
  /sameredirect/<id>   302 to /echo/<id> on the same origin
  /crossredirect/<id>  302 to http://127.0.0.1:18081/echo/<id> (another origin)
  /deniedredirect/<id> 302 to http://127.0.0.3:18083/echo/<id>
  /redirectloop/<id>   302 to itself
  /stats           counts of requests per route, and per listener ("listener HOST:PORT"), as JSON

Any route takes ?delay_ms=N to answer after N ms.
Usage: upstream.py PORT [DEFAULT_DELAY_MS [HOST:PORT ...]]
"""
import asyncio
import functools
import ipaddress
import json
import sys
import time
from collections import Counter
from email.utils import formatdate
from urllib.parse import urlsplit, parse_qs, unquote

counts = Counter()
seen = Counter()
default_delay_ms = 0


def respond(status, body, extra=()):
    reason = {200: "OK", 302: "Found", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests",
              500: "Internal Server Error", 503: "Service Unavailable"}[status]
    data = body.encode() if isinstance(body, str) else body
    head = [f"HTTP/1.1 {status} {reason}", f"Content-Length: {len(data)}",
            "Content-Type: application/json", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + data


def redirect(location):
    return respond(302, "", [f"Location: {location}"])


async def route(path, query, headers, listener):
    parts = [p for p in path.split("/") if p]
    kind = parts[0] if parts else ""
    oid = unquote(parts[1]) if len(parts) > 1 else ""
    counts[kind] += 1
    delay = int(query.get("delay_ms", [default_delay_ms])[0])
    if kind == "slow":
        delay = max(delay, 5000)
    if delay:
        await asyncio.sleep(delay / 1000)
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
        return respond(200, json.dumps({"id": oid, "blob": "x" * (256 * 1024)}))
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
