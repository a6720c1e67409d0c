/*
 * shmem.c
 *		Shared state between the worker and every backend: where the worker's
 *		latch is, and the wake-up that enqueue() arms and a transaction
 *		callback fires at commit (never on rollback).
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"

#include "webhook_ingest.h"

typedef struct WiShared
{
	slock_t		mutex;
	pid_t		worker_pid;		/* 0 when no worker runs */
	Latch	   *worker_latch;	/* the worker's PGPROC latch, in shared memory */
} WiShared;

static WiShared *wi_shared = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
#if PG_VERSION_NUM >= 150000
static shmem_request_hook_type prev_shmem_request_hook = NULL;
#endif
static bool wake_at_commit = false;
static bool xact_callback_registered = false;

#if PG_VERSION_NUM >= 150000
static void
wi_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(WiShared)));
}
#endif

static void
wi_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	wi_shared = ShmemInitStruct("webhook_ingest", sizeof(WiShared), &found);
	if (!found)
	{
		SpinLockInit(&wi_shared->mutex);
		wi_shared->worker_pid = 0;
		wi_shared->worker_latch = NULL;
	}
	LWLockRelease(AddinShmemInitLock);
}

/* Called from _PG_init in the postmaster. */
void
wi_shmem_init(void)
{
#if PG_VERSION_NUM >= 150000
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = wi_shmem_request;
#else
	RequestAddinShmemSpace(MAXALIGN(sizeof(WiShared)));
#endif
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = wi_shmem_startup;
}

static void
forget_worker(int code, Datum arg)
{
	SpinLockAcquire(&wi_shared->mutex);
	if (wi_shared->worker_pid == MyProcPid)
	{
		wi_shared->worker_pid = 0;
		wi_shared->worker_latch = NULL;
	}
	SpinLockRelease(&wi_shared->mutex);
}

/* The worker announces itself; its entry is cleared when it exits. */
void
wi_shmem_register_worker(void)
{
	SpinLockAcquire(&wi_shared->mutex);
	wi_shared->worker_pid = MyProcPid;
	wi_shared->worker_latch = MyLatch;
	SpinLockRelease(&wi_shared->mutex);
	on_shmem_exit(forget_worker, (Datum) 0);
}

static void
wake_worker(void)
{
	Latch	   *latch;

	if (wi_shared == NULL)
		return;
	SpinLockAcquire(&wi_shared->mutex);
	latch = wi_shared->worker_latch;
	SpinLockRelease(&wi_shared->mutex);
	if (latch != NULL)
		SetLatch(latch);
}

static void
wake_at_end_of_xact(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (wake_at_commit)
				wake_worker();
			wake_at_commit = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			wake_at_commit = false;
			break;
		default:
			break;
	}
}

/* enqueue(): wake the worker when (and only if) this transaction commits. */
void
wi_wake_worker_at_commit(void)
{
	if (!xact_callback_registered)
	{
		RegisterXactCallback(wake_at_end_of_xact, NULL);
		xact_callback_registered = true;
	}
	wake_at_commit = true;
}
