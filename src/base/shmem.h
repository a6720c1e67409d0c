/*
 * shmem.h
 *		Shared memory (shmem.c): what each process publishes and reads there
 *		(its counters, its state, why it exited), the wake-ups, and the
 *		shared state itself for the launcher (launcher.c) and the utility
 *		hook (utility.c), which change slots and blocks under its spinlock.  A database's slot holds its fetcher (the worker) and its
 *		apply workers; the launcher reserves it when the fetcher first starts
 *		and frees it once every process of the database is gone.
 *
 * IDENTIFICATION
 *		src/base/shmem.h
 */
#ifndef WI_SHMEM_H
#define WI_SHMEM_H

#include "datatype/timestamp.h"
#include "storage/condition_variable.h"
#include "storage/dsm.h"
#include "storage/latch.h"
#include "storage/spin.h"

#include "webhook_ingest.h"
#include "scheduler.h"

/*
 * What a process has done since it started (worker_status): the fetcher
 * counts claims and transfers, and the outcomes its apply workers report;
 * an apply worker counts the jobs it completed.
 */
typedef struct WiCounters
{
	int64		claimed;		/* jobs claimed */
	int64		fetched;		/* transfers finished, whatever the outcome */
	int64		applied;		/* jobs completed by an apply worker, whatever the outcome */
	int64		handler_us;		/* time spent in handlers (and storing documents) */
	int64		succeeded;		/* jobs done (handler committed) */
	int64		retried;		/* failed attempts with a retry scheduled */
	int64		dead;			/* jobs that ended dead */
	int64		handler_errors; /* handler calls that raised an error */
	int64		bytes;			/* response body bytes received */
	int64		connections_opened; /* connections (sockets) opened */
	int64		tls_connections_opened; /* of which for https */
	char		last_error[256];
	TimestampTz last_error_at;
} WiCounters;

/* Why a worker or an apply worker exited, for the launcher (shmem.c). */
typedef enum WiExitReason
{
	WI_EXIT_UNEXPECTED = 0,		/* a crash or FATAL: restart with a back-off */
	WI_EXIT_NO_EXTENSION,		/* not installed here: wait until CREATE EXTENSION */
	WI_EXIT_STOPPED,			/* asked to stop */
	WI_EXIT_TERMINATED,			/* SIGTERM from another backend (pg_terminate_backend): restart at once */
	WI_EXIT_DEADLINE			/* an apply worker whose handler ran past its hard deadline: restart at once */
} WiExitReason;

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

/* Every process: registering, publishing its state, waking others (shmem.c). */
extern void wi_shmem_init(void);
extern bool wi_shmem_register_worker(void);
extern bool wi_shmem_stop_requested(void);
extern void wi_shmem_set_exit_reason(WiExitReason reason, const char *state);
extern void wi_shmem_wake_launcher(Oid database);
extern void wi_shmem_publish(const char *state, int in_flight, int applying, const WiCounters *counters);
extern bool wi_shmem_register_applier(int index);
extern WiExitReason wi_shmem_exit_reason(void);
extern void wi_shmem_set_fetcher_ready(bool ready);
extern void wi_shmem_publish_queues(dsm_handle queues);
extern uint32 wi_shmem_applier(int index, dsm_handle *queues, pid_t *pid, WiExitReason *reason,
							   int64 *handling_job);
extern void wi_shmem_set_handling(int64 job_id);
extern void wi_shmem_publish_applier(const char *state, int in_batch, const WiCounters *counters);
extern void wi_shmem_publish_alone(const char *text);
extern void wi_shmem_publish_horizon(TimestampTz history_until, TimestampTz kept_until);
extern void wi_shmem_horizon(TimestampTz *history_until, TimestampTz *kept_until);
extern void wi_shmem_wake_launcher_installed(Oid database);
extern void wi_shmem_publish_sources(void);
extern void wi_wake_worker_at_commit(void);
extern ConditionVariable *wi_shmem_job_cv(int64 job_id);
extern void wi_shmem_jobs_finished(const int64 *job_ids, int n);
extern void wi_shmem_all_jobs_finished(void);

/* The launcher and the utility hook: the slots themselves, under the spinlock. */
extern WiShared *wi_shared;
extern WiSlot *wi_slot_of(Oid database);
extern bool wi_slot_has_processes(const WiSlot *slot);

#endif							/* WI_SHMEM_H */
