/*
 * worker.h
 *		The fetcher's life (worker.c): how the launcher describes it, its
 *		stop check and its wait for a writable database.
 *
 * IDENTIFICATION
 *		src/worker/worker.h
 */
#ifndef WI_WORKER_H
#define WI_WORKER_H

#include "postgres.h"

#include "shmem.h"

struct BackgroundWorker;

extern void wi_worker_describe(struct BackgroundWorker *worker, Oid database);
extern void wi_worker_stop_if_asked(void);
extern void wi_worker_wait_writable(int in_flight, int applying, const WiCounters *counters);

#endif							/* WI_WORKER_H */
