/*
 * webhook_ingest.c
 *		Module entry point: refuses to load outside shared_preload_libraries
 *		and defines the extension's settings (GUCs).
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "webhook_ingest.h"

PG_MODULE_MAGIC;

/* How long accepted event ids are remembered, in seconds. */
int			wi_dedup_window = 7 * 24 * 60 * 60;

void		_PG_init(void);

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("webhook_ingest must be loaded via shared_preload_libraries"),
				 errhint("Add webhook_ingest to shared_preload_libraries in postgresql.conf and restart the server.")));

	DefineCustomIntVariable("webhook_ingest.dedup_window",
							"How long accepted event ids are remembered.",
							"A webhook whose event id the source delivered within this window is a duplicate.",
							&wi_dedup_window,
							7 * 24 * 60 * 60,
							60,
							INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

#if PG_VERSION_NUM >= 150000
	MarkGUCPrefixReserved("webhook_ingest");
#else
	EmitWarningsOnPlaceholders("webhook_ingest");
#endif
}
