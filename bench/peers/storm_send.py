#!/usr/bin/env python3
"""bench/peers/storm_send.py: the storm's plan and its senders (stdlib + psycopg2).

  storm_send.py plan EVENTS OBJECTS SEED > plan.csv
      EVENTS events, each about one of OBJECTS objects (uniform), each delivered
      2 to 4 times (3 on average): the first delivery at the event's turn, the
      redeliveries up to 60 events' turns later; rows seq,event id,object id,first
      in delivery order (plan's columns, schema.sql).
  storm_send.py send SYSTEM DSN PLAN SENDERS RATE UPSTREAM_PORT [BOSS_SQL]
      SENDERS threads take the plan's deliveries in order, paced to RATE a second
      in all (0: as fast as they can).  Before a first delivery the sender bumps
      the object's version on the upstream (GET /bump/{id}); then one transaction:
      the `sent` row (with that version) and the system's intake:
        wi    webhook_ingest.enqueue('bench', object id, NULL, event id)
        gw    graphile_worker.add_job('fetch_post', {id}, job_key => object id,
              job_key_mode => 'preserve_run_at')
        gwq   the same with queue_name => object id
        boss  the statement pg-boss's send() runs (BOSS_SQL, captured by
              boss.mjs sql; its one parameter the object id)
        pgq   pgq.insert_event('posts', 'post', object id, event id, ...)
      Prints "sent N in S s" and exits non-zero if a delivery failed.
"""
import http.client
import json
import random
import sys
import threading
import time

import psycopg2

INTAKE = {
    "wi": "SELECT webhook_ingest.enqueue('bench', %(obj)s, NULL, %(ev)s)",
    "gw": "SELECT graphile_worker.add_job('fetch_post', json_build_object('id', %(obj)s::text), "
          "job_key => %(obj)s, job_key_mode => 'preserve_run_at')",
    "gwq": "SELECT graphile_worker.add_job('fetch_post', json_build_object('id', %(obj)s::text), "
           "queue_name => %(obj)s, job_key => %(obj)s, job_key_mode => 'preserve_run_at')",
    "pgq": "SELECT pgq.insert_event('posts', 'post', %(obj)s, %(ev)s, NULL, NULL, NULL)",
}


def plan(events, objects, seed):
    rnd = random.Random(seed)
    rows = []
    for k in range(events):
        obj = "o-%d" % rnd.randrange(objects)
        n = rnd.randint(2, 4)
        rows.append((k, 0, "ev-%d" % k, obj, "t"))
        for d in range(1, n):
            rows.append((k + rnd.uniform(1, 60), d, "ev-%d" % k, obj, "f"))
    rows.sort()
    for seq, r in enumerate(rows, 1):
        print("%d,%s,%s,%s" % (seq, r[2], r[3], r[4]))


def send(system, dsn, plan_path, senders, rate, up_port, boss_sql=None):
    deliveries = [line.rstrip("\n").split(",") for line in open(plan_path)]
    if system == "boss":
        intake = open(boss_sql).read().replace("%", "%%").replace("$1", "%(obj)s")
    else:
        intake = INTAKE[system]
    lock = threading.Lock()
    state = {"next": 0, "failed": 0}
    t0 = time.time()

    def sender():
        db = psycopg2.connect(dsn)
        up = None
        while True:
            with lock:
                i = state["next"]
                state["next"] += 1
            if i >= len(deliveries):
                break
            seq, ev, obj, first = deliveries[i]
            if rate > 0:
                wait = t0 + i / rate - time.time()
                if wait > 0:
                    time.sleep(wait)
            try:
                version = None
                if first == "t":
                    if up is None:
                        up = http.client.HTTPConnection("127.0.0.1", up_port, timeout=10)
                    up.request("GET", "/bump/" + obj)
                    version = json.loads(up.getresponse().read())["version"]
                with db, db.cursor() as cur:
                    cur.execute("INSERT INTO sent (seq, object_id, version, at) VALUES (%s, %s, %s, clock_timestamp())",
                                (int(seq), obj, version))
                    cur.execute(intake, {"obj": obj, "ev": ev})
            except Exception as e:  # count it, say it, go on
                with lock:
                    state["failed"] += 1
                print("delivery %s failed: %s" % (seq, e), file=sys.stderr, flush=True)
                up = None
        db.close()

    threads = [threading.Thread(target=sender) for _ in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("sent %d in %.2f s, %d failed" % (len(deliveries) - state["failed"], time.time() - t0, state["failed"]), flush=True)
    sys.exit(1 if state["failed"] else 0)


if __name__ == "__main__":
    if sys.argv[1] == "plan":
        plan(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "send":
        a = sys.argv[2:]
        send(a[0], a[1], a[2], int(a[3]), float(a[4]), int(a[5]), *a[6:7])
    else:
        sys.exit(__doc__)
