/*
 * net_guard.h
 *		The network guard and the redirect policy (net_guard.c).
 *
 * IDENTIFICATION
 *		src/net/net_guard.h
 */
#ifndef WI_NET_GUARD_H
#define WI_NET_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* Room for a refusal message (a Transfer keeps one). */
#define WI_REFUSAL_SIZE		256

/* webhook_ingest.cross_origin_redirects */
typedef enum WiCrossOrigin
{
	WI_CROSS_ORIGIN_REFUSE,
	WI_CROSS_ORIGIN_FOLLOW_WITHOUT_HEADERS
} WiCrossOrigin;

extern int	wi_cross_origin_redirects;

/*
 * Whether the worker may connect to this address.  When not, writes why into
 * why (at most whylen bytes, NUL-terminated).  Safe inside libcurl callbacks:
 * no palloc, no ereport.
 */
extern bool wi_net_allowed_sockaddr(const struct sockaddr *sa, char *why, size_t whylen);
/* The same for an address in text form (IPv4 or IPv6, no zone). */
extern bool wi_net_allowed_text(const char *ip, char *why, size_t whylen);

extern void wi_net_guard_define_gucs(void);

#endif							/* WI_NET_GUARD_H */
