/*
 * applier.h
 *		What the launcher starts an apply worker as (applier.c).
 *
 * IDENTIFICATION
 *		src/worker/applier.h
 */
#ifndef WI_APPLIER_H
#define WI_APPLIER_H

#include "postgres.h"

struct BackgroundWorker;

extern void wi_applier_describe(struct BackgroundWorker *worker, Oid database, int index);

#endif							/* WI_APPLIER_H */
