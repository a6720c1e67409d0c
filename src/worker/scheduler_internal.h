/*
 * scheduler_internal.h
 *		What the scheduler keeps per source, shared by its two halves: fetch
 *		slots (scheduler.c) and apply workers' time (sched_apply.c).  Not
 *		for other files: they use scheduler.h.
 *
 * IDENTIFICATION
 *		src/worker/scheduler_internal.h
 */
#ifndef WI_SCHEDULER_INTERNAL_H
#define WI_SCHEDULER_INTERNAL_H

#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "scheduler.h"

typedef struct SourceSched
{
	char		name[WI_SOURCE_NAME_LEN];	/* hash key */
	bool		present;		/* in the latest read of sources */
	bool		paused;
	int			weight;
	double		rate_limit;		/* requests per second; 0: none */
	int			burst;
	int			max_in_flight;	/* 0: none */

	int			in_flight;		/* claimed, not completed (fetching, or fetched and applying) */
	int			claiming;		/* claimed in the open claim transaction */
	double		tokens;
	TimestampTz tokens_at;
	TimestampTz throttled_until;	/* 0: not throttled */
	TimestampTz throttled_at;
	char		throttled_by[32];
	bool		probing;		/* its throttle ran out: one fetch at a time until
								 * a response does not throttle */

	double		level;			/* in this pass: (in flight + claiming) / weight */
	bool		backlogged;		/* its last claim filled its quota: more may be due */
	bool		probed;			/* in this claim: the probe looked for its due jobs */
	bool		has_due;		/* in this claim: the probe found due jobs */
	bool		drained;		/* in this claim: returned less than its quota */
	TimestampTz stopped_at;		/* where its last walk stopped; DT_NOBEGIN: the start */

	/* the pass in progress */
	int			quota;
	int			allowance;
	int			claimed;
	TimestampTz last_due;

	/*
	 * Reconciliation (issue 30): list pages and jobs no webhook announced
	 * take at most share of the limits above (they count against them too).
	 */
	double		share;			/* 0: the source does not reconcile */
	double		share_tokens;	/* share x rate_limit a second, share x rate_burst deep (at least 1) */
	TimestampTz share_tokens_at;
	int			share_burst;
	int			reconciling;	/* of in_flight, fetches for reconciliation */
	int			claiming_reconciled;	/* of claiming */
	int			share_quota;	/* in the pass: at most this many jobs no webhook announced; -1: any job */
	int			claimed_reconciled; /* of claimed */
	bool		share_held;		/* its last pass was held back by its share, not drained */

	/* apply workers' time (sched_apply.c) */
	List	   *ready;			/* fetched results (Transfers) waiting for an apply worker */
	int			nready;
	int			in_applier;		/* results in an apply worker's batch */
	int			locked;			/* results whose rows another session held, to try again */
	double		apply_vtime;	/* apply time it had, per unit of weight (us), on the virtual clock */
	double		apply_ewma_us;	/* time its jobs take in an apply worker, lately */
	double		apply_peak_us;	/* the longest lately, decaying */
	int64		apply_samples;	/* jobs measured */
} SourceSched;

extern HTAB *wi_sched_sources;
extern SourceSched *wi_sched_lookup(const char *name);
extern void wi_sched_state_changed(void);
extern bool wi_sched_apply_backlogged(const SourceSched *s);

#endif							/* WI_SCHEDULER_INTERNAL_H */
