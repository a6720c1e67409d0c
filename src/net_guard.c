/*
 * net_guard.c
 *		The network guard: which addresses the worker may connect to
 *		(webhook_ingest.denied_networks, webhook_ingest.allowed_networks),
 *		checked on the address curl actually connects to, for every
 *		connection and every redirect hop.
 */
#include "postgres.h"

#include "webhook_ingest.h"

void
wi_net_guard_define_gucs(void)
{
}
