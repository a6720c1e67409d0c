/*
 * source_tls.h
 *		The worker's copy of each source's TLS settings and proxy
 *		(source_tls.c), which the fetches of its jobs point to.
 *
 * IDENTIFICATION
 *		src/net/source_tls.h
 */
#ifndef WI_SOURCE_TLS_H
#define WI_SOURCE_TLS_H

#include <curl/curl.h>

#include "datatype/timestamp.h"

typedef struct WiSourceTls
{
	char	   *source;
	struct curl_blob ca;		/* data NULL: the system's bundle */
	struct curl_blob ca_tag;	/* with ca_store: what libcurl is given instead of ca */
	void	   *ca_store;		/* ca parsed once (an X509_STORE), or NULL */
	struct curl_blob cert;		/* data NULL: no client certificate */
	struct curl_blob key;		/* with cert */
	char	   *proxy;			/* NULL: webhook_ingest.proxy; "": none */
	TimestampTz seen_at;		/* the source's updated_at when it was read */
	bool		any;			/* some setting is set: fetches use it */
	int			refs;			/* fetches using it, and 1 while it is current */
} WiSourceTls;

extern void wi_source_tls_begin_refresh(void);
extern void wi_source_tls_refresh(const char *source, TimestampTz seen_at, const char *ca, const char *cert,
								  const char *key, const char *proxy);
extern void wi_source_tls_end_refresh(void);
extern TimestampTz wi_source_tls_seen_at(const char *source);
extern WiSourceTls *wi_source_tls_acquire(const char *source);
extern WiSourceTls *wi_source_tls_of_claim(const char *source, const char *ca, const char *cert, const char *key,
										   const char *proxy);
extern void wi_source_tls_release(WiSourceTls *conf);

#endif							/* WI_SOURCE_TLS_H */
