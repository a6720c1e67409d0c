/*
 * verdict.h
 *		Classifying a finished transfer, in the fetcher (verdict.c).
 *
 * IDENTIFICATION
 *		src/net/verdict.h
 */
#ifndef WI_VERDICT_H
#define WI_VERDICT_H

#include "postgres.h"

#include "lib/stringinfo.h"

#include "apply_queue.h"
#include "http.h"

extern WiApplyVerdict wi_judge(Transfer *t, StringInfo why);

#endif							/* WI_VERDICT_H */
