/*
 * source_cache.h
 *		The per-backend cache of sources (source_cache.c): who may enqueue
 *		into one (access.h's WiSourceAccess) and its intake settings
 *		(intake.h's WiSourceIntake).
 *
 * IDENTIFICATION
 *		src/intake/source_cache.h
 */
#ifndef WI_SOURCE_CACHE_H
#define WI_SOURCE_CACHE_H

#include "postgres.h"

#include "access.h"
#include "intake.h"

extern bool wi_source_lookup(text *source, bool fresh, WiSourceAccess *access);
extern uint64 wi_sources_generation(void);
/* The settings as of the last wi_source_lookup (fresh or not). */
extern bool wi_source_intake(text *source, WiSourceIntake *intake);

#endif							/* WI_SOURCE_CACHE_H */
