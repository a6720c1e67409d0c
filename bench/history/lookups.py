"""bench/history/lookups.py: the query shapes of issue 28 against the history
bench/history/run filled, in one session (libpq's PG* variables say where),
each answer checked against what the fill wrote.

Usage: lookups.py N OBJECTS TAIL PENDING DEAD LOOKUPS

Job i (1 .. N + TAIL + PENDING + DEAD) belongs to object 1 + (i - 1) % OBJECTS,
of source 'src' || (1 + o % 3), external id 'pi_' || left(md5(o), 24); the
first N are packed, the next TAIL in job_history, then PENDING pending and
DEAD dead ones in the queue.  Each shape runs for LOOKUPS random objects that
exist and LOOKUPS / 10 that do not, shuffled, the same objects for each shape
(the first one shown apart: it reads each object's pages into shared
buffers); latencies are the client's (parse, plan, execute, the round trip),
in ms.  A wrong answer stops the run.
"""
import hashlib
import random
import statistics
import sys
import time

import psycopg2

n, objects, tail, pending, dead, lookups = (int(a) for a in sys.argv[1:7])
total = n + tail + pending + dead
random.seed(28)


def ext(o):
    return 'pi_' + hashlib.md5(str(o).encode()).hexdigest()[:24]


def source(o):
    return 'src%d' % (1 + o % 3)


def jobs_of(o):
    """The ids and states of object o's jobs, oldest first."""
    out = []
    for i in range(o, total + 1, objects):
        out.append((i, 'done' if i <= n + tail else 'pending' if i <= n + tail + pending else 'dead'))
    return out


conn = psycopg2.connect('')
conn.autocommit = True
cur = conn.cursor()
cur.execute("SET application_name = 'bench/history'")

targets = [(source(o), ext(o), jobs_of(o)) for o in random.sample(range(1, objects + 1), lookups)]
targets += [(source(k), 'pi_' + hashlib.md5(('missing-%d' % k).encode()).hexdigest()[:24], [])
            for k in range(lookups // 10)]
random.shuffle(targets)

COLUMNS = ('id', 'source', 'external_id', 'state', 'payload', 'events', 'refetch', 'attempts', 'last_error',
           'last_status', 'created_at', 'updated_at', 'next_attempt_at', 'lease_until', 'worker_pid',
           'finished_at', 'started_at', 'done_lsn')
ORM_SELECT = ', '.join('"webhook_ingest"."jobs"."%s"' % c for c in COLUMNS)


def q(s):
    return "'" + s.replace("'", "''") + "'"


def all_jobs(src, eid):
    return "SELECT id, state FROM webhook_ingest.jobs WHERE source = %s AND external_id = %s" % (q(src), q(eid))


def last_job(src, eid):
    return all_jobs(src, eid) + " ORDER BY id DESC LIMIT 1"


def orm_last(src, eid):
    # what Django sends for Job.objects.filter(source=..., external_id=...).order_by('-id').first()
    return ('SELECT %s FROM "webhook_ingest"."jobs" WHERE ("webhook_ingest"."jobs"."external_id" = %s AND '
            '"webhook_ingest"."jobs"."source" = %s) ORDER BY "webhook_ingest"."jobs"."id" DESC LIMIT 1'
            % (ORM_SELECT, q(eid), q(src)))


def by_external_id(src, eid):
    return "SELECT id, state FROM webhook_ingest.jobs WHERE external_id = %s" % q(eid)


cur.execute("PREPARE all_jobs(text, text) AS SELECT id, state FROM webhook_ingest.jobs "
            "WHERE source = $1 AND external_id = $2")
cur.execute("PREPARE last_job(text, text) AS SELECT id, state FROM webhook_ingest.jobs "
            "WHERE source = $1 AND external_id = $2 ORDER BY id DESC LIMIT 1")


def prepared_all(src, eid):
    return "EXECUTE all_jobs(%s, %s)" % (q(src), q(eid))


def prepared_last(src, eid):
    return "EXECUTE last_job(%s, %s)" % (q(src), q(eid))


def history(src, eid):
    return "SELECT job_id, state FROM webhook_ingest.history(%s, %s)" % (q(src), q(eid))


def expect_all(rows, want):
    return sorted((r[0], r[1]) for r in rows) == want


def expect_last(rows, want):
    return [(r[0], r[COLUMNS.index('state')] if len(r) > 2 else r[1]) for r in rows] == want[-1:]


def expect_history(rows, want):
    return [(r[0], r[1]) for r in rows] == want


def select_one(src, eid):
    return "SELECT 1"


SHAPES = [
    # (the machine's floor: a statement that reads nothing, planned and sent the same way)
    ('noise floor: SELECT 1', select_one, lambda rows, want: rows == [(1,)]),
    # (each object's first read: its pages come from the OS's cache, not shared buffers; every later shape
    # reads the same objects again, as an application that looks an object up twice would)
    ('first read: source + external_id (psql)', all_jobs, expect_all),
    ('source + external_id (psql)', all_jobs, expect_all),
    ('... ORDER BY id DESC LIMIT 1 (psql)', last_job, expect_last),
    ('ORM: all columns, ORDER BY id DESC LIMIT 1', orm_last, expect_last),
    ('prepared: source + external_id', prepared_all, expect_all),
    ('prepared: ... ORDER BY id DESC LIMIT 1', prepared_last, expect_last),
    ('external_id only', by_external_id, expect_all),
    ('history(source, external_id)', history, expect_history),
]


def report(name, times, extra=''):
    times = sorted(times)
    p99 = times[min(len(times) - 1, int(round(0.99 * len(times))) - 1)]
    print('%-46s %5d  p50 %7.2f  p99 %7.2f  max %7.2f ms%s' % (name, len(times), statistics.median(times), p99,
                                                              times[-1], extra))
    return statistics.median(times), p99


cur.execute("SELECT to_regprocedure('webhook_ingest.history(text, text)') IS NOT NULL")
if not cur.fetchone()[0]:
    SHAPES = [s for s in SHAPES if s[1] is not history]     # (before 0.10.0)
summary = []
print('%-46s %5s' % ('shape', 'runs'))
for name, make, check in SHAPES:
    # (the prepared statements reach their generic plan after five runs: warm every shape up alike)
    for src, eid, want in targets[:10]:
        cur.execute(make(src, eid))
        cur.fetchall()
    times = []
    for src, eid, want in targets:
        sql = make(src, eid)
        t = time.perf_counter()
        cur.execute(sql)
        rows = cur.fetchall()
        times.append((time.perf_counter() - t) * 1000)
        if not check(rows, want):
            sys.exit('wrong answer from %s: %r, want %r' % (sql, rows, want))
    summary.append((name, report(name, times)))

# Time windows: the last 10 seconds (a few jobs, or none once the tail is older), one minute at a random
# point of the 7 days (about N / 10 080 jobs), an hour before the history began and one in the future (none).
cur.execute("SELECT min(finished_at), max(finished_at) FROM webhook_ingest.job_history_packed")
first, last = cur.fetchone()
windows = [
    ('finished_at > now() - 10 s', lambda k: "finished_at > now() - interval '10 seconds'"),
    ('finished_at BETWEEN (1 minute, at random)',
     lambda k: "finished_at BETWEEN %s::timestamptz + %d * interval '1 second' AND %s::timestamptz + %d * interval '1 second'"
     % (q(first.isoformat()), k, q(first.isoformat()), k + 60)),
    ('finished_at BETWEEN (empty: before the history)',
     lambda k: "finished_at BETWEEN %s::timestamptz - interval '1 hour' AND %s::timestamptz - interval '1 second'"
     % (q(first.isoformat()), q(first.isoformat()))),
    ('finished_at BETWEEN (empty: in the future)',
     lambda k: "finished_at BETWEEN now() + interval '1 hour' AND now() + interval '2 hours'"),
]
span = int((last - first).total_seconds()) - 60
for name, where in windows:
    times = []
    counted = []
    for run in range(lookups // 5):
        w = where(random.randrange(span))
        t = time.perf_counter()
        cur.execute("SELECT count(*) FROM webhook_ingest.jobs WHERE " + w)
        counted.append(cur.fetchone()[0])
        times.append((time.perf_counter() - t) * 1000)
        if run < 3:
            # the same count from the tables themselves, every packed job unpacked (in one statement: one now())
            cur.execute("SELECT (SELECT count(*) FROM webhook_ingest.jobs WHERE %s),"
                        " (SELECT count(*) FROM webhook_ingest.job_history_packed p, unnest(p.finished) f WHERE %s)"
                        " + (SELECT count(*) FROM webhook_ingest.job_history h WHERE %s)"
                        " + (SELECT count(*) FROM webhook_ingest.queue q WHERE %s)"
                        % (w, w.replace('finished_at', 'f'), w.replace('finished_at', 'h.finished_at'),
                           w.replace('finished_at', 'q.finished_at')))
            got, truth = cur.fetchone()
            if got != truth:
                sys.exit('wrong count for %s: %d, want %d' % (w, got, truth))
    summary.append((name, report(name, times, '  (jobs in the window: median %d, max %d)'
                                 % (statistics.median(counted), max(counted)))))

print('history %d: %s' % (n, '; '.join('%s p50 %.2f p99 %.2f' % (name, p50, p99) for name, (p50, p99) in summary)))
