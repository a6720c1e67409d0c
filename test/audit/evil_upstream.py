#!/usr/bin/env python3
"""test/audit/evil_upstream.py PORT: a hostile upstream on 127.0.0.1 for the
audit (loopback only).  Routes:
  /longloc/<id>    302 with a 90 kB Location (same origin)
  /crlfloc/<id>    302 whose Location carries a bare CR and an encoded CRLF
  /v6loc/<id>      302 to http://[::1]:PORT/echo (another origin: an IPv6 literal)
  /userloc/<id>    302 to http://a:b@127.0.0.1:PORT/echo (same origin, userinfo)
  /headers/<id>    200 after 2 000 headers of 1 kB each
  /deep/<id>       200 with 60 000 nested arrays
  /echo/<id>       200: the request headers
"""
import asyncio, json, sys
port = int(sys.argv[1])

def resp(status, body=b"", extra=()):
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", "Content-Type: application/json", *extra]
    return "\r\n".join(head).encode("latin-1") + b"\r\n\r\n" + body

async def serve(reader, writer):
    try:
        while True:
            line = await reader.readline()
            if not line:
                break
            target = line.decode("latin-1").split(" ")[1]
            headers = {}
            while True:
                h = await reader.readline()
                if h in (b"\r\n", b"\n", b""):
                    break
                k, _, v = h.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            kind = target.split("/")[1]
            if kind == "longloc":
                out = resp(302, extra=["Location: /echo/" + "a" * 90000])
            elif kind == "crlfloc":
                out = resp(302, extra=["Location: /echo/x%0d%0aX-Injected:%20yes\rX-Bare: cr"])
            elif kind == "v6loc":
                out = resp(302, extra=[f"Location: http://[::1]:{port}/echo/v6"])
            elif kind == "userloc":
                out = resp(302, extra=[f"Location: http://a:b@127.0.0.1:{port}/echo/u"])
            elif kind == "headers":
                out = resp(200, b'{"ok": true}', [f"X-H{i}: " + "h" * 1000 for i in range(2000)])
            elif kind == "deep":
                out = resp(200, b"[" * 60000 + b"]" * 60000)
            else:
                out = resp(200, json.dumps({"target": target, "headers": headers}).encode())
            writer.write(out)
            await writer.drain()
    except Exception:
        pass
    finally:
        writer.close()

async def main():
    s1 = await asyncio.start_server(serve, "127.0.0.1", port)
    s2 = await asyncio.start_server(serve, "::1", port)
    async with s1, s2:
        await asyncio.gather(s1.serve_forever(), s2.serve_forever())

asyncio.run(main())
