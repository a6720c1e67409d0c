#!/usr/bin/python3
"""badproxy.py MODE HOST:PORT - a proxy that misbehaves: 407, 500, garbage, close, slow, hang."""
import socket, sys, threading, time
mode, hp = sys.argv[1], sys.argv[2]
host, port = hp.rsplit(':', 1)
log = open(f'/tmp/a15/badproxy_{mode}.log', 'a', buffering=1)
def serve(c):
    try:
        req = c.recv(65536).decode(errors='replace').split('\r\n')[0]
        log.write(f'{mode} {req}\n')
        if mode == '407':
            c.sendall(b'HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="x"\r\nContent-Length: 0\r\n\r\n')
        elif mode == '500':
            c.sendall(b'HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\n\r\nerror')
        elif mode == 'garbage':
            c.sendall(b'\x00\xffNOT HTTP AT ALL\r\n' * 1000)
        elif mode == 'close':
            pass
        elif mode == 'slow':
            for ch in b'HTTP/1.1 200 Connection established\r\n\r\n':
                c.sendall(bytes([ch])); time.sleep(1)
            time.sleep(60)
        elif mode == 'hang':
            time.sleep(3600)
        elif mode == 'endless':
            c.sendall(b'HTTP/1.1 200 OK\r\n')
            while True: c.sendall(b'X-Filler: ' + b'a' * 1000 + b'\r\n')
    except Exception as e:
        log.write(f'{mode} error {e!r}\n')
    finally:
        c.close()
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); ls.bind((host, int(port))); ls.listen(512)
while True:
    c, _ = ls.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
