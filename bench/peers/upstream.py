#!/usr/bin/env python3
"""bench/peers/upstream.py: the storm's upstream (asyncio, stdlib, loopback only).

Each object has a version, 0 at first, that the storm's senders bump before
they send the first delivery of an event about it; a fetch answers the version
read when its request arrived, after a delay drawn uniformly per request.

  GET /posts/{id}  200 {"id": id, "title": "Post id", "tags": ["tag-0", "tag-3"],
                        "version": N}  after LO..HI ms
  GET /bump/{id}   200 {"version": N+1} at once (the object's version, bumped)
  GET /stats       200 {"fetches", "overlaps", "objects_overlapped", "max_in_flight_per_object"}
                   overlaps: fetches that started while another fetch of the same
                   object was in flight

On SIGTERM it writes LOG (one line per fetch: object id, start, end (Unix
seconds), version served, fetches of that object in flight at its start) and exits.
HTTP/1.1 with keep-alive; nothing else of HTTP.

Usage: upstream.py PORT LO_MS HI_MS LOG
"""
import asyncio
import json
import os
import random
import signal
import sys
import time

port, lo_ms, hi_ms, log_path = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
versions = {}
in_flight = {}
fetch_log = []
stats = {"fetches": 0, "overlaps": 0, "max_in_flight_per_object": 0}
overlapped = set()


def response(status, body):
    b = json.dumps(body).encode()
    return (b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % (status, b"OK" if status == 200 else b"Not Found", len(b))) + b


async def fetch(obj):
    start = time.time()
    n = in_flight.get(obj, 0)
    in_flight[obj] = n + 1
    stats["fetches"] += 1
    if n:
        stats["overlaps"] += 1
        overlapped.add(obj)
    stats["max_in_flight_per_object"] = max(stats["max_in_flight_per_object"], n + 1)
    version = versions.get(obj, 0)
    try:
        await asyncio.sleep(random.uniform(lo_ms, hi_ms) / 1000.0)
    finally:
        in_flight[obj] -= 1
    fetch_log.append((obj, start, time.time(), version, n))
    return response(200, {"id": obj, "title": "Post " + obj, "tags": ["tag-0", "tag-3"], "version": version})


async def route(path):
    if path.startswith("/posts/"):
        return await fetch(path[7:])
    if path.startswith("/bump/"):
        obj = path[6:]
        versions[obj] = versions.get(obj, 0) + 1
        return response(200, {"version": versions[obj]})
    if path == "/stats":
        return response(200, dict(stats, objects_overlapped=len(overlapped)))
    return response(404, {"error": "no such route"})


async def serve(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            line = head.split(b"\r\n", 1)[0].decode("latin-1").split()
            writer.write(await route(line[1] if len(line) > 1 else "/"))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


def write_log():
    with open(log_path, "w") as f:
        for obj, start, end, version, n in sorted(fetch_log, key=lambda r: r[1]):
            f.write("%s %.6f %.6f %d %d\n" % (obj, start, end, version, n))


async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", port, backlog=1024)
    stop = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set_result, None)
    print("ready", os.getpid(), flush=True)
    await stop
    server.close()
    write_log()


asyncio.run(main())
