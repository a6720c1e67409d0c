/*
 * crash_guard.h
 *		The fetcher's side of recognising a job that kills its apply worker
 *		(crash_guard.c): settling what a gone apply worker left, and which
 *		results go to an apply worker alone.
 *
 * IDENTIFICATION
 *		src/worker/crash_guard.h
 */
#ifndef WI_CRASH_GUARD_H
#define WI_CRASH_GUARD_H

#include "postgres.h"

struct Transfer;

extern void wi_crash_guard_start(const bool *applier_runs);
extern int64 wi_crash_guard_settle(int index);
extern bool wi_crash_guard_must_go_alone(struct Transfer *t);
extern void wi_crash_guard_completed_alone(int64 job_id, Oid handler, int outcome);
extern void wi_crash_guard_publish(void);

#endif							/* WI_CRASH_GUARD_H */
