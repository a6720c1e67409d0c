/*
 * verdict.h
 *		Classifying a finished transfer (verdict.c).
 *
 * IDENTIFICATION
 *		src/verdict.h
 */
#ifndef WI_VERDICT_H
#define WI_VERDICT_H

#include "postgres.h"

#include "lib/stringinfo.h"

#include "http.h"

/* How a finished transfer is treated. */
typedef enum WiVerdict
{
	WI_V_HANDLE,				/* 2xx: parse and run the handler */
	WI_V_GONE,					/* 404, 410: run the handler with details NULL */
	WI_V_RETRY,					/* transient: back off and try again */
	WI_V_DEAD					/* permanent: no retry */
} WiVerdict;

extern WiVerdict wi_judge(Transfer *t, StringInfo why);
extern bool wi_handler_error_final(int sqlerrcode);

#endif							/* WI_VERDICT_H */
