/*
 * applier_guard.h
 *		What an apply worker writes down about the batch it completes, for
 *		the fetcher to settle should the apply worker die in it
 *		(applier_guard.c).
 *
 * IDENTIFICATION
 *		src/worker/applier_guard.h
 */
#ifndef WI_APPLIER_GUARD_H
#define WI_APPLIER_GUARD_H

#include "postgres.h"

struct ApplyJob;

extern void wi_applier_guard_open(int index);
extern void wi_applier_guard_completing(const struct ApplyJob *jobs, int njobs);
extern void wi_applier_guard_handling(int64 job_id);
extern void wi_applier_guard_completed(void);

#endif							/* WI_APPLIER_GUARD_H */
