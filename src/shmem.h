/*
 * shmem.h
 *		The shared state of shmem.c, for the launcher (launcher.c) and the
 *		utility hook (utility.c), which change slots and blocks under its
 *		spinlock.
 *
 * IDENTIFICATION
 *		src/shmem.h
 */
#ifndef WI_SHMEM_H
#define WI_SHMEM_H

#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/spin.h"

#include "webhook_ingest.h"
#include "scheduler.h"

#define WI_MAX_LOOK		64		/* databases waiting for the launcher's look */
#define WI_MAX_BLOCKS	64		/* databases in DROP/RENAME/TEMPLATE at once */
#define WI_MAX_CAPPED	64		/* databases refused a worker, shown */
#define WI_WAIT_BUCKETS	16384	/* wait_for_job()'s condition variables (192 kB) */

/* One database's worker.  database is InvalidOid when the slot is free. */
typedef struct WiSlot
{
	Oid			database;		/* set and cleared by the launcher */
	bool		starting;		/* registered, not yet attached */
	bool		stop_requested; /* the worker exits cleanly at its next turn */
	WiExitReason exit_reason;	/* why it exited, for the launcher */
	pid_t		worker_pid;		/* 0 when no worker runs */
	Latch	   *worker_latch;	/* the worker's PGPROC latch, in shared memory */
	TimestampTz started_at;
	char		state[64];
	int			in_flight;
	WiCounters	counters;
	int			nshown;			/* sources with fetches in flight or a throttle */
	WiSourceShown shown[WI_SHOWN_SOURCES];
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

#endif							/* WI_SHMEM_H */
