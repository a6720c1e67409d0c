/*
 * webhook_ingest.c
 *		Module entry point: refuses to load outside shared_preload_libraries,
 *		defines the extension's settings (settings.c), asks for shared
 *		memory, installs the utility and planner hooks and registers the
 *		launcher.
 *
 * IDENTIFICATION
 *		src/webhook_ingest.c
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "webhook_ingest.h"
#include "egress.h"
#include "launcher.h"
#include "log_redact.h"
#include "net_guard.h"
#include "packed_jobs_planner.h"
#include "settings.h"
#include "shmem.h"
#include "stats.h"
#include "utility.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/*
 * Refuses to load outside shared_preload_libraries, then: the settings (the
 * plain ones, settings.c, then those whose module checks them), shared
 * memory, the hooks, the launcher.
 */
void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("webhook_ingest must be loaded via shared_preload_libraries"),
				 errhint("Add webhook_ingest to shared_preload_libraries in postgresql.conf and restart the server.")));

	wi_settings_define();
	wi_net_guard_define_gucs();
	wi_egress_define_gucs();
	wi_stats_define_gucs();
	MarkGUCPrefixReserved("webhook_ingest");

	wi_shmem_init();
	wi_log_redact_install();
	wi_utility_hook_install();
	wi_packed_jobs_planner_install();
	wi_register_launcher();
}
