/*
 * reconcile_claim.h
 *		The fetcher's claims of reconciliation sweeps' list pages
 *		(reconcile_claim.c).
 *
 * IDENTIFICATION
 *		src/reconcile/reconcile_claim.h
 */
#ifndef WI_RECONCILE_CLAIM_H
#define WI_RECONCILE_CLAIM_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"

extern List *wi_claim_pages(int max_pages, MemoryContext cxt, TimestampTz *next_at);

#endif							/* WI_RECONCILE_CLAIM_H */
