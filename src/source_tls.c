/*
 * source_tls.c
 *		The worker's copy of each source's TLS settings (tls_ca,
 *		tls_client_cert and its key) and proxy, read with the sources' other
 *		settings whenever they change (job_store.c read_sources).  A fetch
 *		takes a reference to its source's entry when it is claimed and drops
 *		it when its curl handle is gone, so libcurl is given the PEM blobs
 *		without a copy per transfer (CURL_BLOB_NOCOPY) and a source changed
 *		meanwhile does not pull them from under a transfer in flight.  Only
 *		sources with at least one such setting have an entry.
 *
 *		A key's bytes are zeroed before its memory is freed.
 *
 * IDENTIFICATION
 *		src/source_tls.c
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "webhook_ingest.h"
#include "source_tls.h"

static MemoryContext tls_cxt = NULL;
static WiSourceTls *current = NULL; /* the entries of the last complete read */
static WiSourceTls *previous = NULL;	/* those of the read before, during a refresh */

static void
blob_of(struct curl_blob *blob, const char *pem)
{
	blob->data = pem ? MemoryContextStrdup(tls_cxt, pem) : NULL;
	blob->len = pem ? strlen(pem) : 0;
	blob->flags = CURL_BLOB_NOCOPY;
}

static void
unref(WiSourceTls *conf)
{
	if (--conf->refs > 0)
		return;
	if (conf->key.data)
		explicit_bzero(conf->key.data, conf->key.len);
	if (conf->ca.data)
		pfree(conf->ca.data);
	if (conf->cert.data)
		pfree(conf->cert.data);
	if (conf->key.data)
		pfree(conf->key.data);
	if (conf->proxy)
		pfree(conf->proxy);
	pfree(conf->source);
	pfree(conf);
}

static void
release_list(WiSourceTls *list)
{
	while (list != NULL)
	{
		WiSourceTls *next = list->next;

		unref(list);
		list = next;
	}
}

/* A read of every source begins: the entries made until the end replace the current ones. */
void
wi_source_tls_begin_refresh(void)
{
	if (tls_cxt == NULL)
		tls_cxt = AllocSetContextCreate(TopMemoryContext, "webhook_ingest source TLS", ALLOCSET_SMALL_SIZES);
	release_list(previous);		/* a refresh that did not end */
	previous = current;
	current = NULL;
}

/* One source's settings (each NULL when unset). */
void
wi_source_tls_refresh(const char *source, const char *ca, const char *cert, const char *key, const char *proxy)
{
	WiSourceTls *conf;

	if (ca == NULL && cert == NULL && proxy == NULL)
		return;
	conf = MemoryContextAllocZero(tls_cxt, sizeof(WiSourceTls));
	conf->source = MemoryContextStrdup(tls_cxt, source);
	blob_of(&conf->ca, ca);
	/* a certificate without its key (written around _set_tls_client) is presented as none */
	blob_of(&conf->cert, key ? cert : NULL);
	blob_of(&conf->key, cert ? key : NULL);
	conf->proxy = proxy ? MemoryContextStrdup(tls_cxt, proxy) : NULL;
	conf->refs = 1;
	conf->next = current;
	current = conf;
}

/* The read is complete: the entries before it go when no fetch uses them. */
void
wi_source_tls_end_refresh(void)
{
	release_list(previous);
	previous = NULL;
}

/* The entry of a source, referenced for one fetch, or NULL if it has none. */
WiSourceTls *
wi_source_tls_acquire(const char *source)
{
	for (WiSourceTls *conf = current; conf != NULL; conf = conf->next)
		if (strcmp(conf->source, source) == 0)
		{
			conf->refs++;
			return conf;
		}
	return NULL;
}

void
wi_source_tls_release(WiSourceTls *conf)
{
	if (conf != NULL)
		unref(conf);
}
