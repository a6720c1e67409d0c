/*
 * source_tls.c
 *		The worker's copy of each source's TLS settings (tls_ca,
 *		tls_client_cert and its key) and proxy, read with the sources' other
 *		settings whenever they change (job_store.c read_sources).  A fetch
 *		takes a reference to its source's entry when it is claimed and drops
 *		it when its curl handle is gone, so libcurl is given the PEM blobs
 *		without a copy per transfer (CURL_BLOB_NOCOPY) and a source changed
 *		meanwhile does not pull them from under a transfer in flight.  Each
 *		entry remembers the source's updated_at as read: a claim that sees a
 *		newer row (a change committed since the read) gets an entry of its
 *		own, made from the claim's row, so a fetch's URL, headers and TLS
 *		settings always come from one version of its source.
 *
 *		A source's CAs are parsed once, into an OpenSSL X509_STORE that every
 *		connection's SSL_CTX then shares (http.c installs it): libcurl would
 *		otherwise copy the PEM into each connection and parse it at each
 *		handshake, blocking the worker for as long (a 220 kB bundle on 1 000
 *		connections: 522 MB and handshakes timing out, audit F3, TAP 111).
 *		libcurl is given a tag instead, the first certificate behind a line
 *		with the SHA-256 of the whole PEM, so its connection and TLS session
 *		matching still tell different CA sets apart.
 *
 *		A read keeps the entry of a source whose settings did not change
 *		(the same PEM blobs and proxy as the read before): its CAs are not
 *		parsed again.  Every change of any source (a pause, a weight, an
 *		alter of another source) makes the worker read all of them, and a
 *		distribution's bundle takes about 20 ms to parse: with tens of
 *		sources holding one, each such change stalled the worker for as
 *		long (audit 0.7.0 second pass, T1, TAP 116).  A claim that sees a
 *		newer row with the same settings shares the current entry too.
 *
 *		A key's bytes are zeroed before its memory is freed.
 *
 * IDENTIFICATION
 *		src/net/source_tls.c
 */
#include "postgres.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "nodes/pg_list.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "webhook_ingest.h"
#include "source_tls.h"

static MemoryContext tls_cxt = NULL;
static List *current = NIL;		/* the entries of the last complete read */
static List *previous = NIL;	/* those of the read before, during a refresh */

/* The current entries by source name (rebuilt at each read), and the previous ones during a read. */
typedef struct ByName
{
	char		source[WI_SOURCE_NAME_LEN];
	WiSourceTls *conf;
} ByName;
static MemoryContext by_name_cxt = NULL;
static HTAB *by_name = NULL;
static MemoryContext prev_by_name_cxt = NULL;
static HTAB *prev_by_name = NULL;

static void
blob_of(struct curl_blob *blob, const char *pem)
{
	blob->data = pem ? MemoryContextStrdup(tls_cxt, pem) : NULL;
	blob->len = pem ? strlen(pem) : 0;
	blob->flags = CURL_BLOB_NOCOPY;
}

/*
 * conf->ca parsed into conf->ca_store, and the tag libcurl gets instead;
 * nothing if it does not parse (it was checked when set: then libcurl gets
 * the PEM itself and says what is wrong).
 */
static void
parse_ca(WiSourceTls *conf)
{
	BIO		   *bio = BIO_new_mem_buf(conf->ca.data, (int) conf->ca.len);
	X509_STORE *store = X509_STORE_new();
	X509	   *cert;
	X509	   *first = NULL;
	unsigned char digest[32];
	char		hex[65];
	char	   *first_pem = NULL;
	long		first_len = 0;
	BIO		   *out = NULL;
	int			n = 0;

	if (bio == NULL || store == NULL)
		goto fail;
	while ((cert = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL)
	{
		if (X509_STORE_add_cert(store, cert) != 1)
		{
			X509_free(cert);
			goto fail;
		}
		if (first == NULL)
			first = cert;
		else
			X509_free(cert);
		n++;
	}
	if (n == 0 || EVP_Digest(conf->ca.data, conf->ca.len, digest, NULL, EVP_sha256(), NULL) != 1 ||
		(out = BIO_new(BIO_s_mem())) == NULL || PEM_write_bio_X509(out, first) != 1)
		goto fail;
	first_len = BIO_get_mem_data(out, &first_pem);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", digest[i]);
	conf->ca_tag.data = psprintf("# webhook_ingest tls_ca sha256:%s\n%.*s", hex, (int) first_len, first_pem);
	conf->ca_tag.len = strlen(conf->ca_tag.data);
	conf->ca_tag.flags = CURL_BLOB_NOCOPY;
	conf->ca_store = store;
	store = NULL;
fail:
	X509_free(first);
	BIO_free(out);
	BIO_free(bio);
	X509_STORE_free(store);
	ERR_clear_error();
}

static void
unref(WiSourceTls *conf)
{
	if (--conf->refs > 0)
		return;
	if (conf->ca_store)
		X509_STORE_free((X509_STORE *) conf->ca_store);
	if (conf->ca_tag.data)
		pfree(conf->ca_tag.data);
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
release_list(List *list)
{
	ListCell   *lc;

	foreach(lc, list)
		unref((WiSourceTls *) lfirst(lc));
	list_free(list);
}

static void
ensure_context(void)
{
	if (tls_cxt == NULL)
		tls_cxt = AllocSetContextCreate(TopMemoryContext, "webhook_ingest source TLS", ALLOCSET_SMALL_SIZES);
}

/* A read of every source begins: the entries made until the end replace the current ones. */
void
wi_source_tls_begin_refresh(void)
{
	ensure_context();
	release_list(previous);		/* a refresh that did not end */
	previous = current;
	current = NIL;
	if (prev_by_name_cxt != NULL)
		MemoryContextDelete(prev_by_name_cxt);
	prev_by_name_cxt = by_name_cxt;
	prev_by_name = by_name;
	by_name_cxt = AllocSetContextCreate(tls_cxt, "webhook_ingest source TLS by name", ALLOCSET_SMALL_SIZES);
	by_name = NULL;
}

static WiSourceTls *
make_entry(const char *source, TimestampTz seen_at, const char *ca, const char *cert, const char *key,
		   const char *proxy)
{
	WiSourceTls *conf = MemoryContextAllocZero(tls_cxt, sizeof(WiSourceTls));

	conf->source = MemoryContextStrdup(tls_cxt, source);
	conf->seen_at = seen_at;
	conf->any = ca != NULL || cert != NULL || proxy != NULL;
	blob_of(&conf->ca, ca);
	if (ca != NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(tls_cxt);

		parse_ca(conf);
		MemoryContextSwitchTo(old);
	}
	/* a certificate without its key (written around _set_tls_client) is presented as none */
	blob_of(&conf->cert, key ? cert : NULL);
	blob_of(&conf->key, cert ? key : NULL);
	conf->proxy = proxy ? MemoryContextStrdup(tls_cxt, proxy) : NULL;
	conf->refs = 1;
	return conf;
}

static bool
same_text(const char *a, const char *b)
{
	return a == NULL ? b == NULL : b != NULL && strcmp(a, b) == 0;
}

/* Does conf hold these settings (as make_entry would keep them)? */
static bool
same_settings(WiSourceTls *conf, const char *ca, const char *cert, const char *key, const char *proxy)
{
	return same_text(conf->ca.data, ca) && same_text(conf->cert.data, key ? cert : NULL) &&
		same_text(conf->key.data, cert ? key : NULL) && same_text(conf->proxy, proxy);
}

static WiSourceTls *
lookup(HTAB *table, const char *source)
{
	ByName	   *entry;

	if (table == NULL || strlen(source) >= WI_SOURCE_NAME_LEN)
		return NULL;
	entry = hash_search(table, source, HASH_FIND, NULL);
	return entry ? entry->conf : NULL;
}

/*
 * One source's settings (each NULL when unset), as of its updated_at
 * seen_at: the entry of the read before if they are the same.
 */
void
wi_source_tls_refresh(const char *source, TimestampTz seen_at, const char *ca, const char *cert, const char *key,
					  const char *proxy)
{
	WiSourceTls *conf = lookup(prev_by_name, source);
	ByName	   *entry;
	bool		found;
	MemoryContext old;

	if (conf != NULL && same_settings(conf, ca, cert, key, proxy))
	{
		conf->refs++;			/* current again; the previous list's reference goes at the end */
		conf->seen_at = seen_at;
	}
	else
		conf = make_entry(source, seen_at, ca, cert, key, proxy);
	old = MemoryContextSwitchTo(tls_cxt);
	current = lappend(current, conf);
	MemoryContextSwitchTo(old);
	if (by_name == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = WI_SOURCE_NAME_LEN;
		ctl.entrysize = sizeof(ByName);
		ctl.hcxt = by_name_cxt;
		by_name = hash_create("webhook_ingest source TLS", 64, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	if (strlen(source) < WI_SOURCE_NAME_LEN)
	{
		entry = hash_search(by_name, source, HASH_ENTER, &found);
		entry->conf = conf;
	}
}

static WiSourceTls *
current_entry(const char *source)
{
	return lookup(by_name, source);
}

/* The updated_at of the source as last read (0: not read). */
TimestampTz
wi_source_tls_seen_at(const char *source)
{
	WiSourceTls *conf = current_entry(source);

	return conf ? conf->seen_at : 0;
}

/* The read is complete: the entries before it go when no fetch uses them. */
void
wi_source_tls_end_refresh(void)
{
	release_list(previous);
	previous = NIL;
	if (prev_by_name_cxt != NULL)
		MemoryContextDelete(prev_by_name_cxt);
	prev_by_name_cxt = NULL;
	prev_by_name = NULL;
}

/* The entry of a source, referenced for one fetch, or NULL if it sets nothing. */
WiSourceTls *
wi_source_tls_acquire(const char *source)
{
	WiSourceTls *conf = current_entry(source);

	if (conf == NULL || !conf->any)
		return NULL;
	conf->refs++;
	return conf;
}

/*
 * For one fetch whose claim saw a newer version of its source than the last
 * read: an entry of its own from the claim's row (NULL if it sets nothing).
 */
WiSourceTls *
wi_source_tls_of_claim(const char *source, const char *ca, const char *cert, const char *key, const char *proxy)
{
	WiSourceTls *conf;

	if (ca == NULL && cert == NULL && proxy == NULL)
		return NULL;
	conf = lookup(by_name, source);
	if (conf != NULL && same_settings(conf, ca, cert, key, proxy))
	{
		conf->refs++;
		return conf;
	}
	ensure_context();
	return make_entry(source, 0, ca, cert, key, proxy);
}

void
wi_source_tls_release(WiSourceTls *conf)
{
	if (conf != NULL)
		unref(conf);
}
