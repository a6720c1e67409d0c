/*
 * worker_loop.h
 *		The fetcher's loop and what it keeps between passes (worker_loop.c).
 *
 * IDENTIFICATION
 *		src/worker/worker_loop.h
 */
#ifndef WI_WORKER_LOOP_H
#define WI_WORKER_LOOP_H

#include "postgres.h"

#include "nodes/pg_list.h"
#include "storage/latch.h"
#include "utils/timestamp.h"

#include "webhook_ingest.h"
#include "shmem.h"

typedef struct WorkerLoop
{
	MemoryContext job_cxt;		/* Transfers, while their jobs are in flight */
	MemoryContext pass_cxt;		/* reset at the start of every pass */
	WaitEventSet *wait_set;
	WiCounters	counters;
	int			fd_cap;			/* transfers the open-file limit allows */

	/* claims */
	bool		claim_now;
	TimestampTz next_poll;
	bool		rewound;		/* the next claim walks from the start (WI_SCAN_MARGIN_MS) */
	bool		full_claims_slow;
	TimestampTz next_pages;		/* when to look for due list pages (reconciliation); 0: now */

	/* housekeeping */
	TimestampTz next_lease_check;
	TimestampTz last_lease_check;
	uint64		lease_rounds;
	TimestampTz next_clean_up;
} WorkerLoop;

extern void wi_loop_init(WorkerLoop *loop, int fd_cap);
extern void wi_loop_pass(WorkerLoop *loop);
extern void wi_loop_recover(WorkerLoop *loop);

#endif							/* WI_WORKER_LOOP_H */
