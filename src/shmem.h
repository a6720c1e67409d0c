/*
 * shmem.h
 *		The shared state of shmem.c, for the launcher (launcher.c) and the
 *		utility hook (utility.c), which change slots and blocks under its
 *		spinlock.  A database's slot holds its fetcher (the worker) and its
 *		apply workers; the launcher reserves it when the fetcher first starts
 *		and frees it once every process of the database is gone.
 *
 * IDENTIFICATION
 *		src/shmem.h
 */
#ifndef WI_SHMEM_H
#define WI_SHMEM_H

#include "storage/condition_variable.h"
#include "storage/dsm.h"
#include "storage/latch.h"
#include "storage/spin.h"

#include "webhook_ingest.h"
#include "scheduler.h"

#define WI_MAX_LOOK		64		/* databases waiting for the launcher's look */
#define WI_MAX_BLOCKS	64		/* databases in DROP/RENAME/TEMPLATE at once */
#define WI_MAX_CAPPED	64		/* databases refused a worker, shown */
#define WI_WAIT_BUCKETS	16384	/* wait_for_job()'s condition variables (192 kB) */
#define WI_ALONE_TEXT	256		/* the fetcher's account of the handlers it completes alone */

/* One apply worker of a database.  pid is 0 when none runs. */
typedef struct WiApplierSlot
{
	bool		starting;		/* registered by the launcher, not yet attached */
	WiExitReason exit_reason;	/* why it exited, for the launcher */
	pid_t		pid;
	Latch	   *latch;
	TimestampTz started_at;
	char		state[64];
	/* its hand-off queues (apply_queue.c), published for the fetcher */
	dsm_handle	queues;
	uint32		queues_generation;	/* bumped at each new segment */
	/* the job whose handler runs now, for the fetcher when it exits (0: none) */
	int64		handling_job;
	int			in_batch;		/* jobs of the batch it completes now */
	WiCounters	counters;
} WiApplierSlot;

/* One database's worker (its fetcher) and apply workers.  database is InvalidOid when the slot is free. */
typedef struct WiSlot
{
	Oid			database;		/* set and cleared by the launcher */
	bool		starting;		/* fetcher registered, not yet attached */
	bool		stop_requested; /* every process of the database exits cleanly at its next turn */
	bool		fetcher_ready;	/* the fetcher found the extension at its version: appliers may start */
	WiExitReason exit_reason;	/* why the fetcher exited, for the launcher */
	pid_t		worker_pid;		/* the fetcher; 0 when none runs */
	Latch	   *worker_latch;	/* the fetcher's PGPROC latch, in shared memory */
	TimestampTz started_at;
	char		state[64];
	int			in_flight;		/* jobs claimed and not completed */
	int			applying;		/* of which fetched, waiting for or in an applier */
	WiCounters	counters;
	char		alone[WI_ALONE_TEXT];	/* handlers completed alone after a crash, and why */
	TimestampTz history_until;	/* the storage horizon the fetcher's last storage round found (job_store.h) */
	TimestampTz kept_until;
	int			nshown;			/* sources with fetches in flight or a throttle */
	WiSourceShown shown[WI_SHOWN_SOURCES];
	WiApplierSlot appliers[WI_MAX_APPLIERS];
} WiSlot;

typedef struct WiShared
{
	slock_t		mutex;
	pid_t		launcher_pid;
	Latch	   *launcher_latch;
	int			nlook;
	Oid			look[WI_MAX_LOOK];	/* databases to look at now */
	bool		look_all;
	int			ninstalled;
	Oid			installed[WI_MAX_LOOK]; /* of them, after CREATE EXTENSION: at once */
	int			nblocks;
	Oid			blocked[WI_MAX_BLOCKS]; /* no worker may start there */
	int			ncapped;
	Oid			capped[WI_MAX_CAPPED];
	ConditionVariable slot_changed; /* a worker attached or left */
	/* wait_for_job() sleeps on the one its (database, job id) hashes to */
	ConditionVariable job_finished[WI_WAIT_BUCKETS];
	int			nslots;
	WiSlot		slots[FLEXIBLE_ARRAY_MEMBER];
} WiShared;

extern WiShared *wi_shared;
extern WiSlot *wi_slot_of(Oid database);
extern bool wi_slot_has_processes(const WiSlot *slot);

#endif							/* WI_SHMEM_H */
