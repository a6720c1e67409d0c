/*
 * apply_queue.h
 *		The one interface between a database's fetcher and its apply workers
 *		(apply_queue.c): the hand-off queues each apply worker makes in a DSM
 *		segment of its own, and the messages that travel on them.  The
 *		fetcher side is apply_dispatch.c, the apply worker's applier.c;
 *		neither includes the other's headers.
 *
 *		To an apply worker (its "in" queue): one message per batch, a
 *		WiApplyBatchHeader and then per job a WiApplyItem followed by its
 *		source, external id, failure text, Link header (each NUL-terminated)
 *		and body (NUL-terminated too).  An item is a job's fetched result,
 *		or a list page of a reconciliation sweep (WI_ITEM_PAGE: its external
 *		id is the page's URL, its job id a number below 0 of the fetcher's
 *		own), which the apply worker hands to _reconcile_page.  Back to the fetcher (the "out" queue): a
 *		WiApplyReplyHeader and a WiApplyOutcome per job of the batch, in the
 *		order handed over.  And the apply worker's guard file, which says
 *		what it was completing should it die in a batch.
 *
 * IDENTIFICATION
 *		src/worker/apply_queue.h
 */
#ifndef WI_APPLY_QUEUE_H
#define WI_APPLY_QUEUE_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "storage/dsm.h"
#include "storage/shm_mq.h"

/* The reply queue: outcomes of one batch at a time, a few kB. */
#define WI_APPLY_REPLY_QUEUE_SIZE	(64 * 1024)

/*
 * A handler's hard deadline: an apply worker whose handler runs on this long
 * after webhook_ingest.handler_timeout cancelled it is ended (handler_call.c),
 * and the fetcher says so in the job's last_error (crash_guard.c).
 */
#define WI_HARD_DEADLINE_GRACE_MS(handler_timeout_ms)	Min((handler_timeout_ms), 1000)

/* Most jobs in one batch. */
#define WI_APPLY_MAX_BATCH		256

/*
 * The leash of a batch of sources known to be quick (sched_apply.c: none of
 * their jobs lately took this long), and of a slow source's batch that takes
 * the apply worker kept for the others (apply_dispatch.c): a handler still
 * running after it is cancelled, its work rolled back, and its result goes
 * back to the fetcher (WI_OUTCOME_TOO_SLOW) to be completed again alone, as
 * a heavy source's, never in the apply worker kept for the others.  So a
 * source whose handler turns slow holds the other sources' jobs of its batch,
 * and the last apply worker, this long at most, not handler_timeout.
 */
#define WI_APPLY_LEASH_MS		100

typedef enum WiApplyMessageKind
{
	WI_MSG_BATCH = 0x57490001,	/* fetcher -> apply worker */
	WI_MSG_OUTCOMES				/* apply worker -> fetcher: a batch is over */
} WiApplyMessageKind;

/* How a fetched result was judged (verdict.c), sent with it. */
typedef enum WiApplyVerdict
{
	WI_APPLY_HANDLE,			/* 2xx: parse and run the handler */
	WI_APPLY_GONE,				/* 404, 410: run the handler with details NULL */
	WI_APPLY_RETRY,				/* transient failure: back off and try again */
	WI_APPLY_DEAD				/* permanent failure: no retry */
} WiApplyVerdict;

typedef struct WiApplyBatchHeader
{
	uint32		kind;			/* WI_MSG_BATCH */
	uint32		njobs;
	uint64		batch_id;
	int32		fetcher_pid;	/* the jobs' worker_pid: a job claimed since by another fetcher is not ours */
	int32		leash_ms;		/* WI_APPLY_LEASH_MS for a batch of quick sources; 0: none */
} WiApplyBatchHeader;

typedef struct WiApplyItem
{
	int64		job_id;
	TimestampTz created_at;		/* when the job's first webhook came */
	double		fetch_seconds;	/* the transfer's duration */
	uint64		body_len;
	int32		attempt;
	int32		max_attempts;
	Oid			handler;		/* InvalidOid: store the document */
	int32		verdict;		/* WiApplyVerdict */
	int32		status;			/* HTTP status; 0: none */
	int32		retry_after_s;	/* -1: none */
	uint32		source_len;
	uint32		external_id_len;
	uint32		why_len;		/* what went wrong with the transfer; 0: nothing */
	uint32		link_len;		/* the response's Link headers (a page's); 0: none */
	uint32		flags;			/* WI_ITEM_* */
	uint32		unused;
} WiApplyItem;

#define WI_ITEM_PAGE		0x1 /* a list page of a sweep, for _reconcile_page */
#define WI_ITEM_RECONCILES	0x2 /* a job of a reconciling source: _reconcile_fetched before it is done */

/* How a job's completion ended (WiApplyOutcome.outcome). */
typedef enum WiOutcome
{
	WI_OUTCOME_NONE,
	WI_OUTCOME_DONE,			/* handler committed, job done */
	WI_OUTCOME_REFETCH,			/* handler committed, a newer webhook sent it back to pending */
	WI_OUTCOME_RETRY,			/* failed, retry scheduled */
	WI_OUTCOME_DEAD,			/* failed for good */
	WI_OUTCOME_DISCARDED,		/* no longer running under this attempt (cancelled, reclaimed) */
	WI_OUTCOME_LOCKED,			/* its row was locked by another session: try again later */
	WI_OUTCOME_NOT_STARTED,		/* the batch ran out of time before it: hand it over again */
	WI_OUTCOME_ERROR,			/* an error escaped its batch's completion: try again, alone */
	WI_OUTCOME_PAGE,			/* a list page, processed (_reconcile_page committed with the batch) */
	WI_OUTCOME_TOO_SLOW			/* its handler ran past the batch's leash: rolled back, to go again alone */
} WiOutcome;

#define WI_OUTCOME_FLAG_HANDLER_ERROR	0x1 /* its handler raised an error */

typedef struct WiApplyOutcome
{
	int64		job_id;
	int64		handler_us;		/* time in its handler (or storing its document) */
	int32		outcome;		/* WiOutcome */
	int32		flags;
} WiApplyOutcome;

typedef struct WiApplyReplyHeader
{
	uint32		kind;			/* WI_MSG_OUTCOMES */
	uint32		njobs;
	uint64		batch_id;
	TimestampTz last_error_at;	/* 0: no failure in the batch */
	char		last_error[256];
} WiApplyReplyHeader;

/* One end of an apply worker's two queues. */
typedef struct WiApplyQueues
{
	dsm_segment *segment;
	shm_mq_handle *in;			/* batches, fetcher -> apply worker */
	shm_mq_handle *out;			/* replies, apply worker -> fetcher */
} WiApplyQueues;

/*
 * An apply worker's guard file (wi_applier_guard_path), which survives its
 * death and a crash restart: empty while it completes nothing, else a line
 *   completing <job>:<attempt>:<handler> ...   the batch it completes (or
 *                                              completed when it died)
 *   interrupted <job>:<attempt>:<handler> ...  the batch it completed when a
 *                                              signal not of its jobs' making
 *                                              (a shutdown, an administrator's
 *                                              pg_terminate_backend, another
 *                                              process's crash) stopped it
 * preceded, when a handler ran past its hard deadline, by
 *   deadline <job>:<attempt>:<handler>:<leash>  (<leash>: the leash whose
 *                                              deadline it was, in ms; 0:
 *                                              handler_timeout's)
 * applier_guard.c writes it, the fetcher settles what a gone apply worker
 * left (crash_guard.c).
 */
#define WI_GUARD_COMPLETING		"completing"
#define WI_GUARD_INTERRUPTED	"interrupted"
#define WI_GUARD_DEADLINE		"deadline"

extern char *wi_applier_guard_path(int index);
extern WiApplyQueues *wi_apply_queues_create(Size in_size);
extern WiApplyQueues *wi_apply_queues_attach(dsm_handle handle);
extern void wi_apply_queues_detach(WiApplyQueues *q);

#endif							/* WI_APPLY_QUEUE_H */
