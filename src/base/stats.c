/*
 * stats.c
 *		What the worker has finished lately, kept in a fixed-size piece of
 *		shared memory: per source, a ring of one-minute slots with counts
 *		(done, retried, dead) and two latency histograms (enqueue to done,
 *		fetch duration), and a ring of the latest failed attempts.  The
 *		worker writes after each completion batch commits; the views
 *		queue_stats, latency and recent_failures read, never a table.
 *
 *		Each database has a region of its own: webhook_ingest.stats_sources
 *		source slots, the last of them its catch-all for the sources past
 *		the others, and a ring of webhook_ingest.stats_failures failures;
 *		its views read that region alone.  There are as many regions as
 *		worker slots (webhook_ingest.max_databases): a database whose worker
 *		holds a slot keeps its region, and takes a free one, or one whose
 *		database has no slot any more, when it has none.  So no database's
 *		traffic takes room from another's (audit 0.10.0 third pass, item 4:
 *		0.9.0's 64 slots and 128 failures were the cluster's, first come,
 *		first served, and one catch-all showed every database's traffic).
 *
 *		Histogram buckets are a quarter of an octave wide, from 1 us up to
 *		2^32 us (71 minutes; longer lands in the last bucket), so a
 *		percentile is good to about 9 %.  The numbers start over when the
 *		server restarts.
 *
 * IDENTIFICATION
 *		src/base/stats.c
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "webhook_ingest.h"
#include "compat.h"
#include "settings.h"
#include "shmem.h"
#include "stats.h"

#define COUNT_MINUTES		60
#define HIST_MINUTES		15
#define HIST_BUCKETS		128
#define OTHER_SOURCES		"(other sources)"

/* Sources tracked per database (the last slot takes the rest), failures kept per database. */
static int	stat_sources = 32;
static int	stat_failures = 128;

typedef struct MinuteCounts
{
	int64		minute;			/* minutes since the epoch; 0: unused */
	uint32		done;
	uint32		retried;
	uint32		dead;
} MinuteCounts;

typedef struct MinuteHistogram
{
	int64		minute;
	uint32		done_us[HIST_BUCKETS];	/* enqueue (first webhook) to done */
	uint32		fetch_us[HIST_BUCKETS]; /* HTTP transfer */
} MinuteHistogram;

typedef struct SourceStats
{
	char		name[WI_SOURCE_NAME_LEN];	/* "": free */
	int64		last_minute;
	MinuteCounts counts[COUNT_MINUTES];
	MinuteHistogram hist[HIST_MINUTES];
} SourceStats;

typedef struct Failure
{
	TimestampTz at;				/* 0: unused */
	int64		job_id;
	char		source[WI_SOURCE_NAME_LEN];
	char		external_id[128];
	int			attempt;
	int			http_status;	/* 0: none */
	char		error[256];
	double		fetch_ms;
	bool		dead;
} Failure;

/* One database's: followed by its stat_sources SourceStats, then its stat_failures Failures. */
typedef struct StatsRegion
{
	Oid			database;		/* InvalidOid: free */
	uint64		failures_written;
} StatsRegion;

typedef struct WiStats
{
	LWLock	   *lock;
	int			nregions;
	char		regions[FLEXIBLE_ARRAY_MEMBER]; /* nregions of region_size() */
} WiStats;

PG_FUNCTION_INFO_V1(webhook_ingest_recent_counts);
PG_FUNCTION_INFO_V1(webhook_ingest_latency);
PG_FUNCTION_INFO_V1(webhook_ingest_recent_failures);

static WiStats *stats = NULL;

void
wi_stats_define_gucs(void)
{
	DefineCustomIntVariable("webhook_ingest.stats_sources",
							"Sources whose statistics each database keeps apart, its catch-all included.",
							"Sources past them count together as \"(other sources)\" of that database. "
							"About 17 kB of shared memory each, for each of webhook_ingest.max_databases.",
							&stat_sources,
							32, 2, 10000,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_ingest.stats_failures",
							"Failed attempts each database's recent_failures keeps.",
							"About 0.5 kB of shared memory each, for each of webhook_ingest.max_databases.",
							&stat_failures,
							128, 1, 100000,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
}

static Size
region_size(void)
{
	return add_size(MAXALIGN(sizeof(StatsRegion)),
					add_size(mul_size(sizeof(SourceStats), stat_sources), mul_size(sizeof(Failure), stat_failures)));
}

static Size
stats_shmem_size(void)
{
	return MAXALIGN(add_size(offsetof(WiStats, regions), mul_size(region_size(), wi_max_databases)));
}

void
wi_stats_shmem_request(void)
{
	RequestAddinShmemSpace(stats_shmem_size());
	RequestNamedLWLockTranche("webhook_ingest stats", 1);
}

/* With AddinShmemInitLock held. */
void
wi_stats_shmem_startup(void)
{
	bool		found;

	stats = ShmemInitStruct("webhook_ingest stats", stats_shmem_size(), &found);
	if (!found)
	{
		memset(stats, 0, stats_shmem_size());
		stats->lock = &(GetNamedLWLockTranche("webhook_ingest stats"))->lock;
		stats->nregions = wi_max_databases;
	}
}

static StatsRegion *
region_at(int i)
{
	return (StatsRegion *) (stats->regions + region_size() * i);
}

static SourceStats *
region_sources(StatsRegion *r)
{
	return (SourceStats *) ((char *) r + MAXALIGN(sizeof(StatsRegion)));
}

static Failure *
region_failures(StatsRegion *r)
{
	return (Failure *) (region_sources(r) + stat_sources);
}

/* This database's region, or NULL; with the lock held. */
static StatsRegion *
this_region(void)
{
	for (int i = 0; i < stats->nregions; i++)
		if (region_at(i)->database == MyDatabaseId)
			return region_at(i);
	return NULL;
}

/*
 * This database's region, taking a free one or one whose database holds no
 * worker slot (as many regions as slots: one of them is free or stale while
 * this database holds a slot); NULL when it holds none.  With the lock held
 * exclusively.
 */
static StatsRegion *
claim_region(void)
{
	StatsRegion *r = this_region();

	for (int i = 0; r == NULL && i < stats->nregions; i++)
	{
		StatsRegion *c = region_at(i);
		bool		stale;

		SpinLockAcquire(&wi_shared->mutex);
		stale = !OidIsValid(c->database) || wi_slot_of(c->database) == NULL;
		SpinLockRelease(&wi_shared->mutex);
		if (stale)
		{
			memset(c, 0, region_size());
			c->database = MyDatabaseId;
			r = c;
		}
	}
	return r;
}

/* Copy at most size - 1 bytes, never cutting a character in two. */
static void
clip_copy(char *dst, const char *src, int size)
{
	int			len = pg_mbcliplen(src, strlen(src), size - 1);

	memcpy(dst, src, len);
	dst[len] = '\0';
}

static int64
minute_of(TimestampTz t)
{
	return t / USECS_PER_MINUTE + 1;	/* never 0 */
}

static int
bucket_of(double us)
{
	int			b;

	if (us < 1.0)
		return 0;
	b = (int) floor(4.0 * log2(us));
	return Min(Max(b, 0), HIST_BUCKETS - 1);
}

/* The slot of a source in a region, taking a free or stale one; with the lock held. */
static SourceStats *
source_slot(StatsRegion *r, const char *source, int64 minute)
{
	SourceStats *sources = region_sources(r);
	SourceStats *free_slot = NULL;

	for (int i = 0; i < stat_sources - 1; i++)
	{
		SourceStats *s = &sources[i];

		if (s->name[0] != '\0' && strncmp(s->name, source, WI_SOURCE_NAME_LEN - 1) == 0)
			return s;
		if (free_slot == NULL && (s->name[0] == '\0' || s->last_minute <= minute - COUNT_MINUTES))
			free_slot = s;
	}
	if (free_slot == NULL)
	{
		free_slot = &sources[stat_sources - 1];
		if (strcmp(free_slot->name, OTHER_SOURCES) == 0)
			return free_slot;
		source = OTHER_SOURCES;
	}
	memset(free_slot, 0, sizeof(SourceStats));
	clip_copy(free_slot->name, source, WI_SOURCE_NAME_LEN);
	return free_slot;
}

static MinuteCounts *
counts_now(SourceStats *s, int64 minute)
{
	MinuteCounts *c = &s->counts[minute % COUNT_MINUTES];

	if (c->minute != minute)
	{
		memset(c, 0, sizeof(MinuteCounts));
		c->minute = minute;
	}
	s->last_minute = minute;
	return c;
}

static MinuteHistogram *
histogram_now(SourceStats *s, int64 minute)
{
	MinuteHistogram *h = &s->hist[minute % HIST_MINUTES];

	if (h->minute != minute)
	{
		memset(h, 0, sizeof(MinuteHistogram));
		h->minute = minute;
	}
	return h;
}

/* The worker records one batch's outcomes between begin and end, in its database's region. */
static StatsRegion *batch_region = NULL;

void
wi_stats_begin(void)
{
	LWLockAcquire(stats->lock, LW_EXCLUSIVE);
	batch_region = claim_region();
}

void
wi_stats_end(void)
{
	LWLockRelease(stats->lock);
}

void
wi_stats_done(const char *source, TimestampTz now, double done_us, double fetch_us)
{
	int64		minute = minute_of(now);
	SourceStats *s;
	MinuteHistogram *h;

	if (batch_region == NULL)
		return;
	s = source_slot(batch_region, source, minute);
	counts_now(s, minute)->done++;
	h = histogram_now(s, minute);
	h->done_us[bucket_of(done_us)]++;
	h->fetch_us[bucket_of(fetch_us)]++;
}

void
wi_stats_failed(const char *source, TimestampTz now, int64 job_id, const char *external_id,
				int attempt, int http_status, const char *error, double fetch_ms, bool dead)
{
	int64		minute = minute_of(now);
	MinuteCounts *c;
	Failure    *f;

	if (batch_region == NULL)
		return;
	c = counts_now(source_slot(batch_region, source, minute), minute);
	f = &region_failures(batch_region)[batch_region->failures_written++ % stat_failures];
	if (dead)
		c->dead++;
	else
		c->retried++;
	f->at = now;
	f->job_id = job_id;
	clip_copy(f->source, source, sizeof(f->source));
	clip_copy(f->external_id, external_id, sizeof(f->external_id));
	f->attempt = attempt;
	f->http_status = http_status;
	clip_copy(f->error, error, sizeof(f->error));
	f->fetch_ms = fetch_ms;
	f->dead = dead;
}

static int
minutes_arg(FunctionCallInfo fcinfo, int most)
{
	int			minutes = PG_GETARG_INT32(0);

	if (minutes < 1 || minutes > most)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("minutes must be between 1 and %d", most)));
	return minutes;
}

/*
 * _recent_counts(minutes): per source, done, retried and dead over the
 * last so many minutes (the current one included).
 */
Datum
webhook_ingest_recent_counts(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			minutes = minutes_arg(fcinfo, COUNT_MINUTES);
	int64		now = minute_of(GetCurrentTimestamp());

	StatsRegion *r;

	wi_init_srf(fcinfo);
	LWLockAcquire(stats->lock, LW_SHARED);
	r = this_region();
	for (int i = 0; r != NULL && i < stat_sources; i++)
	{
		SourceStats *s = &region_sources(r)[i];
		int64		sums[3] = {0, 0, 0};
		Datum		values[4];
		bool		nulls[4] = {0};

		if (s->name[0] == '\0')
			continue;
		for (int m = 0; m < COUNT_MINUTES; m++)
		{
			MinuteCounts *c = &s->counts[m];

			if (c->minute > now - minutes && c->minute <= now)
			{
				sums[0] += c->done;
				sums[1] += c->retried;
				sums[2] += c->dead;
			}
		}
		values[0] = CStringGetTextDatum(s->name);
		values[1] = Int64GetDatum(sums[0]);
		values[2] = Int64GetDatum(sums[1]);
		values[3] = Int64GetDatum(sums[2]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	LWLockRelease(stats->lock);
	return (Datum) 0;
}

/*
 * The value below which a fraction p of the histogram lies, in ms:
 * interpolated geometrically inside the bucket that holds it.
 */
/* Milliseconds as the views show them: to 0.1 ms. */
static double
tenths(double ms)
{
	return round(ms * 10.0) / 10.0;
}

static double
percentile_ms(const uint64 *hist, uint64 total, double p)
{
	double		rank = p * (double) total;
	uint64		below = 0;

	for (int b = 0; b < HIST_BUCKETS; b++)
	{
		if (hist[b] > 0 && (double) (below + hist[b]) >= rank)
		{
			double		lo = (b == 0) ? 0.0 : pow(2.0, b / 4.0);
			double		hi = pow(2.0, (b + 1) / 4.0);
			double		frac = (rank - (double) below) / (double) hist[b];

			frac = Min(Max(frac, 0.0), 1.0);
			if (b == 0)
				return hi * frac / 1000.0;
			return lo * pow(hi / lo, frac) / 1000.0;
		}
		below += hist[b];
	}
	return pow(2.0, HIST_BUCKETS / 4.0) / 1000.0;
}

/*
 * _latency(minutes): per source with jobs done in the last so many minutes,
 * p50/p95/p99 of enqueue-to-done and of the fetch.
 */
Datum
webhook_ingest_latency(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			minutes = minutes_arg(fcinfo, HIST_MINUTES);
	int64		now = minute_of(GetCurrentTimestamp());
	uint64	   *done_us = palloc(sizeof(uint64) * HIST_BUCKETS);
	uint64	   *fetch_us = palloc(sizeof(uint64) * HIST_BUCKETS);

	wi_init_srf(fcinfo);
	for (int i = 0; i < stat_sources; i++)
	{
		StatsRegion *r;
		SourceStats *s;
		char		name[WI_SOURCE_NAME_LEN] = "";
		uint64		total = 0;
		Datum		values[8];
		bool		nulls[8] = {0};
		static const double p[3] = {0.50, 0.95, 0.99};

		memset(done_us, 0, sizeof(uint64) * HIST_BUCKETS);
		memset(fetch_us, 0, sizeof(uint64) * HIST_BUCKETS);
		LWLockAcquire(stats->lock, LW_SHARED);
		r = this_region();
		s = r ? &region_sources(r)[i] : NULL;
		if (s)
			strlcpy(name, s->name, sizeof(name));
		for (int m = 0; name[0] != '\0' && m < HIST_MINUTES; m++)
		{
			MinuteHistogram *h = &s->hist[m];

			if (h->minute > now - minutes && h->minute <= now)
				for (int b = 0; b < HIST_BUCKETS; b++)
				{
					done_us[b] += h->done_us[b];
					fetch_us[b] += h->fetch_us[b];
					total += h->done_us[b];
				}
		}
		LWLockRelease(stats->lock);
		if (total == 0)
			continue;

		values[0] = CStringGetTextDatum(name);
		values[1] = Int64GetDatum((int64) total);
		for (int k = 0; k < 3; k++)
		{
			values[2 + k] = Float8GetDatum(tenths(percentile_ms(done_us, total, p[k])));
			values[5 + k] = Float8GetDatum(tenths(percentile_ms(fetch_us, total, p[k])));
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * _recent_failures(): the ring of the latest failed attempts.
 */
Datum
webhook_ingest_recent_failures(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Failure    *copy = palloc0(sizeof(Failure) * stat_failures);
	StatsRegion *r;

	wi_init_srf(fcinfo);
	LWLockAcquire(stats->lock, LW_SHARED);
	r = this_region();
	if (r != NULL)
		memcpy(copy, region_failures(r), sizeof(Failure) * stat_failures);
	LWLockRelease(stats->lock);

	for (int i = 0; i < stat_failures; i++)
	{
		Failure    *f = &copy[i];
		Datum		values[9];
		bool		nulls[9] = {0};

		if (f->at == 0)
			continue;
		values[0] = TimestampTzGetDatum(f->at);
		values[1] = Int64GetDatum(f->job_id);
		nulls[1] = f->job_id == 0;	/* a reconciliation page, no job (reconcile.c) */
		values[2] = CStringGetTextDatum(f->source);
		values[3] = CStringGetTextDatum(f->external_id);
		values[4] = Int32GetDatum(f->attempt);
		values[5] = Int32GetDatum(f->http_status);
		nulls[5] = f->http_status == 0;
		values[6] = CStringGetTextDatum(f->error);
		values[7] = Float8GetDatum(tenths(f->fetch_ms));
		values[8] = CStringGetTextDatum(f->dead ? "dead" : "retry");
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
