/*
 * spi_plans.c
 *		Statements prepared once per process and kept (SPI_keepplan):
 *		enqueue's SQL path and the worker's SQL share this.  Per-row
 *		statements use a generic plan (planned once); statements whose best
 *		plan depends on the table's size or on a parameter's value (a LIMIT,
 *		an array of ids) are planned anew at each execution, so a plan made
 *		while the table was empty, or before its statistics caught up, is
 *		never kept.
 *
 * IDENTIFICATION
 *		src/base/spi_plans.c
 */
#include "postgres.h"

#include "executor/spi.h"

#include "webhook_ingest.h"
#include "spi_plans.h"

SPIPlanPtr
wi_prepare_once(SPIPlanPtr *plan, const char *sql, int nargs, Oid *argtypes, bool replan)
{
	if (*plan == NULL)
	{
		SPIPlanPtr	p = SPI_prepare_cursor(sql, nargs, argtypes,
										   replan ? CURSOR_OPT_CUSTOM_PLAN : CURSOR_OPT_GENERIC_PLAN);

		if (p == NULL)
			elog(ERROR, "could not prepare \"%s\": %s", sql, SPI_result_code_string(SPI_result));
		SPI_keepplan(p);
		*plan = p;
	}
	return *plan;
}
