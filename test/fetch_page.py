#!/usr/bin/env python3
"""test/fetch_page.py URL: GET URL from test/upstream.py, for the regress
tests that drive reconciliation without the worker (test/sql/21_reconcile.sql
reads it with COPY ... FROM PROGRAM).  Prints one line: the HTTP status, the
Link header (several joined with ", "), the body; the last two base64, tab
between (COPY's text format takes any bytes that way).  Plain HTTP/1.1 over
a socket (urllib's imports cost a quarter of a second a call); loopback only
(the project's rule): any other host is refused.  Standard library only.
"""
import base64
import ipaddress
import socket
import sys
from urllib.parse import urlsplit


def get(url):
    u = urlsplit(url)
    if u.scheme != "http" or not ipaddress.ip_address(u.hostname or "").is_loopback:
        sys.exit(f"fetch_page.py: {url} is not an http URL of a loopback address")
    target = (u.path or "/") + (f"?{u.query}" if u.query else "")
    with socket.create_connection((u.hostname, u.port or 80), timeout=30) as s:
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: {u.netloc}\r\nConnection: close\r\n\r\n".encode("latin-1"))
        data = b""
        while b"\r\n\r\n" not in data:
            data += s.recv(65536) or sys.exit("fetch_page.py: the connection closed before the headers")
        head, body = data.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        headers = [line.partition(":") for line in lines[1:]]
        length = next((int(v) for k, _, v in headers if k.strip().lower() == "content-length"), None)
        while length is not None and len(body) < length:
            body += s.recv(1 << 20) or sys.exit("fetch_page.py: the connection closed before the body")
    link = ", ".join(v.strip() for k, _, v in headers if k.strip().lower() == "link")
    return int(lines[0].split()[1]), link, body


if __name__ == "__main__":
    status, link, body = get(sys.argv[1])
    print(f"{status}\t{base64.b64encode(link.encode()).decode()}\t{base64.b64encode(body).decode()}")
