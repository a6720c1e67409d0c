#!/usr/bin/env python3
"""test/ha/sender.py: one webhook sender for the failover tests (test/t/13x_*.pl).

Sends one webhook per object, objects FIRST, FIRST+STEP, ... below LAST, each
as its own transaction (autocommit: one enqueue() statement), through a
multi-host connection string with target_session_attrs=read-write, at most
RATE a second.  A delivery that fails is sent again with the same event id
(ev-<n>) until it returns, or until DEADLINE seconds have passed since the
start.  A delivery counts as accepted only once enqueue() returned its row.
The outcome of an attempt is unknown when the connection broke during the
statement (the commit may or may not have happened); an ERROR with the
connection still up means it did not commit.

Prints one JSON line per object:
  {"obj": "obj-7", "outcome": "queued"|"duplicate"|...|null, "job_id": ...,
   "attempts": 3, "unknown": 1, "errors": ["57P01", "connect", ...],
   "at": <epoch seconds when it returned>}

Usage: sender.py CONNINFO SOURCE FIRST LAST STEP RATE DEADLINE
"""
import json
import sys
import time

import psycopg2

conninfo, source = sys.argv[1], sys.argv[2]
first, last, step = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rate, deadline = float(sys.argv[6]), time.time() + float(sys.argv[7])

conn = None
next_at = time.time()


def connect():
    global conn
    if conn is None or conn.closed:
        conn = psycopg2.connect(conninfo)
        conn.autocommit = True
    return conn


def drop():
    global conn
    try:
        if conn is not None:
            conn.close()
    except Exception:
        pass
    conn = None


for n in range(first, last, step):
    now = time.time()
    if next_at > now:
        time.sleep(next_at - now)
    next_at = max(next_at, now) + 1.0 / rate
    obj, event = f"obj-{n}", f"ev-{n}"
    rec = {"obj": obj, "outcome": None, "job_id": None, "attempts": 0, "unknown": 0, "errors": []}
    while time.time() < deadline:
        try:
            c = connect()
        except psycopg2.Error:
            rec["errors"].append("connect")
            time.sleep(0.1)
            continue
        rec["attempts"] += 1
        try:
            cur = c.cursor()
            cur.execute("SELECT job_id, outcome FROM webhook_ingest.enqueue(%s, %s, %s::jsonb, %s)",
                        (source, obj, json.dumps({"n": n}), event))
            rec["job_id"], rec["outcome"] = cur.fetchone()
            rec["at"] = time.time()
            break
        except psycopg2.Error as e:
            if c.closed or e.pgcode is None or e.pgcode.startswith("57P"):
                rec["unknown"] += 1
            rec["errors"].append(e.pgcode or "lost")
            drop()
            time.sleep(0.1)
    print(json.dumps(rec), flush=True)
drop()
