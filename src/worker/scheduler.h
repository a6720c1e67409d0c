/*
 * scheduler.h
 *		Who gets the fetcher's free fetch slots (scheduler.c): fair shares
 *		among sources with due work, per-source token buckets and in-flight
 *		caps, and throttles the upstreams asked for.  Who gets the apply
 *		workers' time: sched_apply.h.
 *
 * IDENTIFICATION
 *		src/worker/scheduler.h
 */
#ifndef WI_SCHEDULER_H
#define WI_SCHEDULER_H

#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/timestamp.h"

#include "webhook_ingest.h"

struct Transfer;

/* Most sources queue_stats shows scheduler state for (the busiest). */
#define WI_SHOWN_SOURCES	64
/* A scan starts where the last stopped, less this margin for rows that committed late (worker_loop.c). */
#define WI_SCAN_MARGIN_MS	2000

/*
 * One source's share of a claim pass: at most quota jobs due at or after
 * from; of a source that reconciles, the jobs a webhook announced first,
 * then at most reconciled jobs no webhook announced (-1: any, in due order).
 */
typedef struct WiQuota
{
	const char *source;
	int			quota;
	TimestampTz from;
	int			reconciled;
} WiQuota;

/* What queue_stats shows of a source (shmem.c keeps the worker's copy). */
typedef struct WiSourceShown
{
	char		name[WI_SOURCE_NAME_LEN];
	int			in_flight;		/* claimed, not completed */
	int			applying;		/* of which fetched and waiting for an apply worker */
	TimestampTz throttled_until;	/* 0: not throttled */
	char		throttled_by[32];
} WiSourceShown;

extern void wi_sched_init(void);
extern void wi_sched_begin_claim(void);
extern void wi_sched_begin_refresh(void);
extern void wi_sched_refresh(const char *name, bool paused, int weight, double rate_limit, int rate_burst,
							 int max_in_flight, TimestampTz updated_at, double reconcile_share);
extern void wi_sched_forget_dropped(void);
extern int	wi_sched_candidates(TimestampTz now, const char ***names, TimestampTz **froms);
extern void wi_sched_has_due(const char *source);
extern int	wi_sched_plan(int capacity, TimestampTz now, WiQuota **quotas);
extern void wi_sched_claimed(const char *source, TimestampTz next_attempt_at, bool reconciled);
extern int	wi_sched_end_pass(TimestampTz claim_start);
extern void wi_sched_started(const char *source, bool reconciled);
extern void wi_sched_finished(const char *source, bool answered, long throttle_s, const char *throttle_by);
extern void wi_sched_completed(const char *source, bool reconciled);
extern bool wi_sched_reconciles(const char *source);
extern bool wi_sched_any_reconciles(void);
extern int	wi_sched_page_candidates(TimestampTz now, const char ***names, TimestampTz *retry_at);
extern void wi_sched_page_claimed(const char *source);
extern TimestampTz wi_scan_start(TimestampTz stopped_at);
extern void wi_sched_rewind(void);
extern long wi_sched_wait_ms(TimestampTz now);
extern bool wi_sched_throttles_changed(void);
extern int	wi_sched_shown(WiSourceShown *shown, int max);

#endif							/* WI_SCHEDULER_H */
