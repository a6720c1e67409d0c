#!/usr/bin/python3
"""hostile.py MODE HOST:PORT CERTDIR [arg] - hostile TLS/HTTP2 upstreams for the audit."""
import socket, ssl, sys, threading, time, os
mode, hp, certs = sys.argv[1], sys.argv[2], sys.argv[3]
arg = sys.argv[4] if len(sys.argv) > 4 else None
host, port = hp.rsplit(':', 1); port = int(port)
log = open(f'/tmp/a15/hostile_{mode}_{port}.log', 'a', buffering=1)

def ctx(alpn=('h2', 'http/1.1'), chain=None):
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    c.load_cert_chain(chain or f'{certs}/server.pem', f'{certs}/server.key')
    c.set_alpn_protocols(list(alpn))
    return c

def h1_handle(s, location=None):
    f = s.makefile('rb')
    while True:
        line = f.readline()
        if not line: return
        req = line.decode(errors='replace').strip()
        while True:
            l = f.readline()
            if l in (b'\r\n', b'\n', b''): break
        log.write(f'{mode} {req}\n')
        if location:
            s.sendall(f'HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n'.encode())
        else:
            b = b'{"id": "1"}'
            s.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' % (len(b), b))

def h2_handle(s):
    import h2.connection, h2.config, h2.events, h2.settings
    cfg = h2.config.H2Configuration(client_side=False, header_encoding='utf-8')
    c = h2.connection.H2Connection(config=cfg)
    c.initiate_connection()
    if mode == 'h2zero':
        c.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 0})
    if mode == 'h2huge':
        c.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 2**31 - 1})
    s.sendall(c.data_to_send())
    n = 0
    while True:
        data = s.recv(65536)
        if not data: return
        try:
            events = c.receive_data(data)
        except Exception as e:
            log.write(f'{mode} protoerr {e!r}\n'); return
        for ev in events:
            if isinstance(ev, h2.events.RequestReceived):
                n += 1
                path = dict(ev.headers).get(':path')
                log.write(f'{mode} stream {ev.stream_id} {path}\n')
                sid = ev.stream_id
                if mode in ('h2silent',):
                    continue
                if mode == 'h2rst':
                    c.reset_stream(sid, error_code=0x7)  # REFUSED_STREAM
                    continue
                if mode == 'h2goaway' and n > int(arg or 3):
                    c.close_connection(error_code=0, last_stream_id=1)
                    s.sendall(c.data_to_send()); time.sleep(0.05); s.close(); return
                if mode == 'h2hdr':
                    big = [('x-big-%d' % i, 'v' * 4000) for i in range(int(arg or 64))]
                    c.send_headers(sid, [(':status', '200'), ('content-type', 'application/json')] + big)
                else:
                    c.send_headers(sid, [(':status', '200'), ('content-type', 'application/json')])
                c.send_data(sid, b'{"id": "1"}', end_stream=True)
            elif isinstance(ev, h2.events.WindowUpdated):
                pass
        out = c.data_to_send()
        if out: s.sendall(out)

def serve(conn):
    try:
        if mode == 'stall':           # accept TCP, never answer the ClientHello
            log.write('stall accepted\n'); time.sleep(3600); return
        if mode == 'slowhello':       # a byte of ServerHello every few seconds
            conn.sendall(b'\x16'); time.sleep(3600); return
        alpn = ('http/1.1',) if mode in ('redirect', 'h1', 'bigchain') else ('h2', 'http/1.1')
        chain = f'/tmp/a15/bigchain.pem' if mode == 'bigchain' else None
        s = ctx(alpn, chain).wrap_socket(conn, server_side=True)
        log.write(f'{mode} handshake alpn={s.selected_alpn_protocol()}\n')
        if s.selected_alpn_protocol() == 'h2':
            h2_handle(s)
        else:
            h1_handle(s, arg if mode == 'redirect' else None)
    except Exception as e:
        log.write(f'{mode} error {e!r}\n')
    finally:
        try: conn.close()
        except Exception: pass

ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((host, port)); ls.listen(4096)
print(f'{mode} listening on {hp}', flush=True)
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
