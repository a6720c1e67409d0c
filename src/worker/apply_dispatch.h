/*
 * apply_dispatch.h
 *		The fetcher's side of the hand-off to the apply workers
 *		(apply_dispatch.c).
 *
 * IDENTIFICATION
 *		src/worker/apply_dispatch.h
 */
#ifndef WI_APPLY_DISPATCH_H
#define WI_APPLY_DISPATCH_H

#include "postgres.h"

#include "webhook_ingest.h"
#include "shmem.h"

struct Transfer;

extern void wi_dispatch_result(struct Transfer *t);
extern void wi_dispatch_pass(WiCounters *counters);
extern int	wi_dispatch_held(void);
extern int	wi_dispatch_held_all(void);
extern int	wi_dispatch_appliers(void);
extern long wi_dispatch_timeout_ms(void);
extern int64 *wi_dispatch_abandoned(int *n);
extern void wi_dispatch_set_abandoned(int n);
extern void wi_dispatch_claimed_again(int64 job_id);
extern bool wi_dispatch_page_answered(void);

#endif							/* WI_APPLY_DISPATCH_H */
