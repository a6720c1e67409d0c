#!/usr/bin/env python3
"""test/audit/apply_upstream.py PORT: a hostile upstream on 127.0.0.1 for the
audit of the apply workers (loopback only).  Routes:
  /huge/<id>?kb=N   200 with a JSON body of about N kB ({"id", "blob": "xxx..."})
  /nul/<id>         200 with a body that holds a NUL byte inside a JSON string
  /badutf8/<id>     200 with a JSON body that is not valid UTF-8
  /loris/<id>?ms=M  200 whose body comes one byte every M ms (Content-Length known)
  /keys/<id>?n=N    200 with a JSON object of N keys (about 16 N bytes; slow to parse)
  /posts/<id>       200 {"id"}
Any route takes ?delay_ms=N.
"""
import asyncio, json, sys
from urllib.parse import urlsplit, parse_qs

port = int(sys.argv[1])


def head(status, length):
    return (f"HTTP/1.1 {status} X\r\nContent-Length: {length}\r\n"
            "Content-Type: application/json\r\n\r\n").encode()


CHUNK = b"x" * 65536


def huge_parts(oid, kb):
    """A body of kb kB as (prefix, number of 64 kB chunks, suffix): streamed, never built whole."""
    prefix = b'{"id": ' + json.dumps(oid).encode() + b', "blob": "'
    return prefix, max(kb // 64, 1), b'"}'


keyed = {}


def body_for(kind, oid, q):
    if kind == "keys":
        n = int(q.get("n", ["70000"])[0])
        if n not in keyed:
            keyed[n] = ("{" + ",".join('"k%d": %d' % (i, i) for i in range(n)) + "}").encode()
        return keyed[n]
    if kind == "nul":
        return b'{"id": "' + oid.encode() + b'", "s": "a\x00b"}'
    if kind == "badutf8":
        return b'{"id": "' + oid.encode() + b'", "s": "\xff\xfe\xc3("}'
    return json.dumps({"id": oid}).encode()


async def serve(reader, writer):
    try:
        while True:
            line = await reader.readline()
            if not line:
                break
            target = line.decode("latin-1").split(" ")[1]
            while True:
                h = await reader.readline()
                if h in (b"\r\n", b"\n", b""):
                    break
            url = urlsplit(target)
            q = parse_qs(url.query)
            parts = [p for p in url.path.split("/") if p]
            kind, oid = (parts + ["", ""])[:2]
            delay = int(q.get("delay_ms", ["0"])[0])
            if delay:
                await asyncio.sleep(delay / 1000)
            if kind == "huge":
                prefix, n, suffix = huge_parts(oid, int(q.get("kb", ["1024"])[0]))
                writer.write(head(200, len(prefix) + n * len(CHUNK) + len(suffix)) + prefix)
                for _ in range(n):
                    writer.write(CHUNK)
                    await writer.drain()
                writer.write(suffix)
                await writer.drain()
                continue
            body = body_for(kind, oid, q)
            writer.write(head(200, len(body)))
            if kind == "loris":
                ms = int(q.get("ms", ["100"])[0])
                for b in body:
                    writer.write(bytes([b]))
                    await writer.drain()
                    await asyncio.sleep(ms / 1000)
            else:
                writer.write(body)
            await writer.drain()
    except (ConnectionError, ValueError, IndexError):
        pass
    finally:
        writer.close()


async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", port, backlog=4096, reuse_address=True)
    print(f"apply_upstream listening on 127.0.0.1:{port}", flush=True)
    await server.serve_forever()

asyncio.run(main())
