/*
 * packed_jobs.h
 *		_packed_jobs(), the packed history read one row per job
 *		(job_history.c), and the planner hook that narrows its calls
 *		(packed_jobs_planner.c).
 *
 * IDENTIFICATION
 *		src/history/packed_jobs.h
 */
#ifndef WI_PACKED_JOBS_H
#define WI_PACKED_JOBS_H

/* Its arguments: job_id, external_ids, finished_from, finished_to (all DEFAULT NULL). */
#define PACKED_JOBS_NARGS		4
/* 0.8.0's definition, until ALTER EXTENSION UPDATE: job_id only, nine columns (no last_error). */
#define PACKED_JOBS_NARGS_080	1

#endif							/* WI_PACKED_JOBS_H */
