/*
 * scheduler.c
 *		Who gets the fetcher's free fetch slots.  The worker keeps, per source,
 *		what limits it: fetches in flight (against max_in_flight), a token
 *		bucket (rate_limit requests per second, rate_burst deep), a throttle
 *		the upstream asked for (until when, and what said so).  When a
 *		throttle runs out the source sends one fetch, and has its full share
 *		again only once a response does not throttle it (an upstream still
 *		throttling gets one request per throttle, not one per due job).
 *
 *		A claim (job_store.c) first probes which of the sources that may
 *		fetch now (not paused, not throttled, under max_in_flight, with a
 *		token) have due jobs, then runs in passes.  Each pass shares the free
 *		slots among those so that the fetches in flight end up max-min fair
 *		by weight: free slots go to the sources with the fewest in flight per
 *		unit of weight, levelled by water-filling.  So a source with one due
 *		job gets a slot in the very next claim however large another's
 *		backlog, two backlogged sources of weights 3 and 1 hold slots 3 : 1,
 *		and a source whose upstream answers fast is not slowed to the pace of
 *		a slow one's (it needs fewer slots for its share).  No history is
 *		kept, so no source builds up credit while it is idle or throttled.  The claim walks each source's due jobs
 *		in due order (jobs_due) up to its quota; a source that returns less
 *		than its quota has no more due work, and the next pass shares what
 *		is left among the others.
 *
 *		A job counts as in flight from its claim until its completion is over
 *		(fetching, or fetched and waiting for or in an apply worker), so a
 *		source whose results wait for apply workers gets fewer new fetches;
 *		one whose backlog of results would take its apply workers' time for
 *		long gets none (sched_apply.c, which also shares the apply workers'
 *		time among sources).
 *
 *		A source that reconciles (issue 30) gives its sweeps' list pages and
 *		the jobs no webhook announced (events 0) at most its share of its
 *		limits - of max_in_flight (at least one fetch) and of rate_limit (a
 *		bucket of its own) - on top of counting them against those limits:
 *		its claims walk the jobs a webhook announced first, then, with the
 *		slots left and within the share, the others; a page is claimed after
 *		the jobs, with what is left (reconcile_claim.c).
 *
 *		The state lives in the fetcher's memory (a hash in TopMemoryContext):
 *		a restarted fetcher starts with full buckets and no throttles.  Any
 *		change of a source's row (alter_source, resume_source) ends its
 *		throttle.  Nothing here touches SQL or shared memory; shmem.c
 *		publishes wi_sched_shown() for queue_stats.
 *
 * IDENTIFICATION
 *		src/worker/scheduler.c
 */
#include "postgres.h"

#include <limits.h>
#include <math.h>

#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "webhook_ingest.h"
#include "scheduler.h"
#include "scheduler_internal.h"

HTAB	   *wi_sched_sources = NULL;
static bool throttles_changed = false;	/* since wi_sched_shown last ran */

/*
 * wi_sched_wait_ms's answer, kept between the loop's passes (it asks twice a
 * pass) until something it depends on changes: every function here that
 * changes a source's state says so with wi_sched_state_changed().
 */
static TimestampTz soonest_wake = DT_NOEND;
static bool soonest_wake_known = false;

void
wi_sched_state_changed(void)
{
	soonest_wake_known = false;
}

void
wi_sched_init(void)
{
	HASHCTL		ctl;

	ctl.keysize = WI_SOURCE_NAME_LEN;
	ctl.entrysize = sizeof(SourceSched);
	ctl.hcxt = TopMemoryContext;
	wi_sched_sources = hash_create("webhook_ingest scheduler", 64, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
}

SourceSched *
wi_sched_lookup(const char *name)
{
	return (SourceSched *) hash_search(wi_sched_sources, name, HASH_FIND, NULL);
}

/* A claim begins: nothing claimed in it yet, no source drained. */
void
wi_sched_begin_claim(void)
{
	HASH_SEQ_STATUS seq;
	SourceSched *s;

	wi_sched_state_changed();
	hash_seq_init(&seq, wi_sched_sources);
	while ((s = hash_seq_search(&seq)) != NULL)
	{
		s->claiming = 0;
		s->claiming_reconciled = 0;
		s->probed = false;
		s->has_due = false;
		s->drained = false;
	}
}

/* The default bucket: a tenth of a second's worth, at least one request. */
static int
default_burst(double rate_limit)
{
	return (int) Max(1.0, ceil(rate_limit / 10.0));
}

/* A source's reconciliation share (0: it does not reconcile) and the bucket that goes with it. */
static void
refresh_share(SourceSched *s, double share)
{
	int			burst = share > 0 && s->rate_limit > 0 ? Max(1, (int) floor(share * s->burst)) : 0;

	if (burst != s->share_burst || share != s->share)
		s->share_tokens = burst;
	s->share = Max(share, 0);
	s->share_burst = burst;
	if (s->share_tokens_at == 0)
		s->share_tokens_at = GetCurrentTimestamp();
}

/* One row of sources, as the claim read it. */
void
wi_sched_refresh(const char *name, bool paused, int weight, double rate_limit, int rate_burst,
				 int max_in_flight, TimestampTz updated_at, double reconcile_share)
{
	bool		found;
	SourceSched *s;

	wi_sched_state_changed();
	if (strlen(name) >= WI_SOURCE_NAME_LEN)
		return;					/* cannot be: names are checked */
	s = (SourceSched *) hash_search(wi_sched_sources, name, HASH_ENTER, &found);
	if (!found)
	{
		memset((char *) s + WI_SOURCE_NAME_LEN, 0, sizeof(SourceSched) - WI_SOURCE_NAME_LEN);
		s->stopped_at = DT_NOBEGIN;
		s->tokens = -1;			/* full, below */
		s->tokens_at = GetCurrentTimestamp();
	}
	s->present = true;
	s->paused = paused;
	if (rate_limit > 0 && s->rate_limit <= 0)
		s->tokens = -1;			/* newly limited: a full bucket, below */
	s->weight = Max(weight, 1);
	s->rate_limit = rate_limit > 0 ? rate_limit : 0;
	s->burst = rate_limit > 0 ? (rate_burst > 0 ? rate_burst : default_burst(rate_limit)) : 0;
	s->max_in_flight = Max(max_in_flight, 0);
	if (s->tokens < 0 || s->tokens > s->burst)
		s->tokens = s->burst;
	refresh_share(s, reconcile_share);
	/* A change of the source's row ends a throttle that began before it, at full width. */
	if ((s->throttled_until != 0 || s->probing) && updated_at > s->throttled_at)
	{
		if (s->throttled_until != 0)
			throttles_changed = true;
		s->throttled_until = 0;
		s->probing = false;
	}
}

/* The sources are read anew: each row read is refreshed (wi_sched_refresh). */
void
wi_sched_begin_refresh(void)
{
	HASH_SEQ_STATUS seq;
	SourceSched *s;

	wi_sched_state_changed();
	hash_seq_init(&seq, wi_sched_sources);
	while ((s = hash_seq_search(&seq)) != NULL)
		s->present = false;
}

/*
 * After a read of sources: those no longer in the table, with nothing in
 * flight, are forgotten.
 */
void
wi_sched_forget_dropped(void)
{
	HASH_SEQ_STATUS seq;
	SourceSched *s;

	wi_sched_state_changed();
	hash_seq_init(&seq, wi_sched_sources);
	while ((s = hash_seq_search(&seq)) != NULL)
		if (!s->present && s->in_flight == 0)
			(void) hash_search(wi_sched_sources, s->name, HASH_REMOVE, NULL);
}

static void
refill_bucket(double *tokens, TimestampTz *at, double rate, int burst, TimestampTz now)
{
	if (rate <= 0 || now <= *at)
		return;
	*tokens = Min((double) burst, *tokens + rate * (double) (now - *at) / USECS_PER_SEC);
	*at = now;
}

static void
refill_tokens(SourceSched *s, TimestampTz now)
{
	refill_bucket(&s->tokens, &s->tokens_at, s->rate_limit, s->burst, now);
}

/*
 * When a bucket (tokens at tokens_at, refilled at rate a second) has a
 * token again; at most a day ahead (a rate_limit of 1e-14 per second would
 * put it past the end of time).
 */
static TimestampTz
next_token_at(double tokens, TimestampTz tokens_at, double rate)
{
	double		wait_us = ceil((1 - tokens + 1e-6) * USECS_PER_SEC / rate);

	return tokens_at + (TimestampTz) Min(wait_us, (double) USECS_PER_DAY);
}

/*
 * Of what allowance() gives the source, how many may be fetches for
 * reconciliation: its share of max_in_flight (at least one) and of
 * rate_limit; 0 for a source that does not reconcile.
 */
static int
share_room(SourceSched *s, TimestampTz now)
{
	int			n = INT_MAX;

	if (s->share <= 0)
		return 0;
	if (s->max_in_flight > 0)
		n = Max(0, Max(1, (int) floor(s->share * s->max_in_flight)) - s->reconciling - s->claiming_reconciled);
	if (s->rate_limit > 0)
	{
		refill_bucket(&s->share_tokens, &s->share_tokens_at, s->share * s->rate_limit, s->share_burst, now);
		n = Min(n, (int) Max(0.0, floor(s->share_tokens) - s->claiming_reconciled));
	}
	return n;
}

/* How many fetches the source may start now (due work or not). */
static int
allowance(SourceSched *s, TimestampTz now)
{
	int			n = INT_MAX;

	if (s->throttled_until != 0 && s->throttled_until <= now)
	{
		/* over: wi_sched_wait_ms no longer calls for a claim; one fetch tries the water */
		s->throttled_until = 0;
		s->probing = true;
	}
	if (!s->present || s->paused || s->drained || s->throttled_until != 0 || wi_sched_apply_backlogged(s))
		return 0;
	if (s->probing)
		n = Max(0, 1 - s->in_flight - s->claiming);
	else if (s->max_in_flight > 0)
		n = Max(0, s->max_in_flight - s->in_flight - s->claiming);
	if (s->rate_limit > 0)
	{
		refill_tokens(s, now);
		n = Min(n, (int) Max(0.0, floor(s->tokens) - s->claiming));
	}
	return n;
}

/* Slots source s gets at water level: min(allowance, floor((water - level) * weight)). */
static int
share_at(const SourceSched *s, double water)
{
	double		q = floor((water - s->level) * s->weight);

	return q <= 0 ? 0 : (int) Min((double) s->allowance, q);
}

/* Which source gets the next single slot: the lowest level after it; a newcomer wins a tie. */
static SourceSched *
next_in_line(SourceSched **eligible, int n)
{
	SourceSched *best = NULL;
	double		best_finish = 0;

	for (int i = 0; i < n; i++)
	{
		SourceSched *s = eligible[i];
		double		finish = s->level + (double) (s->quota + 1) / s->weight;

		if (s->quota >= s->allowance)
			continue;
		if (best == NULL || finish < best_finish ||
			(finish == best_finish && best->backlogged && !s->backlogged))
		{
			best = s;
			best_finish = finish;
		}
	}
	return best;
}

/*
 * Share capacity among eligible[0..n-1] (allowance set): the highest water
 * level whose shares fit, found by bisection, then single slots to those
 * next in line.
 */
static void
water_fill(SourceSched **eligible, int n, int capacity)
{
	double		lo = eligible[0]->level;
	double		hi = lo;
	int			given = 0;
	SourceSched *s;

	for (int i = 0; i < n; i++)
	{
		lo = Min(lo, eligible[i]->level);
		hi = Max(hi, eligible[i]->level + (double) capacity / eligible[i]->weight + 1);
	}
	for (int iter = 0; iter < 64; iter++)
	{
		double		mid = (lo + hi) / 2;
		int64		total = 0;

		for (int i = 0; i < n && total <= capacity; i++)
			total += share_at(eligible[i], mid);
		if (total <= capacity)
			lo = mid;
		else
			hi = mid;
	}
	for (int i = 0; i < n; i++)
		given += (eligible[i]->quota = share_at(eligible[i], lo));
	while (given < capacity && (s = next_in_line(eligible, n)) != NULL)
	{
		s->quota++;
		given++;
	}
}

/*
 * The sources that may fetch now, for the claim's probe of which have due
 * jobs: their names and where their walks start, into *names and *froms
 * (palloc'd); how many.
 */
int
wi_sched_candidates(TimestampTz now, const char ***names, TimestampTz **froms)
{
	HASH_SEQ_STATUS seq;
	SourceSched *s;
	long		size = Max(hash_get_num_entries(wi_sched_sources), 1);
	int			n = 0;

	*names = palloc(sizeof(char *) * size);
	*froms = palloc(sizeof(TimestampTz) * size);
	wi_sched_state_changed();			/* allowance() refills buckets and ends throttles */
	hash_seq_init(&seq, wi_sched_sources);
	while ((s = hash_seq_search(&seq)) != NULL)
	{
		if (allowance(s, now) <= 0)
			continue;
		s->probed = true;
		(*names)[n] = s->name;
		(*froms)[n] = wi_scan_start(s->stopped_at);
		n++;
	}
	return n;
}

/* The probe found due jobs of source. */
void
wi_sched_has_due(const char *source)
{
	SourceSched *s = wi_sched_lookup(source);

	if (s != NULL)
		s->has_due = true;
}

/*
 * The next pass of a claim: the sources that may fetch now and their
 * quotas, at most capacity in all, into *quotas (palloc'd); how many.
 */
int
wi_sched_plan(int capacity, TimestampTz now, WiQuota **quotas)
{
	HASH_SEQ_STATUS seq;
	SourceSched *s;
	SourceSched **eligible = palloc(sizeof(SourceSched *) * Max(hash_get_num_entries(wi_sched_sources), 1));
	int			n = 0;
	int			nquotas = 0;

	wi_sched_state_changed();
	hash_seq_init(&seq, wi_sched_sources);
	while ((s = hash_seq_search(&seq)) != NULL)
	{
		s->quota = 0;
		s->claimed = 0;
		s->claimed_reconciled = 0;
		s->last_due = DT_NOBEGIN;
		s->allowance = s->has_due ? allowance(s, now) : 0;
		s->level = (double) (s->in_flight + s->claiming) / s->weight;
		if (s->allowance > 0)
			eligible[n++] = s;
		else if (s->probed && !s->has_due)
		{
			/* nothing due up to now: the next walk starts here */
			s->stopped_at = now;
			s->backlogged = false;
		}
	}
	*quotas = palloc(sizeof(WiQuota) * Max(n, 1));
	if (n == 0 || capacity <= 0)
		return 0;
	water_fill(eligible, n, capacity);
	for (int i = 0; i < n; i++)
	{
		s = eligible[i];
		if (s->quota == 0)
			continue;
		/* a source that reconciles: webhooks' jobs first, then the others within its share */
		s->share_quota = s->share > 0 ? Min(s->quota, share_room(s, now)) : -1;
		(*quotas)[nquotas].source = s->name;
		(*quotas)[nquotas].quota = s->quota;
		(*quotas)[nquotas].from = wi_scan_start(s->stopped_at);
		(*quotas)[nquotas].reconciled = s->share_quota;
		nquotas++;
	}
	return nquotas;
}

/* The claim of this pass returned a job of source, due at next_attempt_at; reconciled: no webhook announced it. */
void
wi_sched_claimed(const char *source, TimestampTz next_attempt_at, bool reconciled)
{
	SourceSched *s = wi_sched_lookup(source);

	if (s == NULL)
		return;
	s->claimed++;
	s->claimed_reconciled += reconciled ? 1 : 0;
	s->last_due = Max(s->last_due, next_attempt_at);
}

/*
 * The pass's claim is done: a source that got less than its quota has no
 * more due work (its walk covered everything up to claim_start) - unless
 * its share held back the jobs no webhook announced: its walk starts where
 * it did; one that got its quota may have more, and its next walk resumes
 * where this one stopped.  Returns the jobs claimed in the pass.
 */
int
wi_sched_end_pass(TimestampTz claim_start)
{
	HASH_SEQ_STATUS seq;
	SourceSched *s;
	int			total = 0;

	wi_sched_state_changed();
	hash_seq_init(&seq, wi_sched_sources);
	while ((s = hash_seq_search(&seq)) != NULL)
	{
		if (s->quota == 0)
			continue;
		s->drained = s->claimed < s->quota;
		s->backlogged = !s->drained;
		s->share_held = s->drained && s->share_quota >= 0 && s->claimed_reconciled == s->share_quota;
		if (!s->share_held)
			s->stopped_at = s->drained ? claim_start : s->last_due;
		s->claiming += s->claimed;
		s->claiming_reconciled += s->claimed_reconciled;
		total += s->claimed;
		s->quota = 0;
	}
	return total;
}

/* A claimed job's (or page's) fetch starts (after the claim committed); reconciled: within the share. */
void
wi_sched_started(const char *source, bool reconciled)
{
	SourceSched *s = wi_sched_lookup(source);

	if (s == NULL)
		return;
	wi_sched_state_changed();
	s->in_flight++;
	if (s->rate_limit > 0)
		s->tokens -= 1;
	if (!reconciled)
		return;
	s->reconciling++;
	if (s->share_burst > 0)
		s->share_tokens -= 1;
}

/*
 * A fetch of source finished (or never started); answered: the upstream sent
 * a response; throttle_s > 0: it asked the whole source to hold off that long.
 * The job stays in flight until its completion is over (wi_sched_completed).
 */
void
wi_sched_finished(const char *source, bool answered, long throttle_s, const char *throttle_by)
{
	SourceSched *s = wi_sched_lookup(source);
	TimestampTz now;
	TimestampTz until;

	if (s == NULL)
		return;
	wi_sched_state_changed();
	if (throttle_s <= 0)
	{
		if (answered)
			s->probing = false; /* an answer that does not throttle: all of its share again */
		return;
	}
	now = GetCurrentTimestamp();
	until = TimestampTzPlusMilliseconds(now, throttle_s * 1000L);
	if (until <= s->throttled_until)
		return;
	if (s->throttled_until <= now)
		ereport(LOG,
				(errmsg("webhook_ingest worker: source \"%s\" throttled for %ld s by its upstream (%s)",
						s->name, throttle_s, throttle_by)));
	s->throttled_until = until;
	s->throttled_at = now;
	throttles_changed = true;
	strlcpy(s->throttled_by, throttle_by, sizeof(s->throttled_by));
}

/* A claimed job (or page) of source is no longer in flight: completed by an apply worker, or given up. */
void
wi_sched_completed(const char *source, bool reconciled)
{
	SourceSched *s = wi_sched_lookup(source);

	if (s == NULL)
		return;
	wi_sched_state_changed();
	s->in_flight = Max(s->in_flight - 1, 0);
	if (reconciled)
		s->reconciling = Max(s->reconciling - 1, 0);
}

/* Does the source reconcile (as the last read of sources found)? */
bool
wi_sched_reconciles(const char *source)
{
	SourceSched *s = wi_sched_lookup(source);

	return s != NULL && s->share > 0;
}

/* Does any source reconcile? */
bool
wi_sched_any_reconciles(void)
{
	HASH_SEQ_STATUS seq;
	SourceSched *s;

	hash_seq_init(&seq, wi_sched_sources);
	while ((s = hash_seq_search(&seq)) != NULL)
	{
		if (s->share > 0 && s->present)
		{
			hash_seq_term(&seq);
			return true;
		}
	}
	return false;
}

/*
 * When a rate-limited source that reconciles has a token in its bucket and
 * in its share's (both refilled now); DT_NOEND: it has both now (what holds
 * it back is no bucket).
 */
static TimestampTz
tokens_at(SourceSched *s, TimestampTz now)
{
	TimestampTz at = DT_NOBEGIN;

	refill_tokens(s, now);
	refill_bucket(&s->share_tokens, &s->share_tokens_at, s->share * s->rate_limit, s->share_burst, now);
	if (s->tokens < 1)
		at = next_token_at(s->tokens, s->tokens_at, s->rate_limit);
	if (s->share_tokens < 1)
		at = Max(at, next_token_at(s->share_tokens, s->share_tokens_at, s->share * s->rate_limit));
	return at == DT_NOBEGIN ? DT_NOEND : at;
}

/*
 * The sources that reconcile and may start a list page's fetch now (the
 * room allowance() and share_room() give), for the page claim: their names
 * into *names (palloc'd); how many.  *retry_at: the soonest a source held
 * back by a bucket has a token again (DT_NOEND: none is).
 */
int
wi_sched_page_candidates(TimestampTz now, const char ***names, TimestampTz *retry_at)
{
	HASH_SEQ_STATUS seq;
	SourceSched *s;
	int			n = 0;

	*names = palloc(sizeof(char *) * Max(hash_get_num_entries(wi_sched_sources), 1));
	*retry_at = DT_NOEND;
	wi_sched_state_changed();
	hash_seq_init(&seq, wi_sched_sources);
	while ((s = hash_seq_search(&seq)) != NULL)
	{
		if (s->share <= 0 || !s->present || s->paused)
			continue;
		if (allowance(s, now) > 0 && share_room(s, now) > 0)
			(*names)[n++] = s->name;
		else if (s->rate_limit > 0)
			*retry_at = Min(*retry_at, tokens_at(s, now));
	}
	return n;
}

/* The page claim took a list page of source: it counts as claimed until its fetch starts. */
void
wi_sched_page_claimed(const char *source)
{
	SourceSched *s = wi_sched_lookup(source);

	if (s == NULL)
		return;
	wi_sched_state_changed();
	s->claiming++;
	s->claiming_reconciled++;
}

/* Where a scan starts again: where the last one stopped, less the margin. */
TimestampTz
wi_scan_start(TimestampTz stopped_at)
{
	if (stopped_at == DT_NOBEGIN)
		return DT_NOBEGIN;
	return TimestampTzPlusMilliseconds(stopped_at, -WI_SCAN_MARGIN_MS);
}

/* The next walks start from the beginning of each source's due jobs. */
void
wi_sched_rewind(void)
{
	HASH_SEQ_STATUS seq;
	SourceSched *s;

	hash_seq_init(&seq, wi_sched_sources);
	while ((s = hash_seq_search(&seq)) != NULL)
		s->stopped_at = DT_NOBEGIN;
}



/*
 * Milliseconds until a source held back by a limit may fetch again: a
 * throttle ends, or a backlogged source's bucket has a token (a paused or
 * dropped source's bucket is not refilled: it is not waited for); 0 while
 * that has happened and no claim has looked since; -1: none.
 */
long
wi_sched_wait_ms(TimestampTz now)
{
	HASH_SEQ_STATUS seq;
	SourceSched *s;

	if (!soonest_wake_known)
	{
		soonest_wake = DT_NOEND;
		hash_seq_init(&seq, wi_sched_sources);
		while ((s = hash_seq_search(&seq)) != NULL)
		{
			if (s->throttled_until != 0)	/* ends then, or has ended: a claim is due */
				soonest_wake = Min(soonest_wake, s->throttled_until);
			else if (s->present && !s->paused && s->backlogged && s->rate_limit > 0 && s->tokens < 1)
				soonest_wake = Min(soonest_wake, next_token_at(s->tokens, s->tokens_at, s->rate_limit));
			else if (s->present && !s->paused && s->share_held && s->share_burst > 0 && s->share_tokens < 1)
				soonest_wake = Min(soonest_wake, next_token_at(s->share_tokens, s->share_tokens_at,
															   s->share * s->rate_limit));
		}
		soonest_wake_known = true;
	}
	if (soonest_wake == DT_NOEND)
		return -1;
	return soonest_wake <= now ? 0 : (long) ((soonest_wake - now + 999) / 1000);
}

static int
busier_first(const void *a, const void *b)
{
	return ((const WiSourceShown *) b)->in_flight - ((const WiSourceShown *) a)->in_flight;
}

/* Has a throttle begun or been ended by a change of its source since wi_sched_shown last ran? */
bool
wi_sched_throttles_changed(void)
{
	return throttles_changed;
}

/*
 * What queue_stats shows: the sources with fetches in flight or a throttle,
 * throttled ones first, then the busiest, at most max; how many.
 */
int
wi_sched_shown(WiSourceShown *shown, int max)
{
	HASH_SEQ_STATUS seq;
	SourceSched *s;
	TimestampTz now = GetCurrentTimestamp();
	int			n = 0;
	int			nthrottled = 0;
	WiSourceShown *all = palloc(sizeof(WiSourceShown) * Max(hash_get_num_entries(wi_sched_sources), 1));

	throttles_changed = false;

	hash_seq_init(&seq, wi_sched_sources);
	while ((s = hash_seq_search(&seq)) != NULL)
	{
		bool		throttled = s->throttled_until > now;
		WiSourceShown *row;

		if (s->in_flight == 0 && !throttled)
			continue;
		/* throttled ones at the front, in the order met */
		if (throttled)
		{
			all[n] = all[nthrottled];
			row = &all[nthrottled++];
		}
		else
			row = &all[n];
		n++;
		strlcpy(row->name, s->name, sizeof(row->name));
		row->in_flight = s->in_flight;
		row->applying = s->nready + s->locked;
		row->throttled_until = throttled ? s->throttled_until : 0;
		strlcpy(row->throttled_by, throttled ? s->throttled_by : "", sizeof(row->throttled_by));
	}
	if (n > nthrottled)
		qsort(all + nthrottled, n - nthrottled, sizeof(WiSourceShown), busier_first);
	n = Min(n, max);
	memcpy(shown, all, sizeof(WiSourceShown) * n);
	pfree(all);
	return n;
}
