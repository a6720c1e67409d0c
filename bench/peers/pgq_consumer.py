#!/usr/bin/env python3
"""bench/peers/pgq_consumer.py: the PgQ consumer (stdlib + psycopg2).

PgQ has no dedup: it delivers every event inserted.  This consumer dedups by
event id itself (table pgq_seen, INSERT ... ON CONFLICT DO NOTHING RETURNING)
in the batch's transaction, which commits with pgq.finish_batch() only after
every object of the batch is stored, and fetches each distinct object of the
batch once (a batch coalesces repeated objects), CONCURRENCY fetches at a time
(http.client in threads), each stored with store_post() in its own
transaction on a small connection pool.  Batches are consumed one after the
other, so a later webhook's fetch never finishes before an earlier one's.
Ticks come from pgqd (the bench runs it).

Usage: pgq_consumer.py DSN HOST PORT CONCURRENCY POOL_SIZE
"""
import http.client
import json
import os
import resource
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg2
import psycopg2.pool

# One HTTP connection per fetch thread: lift the soft file limit to the hard
# one, as Node does at start and webhook_ingest's worker does.
resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
dsn, host, port, concurrency, pool_size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
pool = psycopg2.pool.ThreadedConnectionPool(1, pool_size, dsn)
local = threading.local()
# ThreadedConnectionPool raises when exhausted: at most pool_size threads take one.
slots = threading.BoundedSemaphore(pool_size)


def fetch_and_store(object_id):
    conn = getattr(local, "http", None)
    for attempt in range(2):
        if conn is None:
            conn = local.http = http.client.HTTPConnection(host, port, timeout=30)
        try:
            conn.request("GET", "/posts/" + object_id)
            r = conn.getresponse()
            body = r.read()
            break
        except (http.client.HTTPException, OSError):
            conn.close()
            conn = local.http = None
            if attempt:
                raise
    if r.status != 200:
        raise RuntimeError("GET %s: %d" % (object_id, r.status))
    post = json.loads(body)
    with slots:
        db = pool.getconn()
        try:
            with db, db.cursor() as cur:
                cur.execute("SELECT store_post(%s::jsonb)", (json.dumps(post),))
        finally:
            pool.putconn(db)


main = psycopg2.connect(dsn)
cur = main.cursor()
cur.execute("SELECT pgq.register_consumer('posts', 'bench')")
main.commit()
print("ready", os.getpid(), flush=True)
with ThreadPoolExecutor(max_workers=concurrency) as ex:
    while True:
        cur.execute("SELECT pgq.next_batch('posts', 'bench')")
        batch = cur.fetchone()[0]
        if batch is None:
            main.commit()
            time.sleep(0.02)
            continue
        cur.execute("SELECT ev_data, ev_extra1 FROM pgq.get_batch_events(%s)", (batch,))
        events = cur.fetchall()
        cur.execute("""INSERT INTO pgq_seen SELECT unnest(%s::text[]) ON CONFLICT DO NOTHING
                       RETURNING event_id""", ([e[1] for e in events],))
        new = {r[0] for r in cur.fetchall()}
        objects = list(dict.fromkeys(e[0] for e in events if e[1] in new))
        for f in [ex.submit(fetch_and_store, o) for o in objects]:
            f.result()
        cur.execute("UPDATE pgq_progress SET events = events + %s", (len(events),))
        cur.execute("SELECT pgq.finish_batch(%s)", (batch,))
        main.commit()
