/*
 * job_store.h
 *		The worker's SQL (job_store.c).
 */
#ifndef WI_JOB_STORE_H
#define WI_JOB_STORE_H

#include "postgres.h"

#include "nodes/pg_list.h"


extern bool wi_extension_ready(void);
extern int	wi_reclaim_running(void);
extern int	wi_reclaim_expired(void);
extern void wi_purge_events(int max_pages);
extern List *wi_claim(int max_jobs, int lease_s, MemoryContext cxt);
extern void wi_complete(List *finished, WiCounters *counters);

#endif							/* WI_JOB_STORE_H */
