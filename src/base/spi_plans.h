/*
 * spi_plans.h
 *		Statements prepared once per process (spi_plans.c).
 *
 * IDENTIFICATION
 *		src/base/spi_plans.h
 */
#ifndef WI_SPI_PLANS_H
#define WI_SPI_PLANS_H

#include "postgres.h"

struct _SPI_plan;
extern struct _SPI_plan *wi_prepare_once(struct _SPI_plan **plan, const char *sql, int nargs, Oid *argtypes,
										 bool replan);

#endif							/* WI_SPI_PLANS_H */
