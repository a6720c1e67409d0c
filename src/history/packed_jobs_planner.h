/*
 * packed_jobs_planner.h
 *		The planner hook that narrows a lookup of packed history by id to one
 *		block (packed_jobs_planner.c).
 *
 * IDENTIFICATION
 *		src/history/packed_jobs_planner.h
 */
#ifndef WI_PACKED_JOBS_PLANNER_H
#define WI_PACKED_JOBS_PLANNER_H

#include "postgres.h"

extern void wi_packed_jobs_planner_install(void);

#endif							/* WI_PACKED_JOBS_PLANNER_H */
