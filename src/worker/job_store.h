/*
 * job_store.h
 *		The fetcher's SQL (job_store.c).
 *
 * IDENTIFICATION
 *		src/worker/job_store.h
 */
#ifndef WI_JOB_STORE_H
#define WI_JOB_STORE_H

#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "worker_tx.h"

struct Transfer;
struct curl_slist;

/* A claim in progress (in a transaction): what it may take, and the Transfers it made, in cxt. */
typedef struct WiClaim
{
	int			max;
	int			lease_s;
	MemoryContext cxt;
	List	   *claimed;
} WiClaim;


/* What wi_extension_state finds. */
typedef enum WiExtensionState
{
	WI_EXTENSION_MISSING,
	WI_EXTENSION_OLD,			/* installed, but not the version of this library */
	WI_EXTENSION_READY
} WiExtensionState;

extern WiExtensionState wi_extension_state(char *version, int size);
extern int	wi_fill_missing_done_lsn(void);
extern int	wi_park_paused(void);
extern int64 wi_events_pages(void);
extern bool wi_maintain_storage(void);

extern int	wi_reclaim_running(void);
extern int	wi_reclaim_left(const int64 *ids, int n);
extern int	wi_reclaim_expired(TimestampTz from, const int64 *given_up, int ngiven_up);
extern int64 wi_purge_events(int max_pages);
extern int	wi_active_jobs(const int64 *ids, int n, bool held_here, int64 *active);
extern List *wi_claim(int max_jobs, int lease_s, MemoryContext cxt);
extern List *wi_claim_in_tx(const char *activity, WiTxBody body, WiClaim *c);
extern void wi_claims_flush(void);
extern void wi_claim_keep(WiClaim *c, struct Transfer *t);
extern void wi_read_sources(void);
extern bool wi_sources_reread(void);
extern struct curl_slist *wi_source_headers(Jsonb *headers);

#endif							/* WI_JOB_STORE_H */
