/*
 * sched_apply.h
 *		Who gets the apply workers' time (sched_apply.c): the fetched jobs
 *		waiting for an apply worker, in batches per source.
 *
 * IDENTIFICATION
 *		src/worker/sched_apply.h
 */
#ifndef WI_SCHED_APPLY_H
#define WI_SCHED_APPLY_H

#include "postgres.h"

#include "nodes/pg_list.h"

struct Transfer;

typedef bool (*WiAloneTest) (struct Transfer *t);
extern void wi_sched_ready(struct Transfer *t, bool front);
extern List *wi_sched_next_batch(int max, bool reserve_free, WiAloneTest alone, bool *restricted);
extern void wi_sched_applied(struct Transfer *t, int64 handler_us);
extern bool wi_sched_quick(const struct Transfer *t);
extern void wi_sched_left_applier(struct Transfer *t);
extern void wi_sched_locked(const char *source, int delta);

#endif							/* WI_SCHED_APPLY_H */
