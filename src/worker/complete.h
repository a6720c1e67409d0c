/*
 * complete.h
 *		An apply worker's completion of a batch of fetched results
 *		(complete.c): the job as the apply worker holds it, and the calls.
 *
 * IDENTIFICATION
 *		src/worker/complete.h
 */
#ifndef WI_COMPLETE_H
#define WI_COMPLETE_H

#include "postgres.h"

#include "datatype/timestamp.h"

#include "webhook_ingest.h"
#include "apply_queue.h"
#include "shmem.h"

/* One fetched result to complete; its strings and body live in the batch's message. */
typedef struct ApplyJob
{
	int64		job_id;
	int			attempt;
	int			max_attempts;
	Oid			handler;		/* InvalidOid: store the document */
	const char *source;
	const char *external_id;
	TimestampTz created_at;
	WiApplyVerdict verdict;
	int			status;			/* HTTP status; 0: none */
	int			retry_after_s;	/* -1: none */
	double		fetch_seconds;
	const char *fetch_error;	/* why the transfer failed; "" if it did not */
	const char *link;			/* a list page's Link headers; "" if none */
	uint32		flags;			/* WI_ITEM_*: a list page, a job of a source that reconciles */
	const char *body;			/* NUL-terminated */
	size_t		body_len;

	/* set by its completion */
	WiOutcome	outcome;
	char	   *why;			/* what went wrong, for a failed outcome */
	int64		handler_us;
	bool		handler_error;
} ApplyJob;

extern void wi_complete(ApplyJob *jobs, int njobs, int fetcher_pid, WiCounters *counters);
extern void wi_retry_done_lsn(void);

#endif							/* WI_COMPLETE_H */
