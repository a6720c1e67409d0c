/*
 * spi_plans.c
 *		Statements prepared once per process and kept (SPI_keepplan), with a
 *		generic plan: enqueue's SQL path and the worker's SQL share this.
 */
#include "postgres.h"

#include "executor/spi.h"

#include "webhook_ingest.h"

SPIPlanPtr
wi_prepare_once(SPIPlanPtr *plan, const char *sql, int nargs, Oid *argtypes)
{
	if (*plan == NULL)
	{
		SPIPlanPtr	p = SPI_prepare_cursor(sql, nargs, argtypes, CURSOR_OPT_GENERIC_PLAN);

		if (p == NULL)
			elog(ERROR, "could not prepare \"%s\": %s", sql, SPI_result_code_string(SPI_result));
		SPI_keepplan(p);
		*plan = p;
	}
	return *plan;
}
