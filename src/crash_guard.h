/*
 * crash_guard.h
 *		Recognising a job that crashes the worker (crash_guard.c).
 *
 * IDENTIFICATION
 *		src/crash_guard.h
 */
#ifndef WI_CRASH_GUARD_H
#define WI_CRASH_GUARD_H

#include "postgres.h"

#include "nodes/pg_list.h"

struct Transfer;

extern void wi_crash_guard_start(void);
extern void wi_crash_guard_postmaster_terminated(void);
extern bool wi_crash_guard_must_go_alone(struct Transfer *t);
extern void wi_crash_guard_completing(List *batch);
extern void wi_crash_guard_completed(List *batch);

#endif							/* WI_CRASH_GUARD_H */
