/*
 * sched_apply.c
 *		Who gets the apply workers' time: the fetcher keeps each source's
 *		fetched results waiting for an apply worker (ready), and when one is
 *		free it picks the next batch.
 *
 *		Time, not jobs, is shared: each source has a virtual time, the apply
 *		time its batches took per unit of weight, and the source with the
 *		lowest virtual time among those with ready results goes next (a
 *		source that comes back after a pause starts at the clock's present:
 *		no credit for idleness).  A batch is charged at hand-over with what
 *		its jobs are expected to take and corrected by what they took.  So a
 *		source whose handlers take 1.9 s gets one batch while a source whose
 *		handlers take 1 ms gets a second of others.
 *
 *		A source whose jobs are known to be quick (the latest took less than
 *		WI_FAST_US each, none more than WI_FAST_PEAK_US) has batches of up
 *		to WI_APPLY_MAX_BATCH jobs, filled up with other quick sources'
 *		results.  A source known to be slow has batches of its own sized to
 *		about WI_BATCH_BUDGET_US; the slow sources together hold at most all
 *		apply workers but one, unless no quick source's result is waiting
 *		(then a quick one waits at most for one slow batch).  A heavy source
 *		(a job took WI_HEAVY_PEAK_US or more lately: a handler that sleeps for
 *		seconds, or ignores its cancel) is never given the last apply worker.
 *		A source not measured yet has one job at a time in an apply worker,
 *		in a batch of its own, until its first result says which it is.  So
 *		a handler that sleeps or ignores its cancel delays no other source's
 *		job in its batch, and can hold the last apply worker only once,
 *		before it is known.  A source whose
 *		ready results would take more than WI_READY_HORIZON_US of apply time
 *		gets no new fetch (scheduler.c asks wi_sched_apply_backlogged).
 *
 * IDENTIFICATION
 *		src/worker/sched_apply.c
 */
#include "postgres.h"

#include <math.h>

#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "webhook_ingest.h"
#include "apply_queue.h"
#include "http.h"
#include "sched_apply.h"
#include "scheduler.h"
#include "scheduler_internal.h"
#include "settings.h"

#define WI_FAST_US				5000.0	/* 5 ms a job */
#define WI_FAST_PEAK_US			(WI_APPLY_LEASH_MS * 1000.0)	/* 100 ms: past it, a quick batch's leash */
#define WI_HEAVY_PEAK_US		1000000.0	/* 1 s */
#define WI_MIN_COST_US			20.0	/* what the cheapest completion costs */
#define WI_BATCH_BUDGET_US		200000.0	/* what a batch of a slow source is sized to */
#define WI_BATCH_BYTES_MIN		((Size) 8 * 1024 * 1024)	/* the bodies a batch may carry, at least */
#define WI_READY_HORIZON_US		2000000.0	/* apply time a source may have waiting */
#define WI_EWMA_WEIGHT			0.2
#define WI_PEAK_DECAY			0.95

/* The virtual clock: the virtual time of the source picked last. */
static double apply_clock = 0;

static SourceSched *
entry_for(const char *name)
{
	bool		found;
	SourceSched *s = (SourceSched *) hash_search(wi_sched_sources, name, HASH_ENTER, &found);

	if (!found)
	{
		memset((char *) s + WI_SOURCE_NAME_LEN, 0, sizeof(SourceSched) - WI_SOURCE_NAME_LEN);
		s->weight = 1;
		s->stopped_at = DT_NOBEGIN;
	}
	return s;
}

typedef enum ApplyClass
{
	APPLY_FAST,					/* known to be quick */
	APPLY_SLOW,					/* known to be slow */
	APPLY_HEAVY,				/* known to take a second or more a job */
	APPLY_UNKNOWN				/* not measured yet */
} ApplyClass;

static ApplyClass
class_of(const SourceSched *s)
{
	if (s->apply_samples == 0)
		return APPLY_UNKNOWN;
	if (s->apply_peak_us >= WI_HEAVY_PEAK_US)
		return APPLY_HEAVY;
	return (s->apply_ewma_us < WI_FAST_US && s->apply_peak_us < WI_FAST_PEAK_US) ? APPLY_FAST : APPLY_SLOW;
}

static double
job_cost_us(const SourceSched *s)
{
	return Max(s->apply_ewma_us, WI_MIN_COST_US);
}

/* Would the source's ready results keep the apply workers busy too long?  Then it fetches no more. */
bool
wi_sched_apply_backlogged(const SourceSched *s)
{
	return s->nready > 0 && s->nready * job_cost_us(s) > WI_READY_HORIZON_US;
}

/* A fetched result waits for an apply worker; front: ahead of the others (handed back). */
void
wi_sched_ready(Transfer *t, bool front)
{
	SourceSched *s = entry_for(t->source);
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	if (s->ready == NIL)
		s->apply_vtime = Max(s->apply_vtime, apply_clock);
	s->ready = front ? lcons(t, s->ready) : lappend(s->ready, t);
	s->nready++;
	MemoryContextSwitchTo(old);
	wi_sched_state_changed();
}

/* The first of s's ready results, charged to s, into an apply worker's hands. */
static Transfer *
hand(SourceSched *s)
{
	Transfer   *t = (Transfer *) linitial(s->ready);

	t->charged_us = job_cost_us(s);
	s->apply_vtime += t->charged_us / s->weight;
	s->ready = list_delete_first(s->ready);
	s->nready--;
	s->in_applier++;
	return t;
}

/* The body a result carries to its apply worker. */
static Size
body_bytes(const Transfer *t)
{
	return t->body ? t->body_len : 0;
}

/* The bodies a batch carries. */
static Size
batch_bytes(List *batch)
{
	ListCell   *lc;
	Size		bytes = 0;

	foreach(lc, batch)
		bytes += body_bytes((Transfer *) lfirst(lc));
	return bytes;
}

/*
 * Take up to max of s's ready results, stopping before one that must go
 * alone, or that would make the batch's bodies larger than
 * WI_BATCH_BYTES_MIN or an apply worker's queue if that is larger (a batch
 * holds one result at least): an apply worker completes what its budget
 * allows and hands the rest back, which would then cross the queue again and
 * again, and it keeps a buffer the size of the largest message it received.
 */
static List *
take(SourceSched *s, List *batch, int max, WiAloneTest alone)
{
	Size		bytes = batch_bytes(batch);
	Size		most = Max((Size) wi_apply_queue_size_kb * 1024, WI_BATCH_BYTES_MIN);

	while (s->ready != NIL && list_length(batch) < max)
	{
		Transfer   *t = (Transfer *) linitial(s->ready);

		if (alone(t) || (batch != NIL && bytes + body_bytes(t) > most))
			break;
		bytes += body_bytes(t);
		batch = lappend(batch, hand(s));
	}
	return batch;
}

/*
 * May s have a batch now?  A heavy one if reserve_free (the apply worker
 * kept for the others is not needed), a slow one then too or when no quick
 * result waits, one not measured yet if none of its jobs is in hand.
 */
static bool
eligible(const SourceSched *s, bool reserve_free, bool quick_waiting)
{
	/* Its next came back past a leash: how long it takes is not known, as a heavy source's. */
	if (s->ready != NIL && ((Transfer *) linitial(s->ready))->too_slow)
		return reserve_free;
	switch (class_of(s))
	{
		case APPLY_FAST:
			return true;
		case APPLY_SLOW:
			return reserve_free || !quick_waiting;
		case APPLY_HEAVY:
			return reserve_free;
		case APPLY_UNKNOWN:
			return s->in_applier == 0;
	}
	return false;
}

/* Does a quick source (or one not measured yet that may go) have a result waiting? */
static bool
quick_result_waiting(void)
{
	HASH_SEQ_STATUS seq;
	SourceSched *s;
	bool		found = false;

	hash_seq_init(&seq, wi_sched_sources);
	while ((s = hash_seq_search(&seq)) != NULL)
	{
		if (s->ready != NIL && (class_of(s) == APPLY_FAST || (class_of(s) == APPLY_UNKNOWN && s->in_applier == 0)))
		{
			found = true;
			hash_seq_term(&seq);
			break;
		}
	}
	return found;
}

/* The eligible source with ready results and the lowest virtual time; only quick ones if fast_only. */
static SourceSched *
next_source(bool reserve_free, const SourceSched *not_this, bool fast_only)
{
	HASH_SEQ_STATUS seq;
	SourceSched *s;
	SourceSched *best = NULL;
	bool		quick_waiting = reserve_free || fast_only || quick_result_waiting();

	hash_seq_init(&seq, wi_sched_sources);
	while ((s = hash_seq_search(&seq)) != NULL)
	{
		if (s->ready == NIL || s == not_this || !eligible(s, reserve_free, quick_waiting) ||
			(fast_only && class_of(s) != APPLY_FAST))
			continue;
		if (best == NULL || s->apply_vtime < best->apply_vtime)
			best = s;
	}
	return best;
}

/*
 * The next batch for an apply worker, or NIL: at most max results.
 * reserve_free: the apply workers busy with slow or heavy sources leave one
 * for the others even if this batch is such a source's too (*restricted
 * says whether it is).  A result for which alone() is true goes in a batch
 * of its own.
 */
static List *next_batch(SourceSched *s, int max, WiAloneTest alone, bool *restricted);

List *
wi_sched_next_batch(int max, bool reserve_free, WiAloneTest alone, bool *restricted)
{
	SourceSched *s = next_source(reserve_free, NULL, false);
	MemoryContext old;
	List	   *batch;

	*restricted = false;
	if (s == NULL)
		return NIL;
	/* The batch's list lives as long as the batch is handed over (not the fetcher's pass). */
	old = MemoryContextSwitchTo(TopMemoryContext);
	batch = next_batch(s, max, alone, restricted);
	MemoryContextSwitchTo(old);
	return batch;
}

static List *
next_batch(SourceSched *s, int max, WiAloneTest alone, bool *restricted)
{
	List	   *batch;
	Transfer   *first;

	apply_clock = Max(apply_clock, s->apply_vtime);
	first = (Transfer *) linitial(s->ready);
	*restricted = class_of(s) == APPLY_SLOW || class_of(s) == APPLY_HEAVY || first->too_slow;
	if (alone(first) || class_of(s) == APPLY_UNKNOWN)
		return list_make1(hand(s));
	if (*restricted)
		return take(s, NIL, (int) Max(1.0, Min((double) max, floor(WI_BATCH_BUDGET_US / job_cost_us(s)))), alone);
	batch = take(s, NIL, max, alone);
	/* Room left: the other quick sources' results, by virtual time. */
	while (list_length(batch) < max)
	{
		SourceSched *other = next_source(false, s, true);
		int			before = list_length(batch);

		if (other == NULL)
			break;
		batch = take(other, batch, max, alone);
		if (list_length(batch) == before)
			break;				/* its next must go alone */
	}
	return batch;
}

/*
 * A result's completion took handler_us in an apply worker (its batch's
 * share, or the time until its apply worker was ended): the charge is
 * corrected and the source's figures updated.
 */
void
wi_sched_applied(Transfer *t, int64 handler_us)
{
	SourceSched *s = wi_sched_lookup(t->source);
	double		us = (double) handler_us;

	if (s == NULL)
		return;
	s->apply_vtime += (us - t->charged_us) / s->weight;
	t->charged_us = us;
	s->apply_ewma_us = s->apply_samples == 0 ? us :
		(1 - WI_EWMA_WEIGHT) * s->apply_ewma_us + WI_EWMA_WEIGHT * us;
	s->apply_peak_us = Max(s->apply_peak_us * WI_PEAK_DECAY, us);
	s->apply_samples++;
	wi_sched_state_changed();
}

/* Is t's source known to be quick (its batches leashed: apply_queue.h), t not come back too slow? */
bool
wi_sched_quick(const Transfer *t)
{
	SourceSched *s = wi_sched_lookup(t->source);

	return s != NULL && class_of(s) == APPLY_FAST && !t->too_slow;
}

/* A result is out of its apply worker's hands (its batch is over, or the apply worker gone). */
void
wi_sched_left_applier(Transfer *t)
{
	SourceSched *s = wi_sched_lookup(t->source);

	if (s != NULL)
		s->in_applier = Max(s->in_applier - 1, 0);
}

/* Results of source whose rows another session held: delta more (or fewer) wait for a lock. */
void
wi_sched_locked(const char *source, int delta)
{
	SourceSched *s = wi_sched_lookup(source);

	if (s != NULL)
		s->locked = Max(s->locked + delta, 0);
}
