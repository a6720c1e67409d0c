#!/usr/bin/env python3
"""test/proxy.py: a small forward HTTP proxy for the tests (webhook_ingest.proxy).

Usage: proxy.py [--tls CERT KEY] [HOST:]PORT LOG
  Listens on HOST:PORT (default host 127.0.0.1; HOST must be a loopback
  address: 127.0.0.0/8 or ::1, IPv6 as [::1]:PORT).  Threaded, standard
  library only.  Prints "proxy listening on HOST:PORT" once it accepts.
  --tls: an https:// proxy, with that certificate (PEM) and key; a client
  that gives up the handshake is never logged.

  CONNECT host:port          200 and a byte tunnel (https through the proxy)
  GET http://host:port/path  absolute-form request (any method), forwarded
                             over a fresh upstream connection (sent with
                             Connection: close; the response is framed by its
                             Content-Length / chunked encoding, so the client's
                             connection stays alive for further requests)
  Destinations: only literal addresses in 127.0.0.0/8 or ::1, or "localhost"
  (taken as 127.0.0.1); anything else gets 403 and is never connected to, nor
  resolved.  A destination that refuses the connection: 502.  An
  origin-form request (GET /path): 400.

  LOG: one line appended per request, flushed at once, before forwarding:
    "CONNECT 127.0.0.1:18443"
    "GET http://127.0.0.1:18080/posts/1"
  a refused one (403 or 400) gets " refused" appended.
"""
import ipaddress
import socket
import socketserver
import ssl
import sys
import threading
from urllib.parse import urlsplit

log_lock = threading.Lock()
log_file = None


def log(line):
    with log_lock:
        log_file.write(line + "\n")
        log_file.flush()


def loopback(host):
    """The address to connect to for host, or None if it is not loopback."""
    host = host.strip("[]")
    if host.lower() == "localhost":
        return "127.0.0.1"
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return None
    return str(addr) if addr.is_loopback else None


def split_hostport(hp, default_port):
    if hp.startswith("["):
        host, _, rest = hp[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = hp.rpartition(":") if ":" in hp else (hp, "", "")
    return host, int(port) if port else default_port


def read_head(rfile):
    """Request or status line and headers, as (line, [(name, value)]); None at EOF."""
    line = rfile.readline(65537)
    while line in (b"\r\n", b"\n"):
        line = rfile.readline(65537)
    if not line:
        return None
    headers = []
    while True:
        h = rfile.readline(65537)
        if h in (b"\r\n", b"\n", b""):
            break
        name, _, value = h.decode("latin-1").partition(":")
        headers.append((name.strip(), value.strip()))
    return line.decode("latin-1").rstrip("\r\n"), headers


def header(headers, name):
    for n, v in headers:
        if n.lower() == name:
            return v
    return None


def copy_body(src, dst, headers, until_eof):
    """Copies a message body framed by headers from buffered file src to socket dst."""
    te = (header(headers, "transfer-encoding") or "").lower()
    if "chunked" in te:
        while True:
            size_line = src.readline(65537)
            if not size_line:
                raise ConnectionError("eof in chunked body")
            dst.sendall(size_line)
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while True:  # trailers, up to the empty line
                    t = src.readline(65537)
                    dst.sendall(t)
                    if t in (b"\r\n", b"\n", b""):
                        return
            dst.sendall(read_exact(src, size + 2))
    cl = header(headers, "content-length")
    if cl is not None:
        dst.sendall(read_exact(src, int(cl)))
    elif until_eof:
        while True:
            data = src.read1(65536)
            if not data:
                return
            dst.sendall(data)


def read_exact(src, n):
    data = src.read(n)
    if len(data) != n:
        raise ConnectionError("short body")
    return data


def pump(read, b):
    """Copies from read (a recv or read1 function) to socket b until EOF."""
    try:
        while True:
            data = read(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    finally:
        try:
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class Handler(socketserver.StreamRequestHandler):
    def reply(self, status, reason):
        body = f"{status} {reason}\n".encode()
        self.wfile.write(f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\n"
                         f"Content-Type: text/plain\r\n\r\n".encode() + body)
        self.wfile.flush()

    def handle(self):
        try:
            while self.one():
                pass
        except (OSError, ValueError, ConnectionError):
            pass

    def one(self):
        head = read_head(self.rfile)
        if head is None:
            return False
        line, headers = head
        try:
            method, target, version = line.split(" ", 2)
        except ValueError:
            log(f"{line} refused")
            self.reply(400, "Bad Request")
            return False
        if method == "CONNECT":
            host, port = split_hostport(target, 443)
            addr = loopback(host)
            if addr is None:
                log(f"CONNECT {target} refused")
                self.reply(403, "Forbidden")
                return False
            log(f"CONNECT {target}")
            try:
                up = socket.create_connection((addr, port), timeout=10)
            except OSError:
                self.reply(502, "Bad Gateway")
                return False
            up.settimeout(None)
            self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self.wfile.flush()
            t = threading.Thread(target=pump, args=(up.recv, self.connection), daemon=True)
            t.start()
            # read1: what the client sent after its CONNECT head is in rfile's buffer.
            pump(self.rfile.read1, up)
            t.join()
            up.close()
            return False
        url = urlsplit(target)
        if url.scheme != "http" or not url.hostname:
            log(f"{method} {target} refused")
            self.reply(400, "Bad Request")
            return False
        addr = loopback(url.hostname)
        if addr is None:
            log(f"{method} {target} refused")
            self.reply(403, "Forbidden")
            return False
        log(f"{method} {target}")
        try:
            up = socket.create_connection((addr, url.port or 80), timeout=30)
        except OSError:
            self.reply(502, "Bad Gateway")
            return True
        with up:
            path = url.path or "/"
            if url.query:
                path += "?" + url.query
            skip = {"proxy-connection", "proxy-authorization", "connection", "keep-alive"}
            out = [f"{method} {path} {version}"]
            out += [f"{n}: {v}" for n, v in headers if n.lower() not in skip]
            out.append("Connection: close")
            up.sendall(("\r\n".join(out) + "\r\n\r\n").encode("latin-1"))
            copy_body(self.rfile, up, headers, until_eof=False)
            upr = up.makefile("rb")
            resp = read_head(upr)
            if resp is None:
                self.reply(502, "Bad Gateway")
                return True
            status_line, rheaders = resp
            status = int(status_line.split(" ", 2)[1])
            framed = (header(rheaders, "content-length") is not None
                      or "chunked" in (header(rheaders, "transfer-encoding") or "").lower())
            bodyless = method == "HEAD" or status in (204, 304) or 100 <= status < 200
            keep = framed or bodyless
            back = [status_line]
            back += [f"{n}: {v}" for n, v in rheaders if n.lower() not in ("connection", "keep-alive")]
            back.append("Connection: " + ("keep-alive" if keep else "close"))
            self.wfile.write(("\r\n".join(back) + "\r\n\r\n").encode("latin-1"))
            if not bodyless:
                copy_body(upr, self.connection, rheaders, until_eof=True)
            self.wfile.flush()
            return keep


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024
    tls = None  # an ssl.SSLContext for --tls

    def get_request(self):
        sock, addr = super().get_request()
        if self.tls is not None:
            # the handshake happens in the handler's thread, at its first read
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr


def main():
    global log_file
    args = sys.argv[1:]
    if args[:1] == ["--tls"] and len(args) >= 3:
        Server.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        Server.tls.load_cert_chain(args[1], args[2])
        args = args[3:]
    if len(args) != 2:
        sys.exit("usage: proxy.py [--tls CERT KEY] [HOST:]PORT LOG")
    host, port = split_hostport(args[0], None) if ":" in args[0] else ("127.0.0.1", int(args[0]))
    if loopback(host) is None:
        sys.exit(f"proxy.py: {host} is not a loopback address")
    log_file = open(args[1], "a", buffering=1)
    Server.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with Server((host.strip("[]"), port), Handler) as srv:
        print(f"proxy listening on {host}:{port}", flush=True)
        srv.serve_forever()


if __name__ == "__main__":
    main()
