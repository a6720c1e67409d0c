/*
 * utility.h
 *		The ProcessUtility hook that stops a database's worker before DROP,
 *		RENAME or TEMPLATE use of its database (utility.c).
 *
 * IDENTIFICATION
 *		src/worker/utility.h
 */
#ifndef WI_UTILITY_H
#define WI_UTILITY_H

#include "postgres.h"

extern void wi_utility_hook_install(void);

#endif							/* WI_UTILITY_H */
