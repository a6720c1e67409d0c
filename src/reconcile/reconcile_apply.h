/*
 * reconcile_apply.h
 *		An apply worker's part of reconciliation (reconcile_apply.c): a list
 *		page's completion, a fetched document's comparison.
 *
 * IDENTIFICATION
 *		src/reconcile/reconcile_apply.h
 */
#ifndef WI_RECONCILE_APPLY_H
#define WI_RECONCILE_APPLY_H

#include "postgres.h"

#include "complete.h"

extern void wi_complete_page(ApplyJob *t);
extern void wi_reconcile_fetched(const ApplyJob *t, Datum document, bool gone);

#endif							/* WI_RECONCILE_APPLY_H */
