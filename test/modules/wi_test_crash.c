/*
 * wi_test_crash.c
 *		Test-only: a C function that crashes the backend calling it with a
 *		segmentation fault, as a buggy C handler would.  Built for TAP test
 *		008 and loaded from the test's work directory; never installed, not
 *		part of the extension.
 */
#include "postgres.h"

#include <signal.h>

#include "fmgr.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(wi_test_crash);

Datum
wi_test_crash(PG_FUNCTION_ARGS)
{
	raise(SIGSEGV);
	PG_RETURN_VOID();
}
