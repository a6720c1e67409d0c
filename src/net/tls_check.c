/*
 * tls_check.c
 *		The checks of a source's TLS settings, called by add_source,
 *		alter_source and sources_guard: tls_ca must be PEM certificates and
 *		nothing else, tls_client_cert a PEM certificate (its chain may
 *		follow), tls_client_key an unencrypted PEM private key that belongs
 *		to that certificate.  Parsed with OpenSSL, the library libcurl uses
 *		here, so what passes is what the worker's fetches can load.
 *
 *		A key is a secret: no message quotes it, nor OpenSSL's reasons (they
 *		could quote what they read), and no error raised while a key is an
 *		argument is logged with its statement (errhidestmt).  OpenSSL's error queue is cleared after
 *		each check, and everything is freed before an error is raised.
 *
 * IDENTIFICATION
 *		src/net/tls_check.c
 */
#include "postgres.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "fmgr.h"
#include "utils/builtins.h"

#include "webhook_ingest.h"
#include "compat.h"

PG_FUNCTION_INFO_V1(webhook_ingest_check_tls_ca);
PG_FUNCTION_INFO_V1(webhook_ingest_check_tls_client);

/* A CA bundle as large as a distribution's whole one (about 220 kB) fits. */
#define WI_MAX_PEM_BYTES	(1024 * 1024)

typedef enum PemVerdict
{
	PEM_OK,
	PEM_EMPTY,					/* no PEM block at all */
	PEM_NOT_CERTIFICATE,		/* a block that is not a certificate, or does not parse */
} PemVerdict;

static void
check_size(const char *what, text *pem, bool hide_stmt)
{
	if (VARSIZE_ANY_EXHDR(pem) > WI_MAX_PEM_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errhidestmt(hide_stmt),
				 errmsg("%s is too long", what),
				 errdetail("It is %d bytes; the limit is %d bytes.", (int) VARSIZE_ANY_EXHDR(pem),
						   WI_MAX_PEM_BYTES)));
}

/*
 * Every PEM block of pem, which must all be certificates; *count says how
 * many.  Text between blocks (comments, as in the system's bundle) is fine.
 * With leaf, the first certificate is returned in it (the caller frees it).
 */
static PemVerdict
read_certificates(text *pem, int *count, X509 **leaf)
{
	BIO		   *bio = BIO_new_mem_buf(VARDATA_ANY(pem), (int) VARSIZE_ANY_EXHDR(pem));
	PemVerdict	verdict = PEM_OK;
	char	   *name = NULL;
	char	   *header = NULL;
	unsigned char *data = NULL;
	long		len;

	*count = 0;
	if (leaf)
		*leaf = NULL;
	if (bio == NULL)
		return PEM_EMPTY;
	while (PEM_read_bio(bio, &name, &header, &data, &len) == 1)
	{
		const unsigned char *p = data;
		X509	   *cert = strcmp(name, PEM_STRING_X509) == 0 || strcmp(name, PEM_STRING_X509_OLD) == 0 ||
			strcmp(name, PEM_STRING_X509_TRUSTED) == 0 ? d2i_X509(NULL, &p, len) : NULL;

		OPENSSL_free(name);
		OPENSSL_free(header);
		OPENSSL_free(data);
		if (cert == NULL)
		{
			verdict = PEM_NOT_CERTIFICATE;
			break;
		}
		if (leaf && *leaf == NULL)
			*leaf = cert;
		else
			X509_free(cert);
		(*count)++;
	}
	BIO_free(bio);
	ERR_clear_error();
	if (verdict == PEM_OK && *count == 0)
		verdict = PEM_EMPTY;
	if (verdict != PEM_OK && leaf && *leaf)
	{
		X509_free(*leaf);
		*leaf = NULL;
	}
	return verdict;
}

static void
refuse_certificates(const char *what, PemVerdict verdict, int good, bool hide_stmt)
{
	if (verdict == PEM_EMPTY)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errhidestmt(hide_stmt),
				 errmsg("%s holds no PEM certificate", what),
				 errhint("Pass certificates as PEM text, each from \"-----BEGIN CERTIFICATE-----\" to \"-----END CERTIFICATE-----\".")));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errhidestmt(hide_stmt),
			 errmsg("%s is not a list of PEM certificates", what),
			 errdetail("PEM block %d is not a certificate that can be read.", good + 1)));
}

/* A passphrase callback that has none: an encrypted key does not load. */
static int
no_passphrase(char *buf, int size, int rwflag, void *userdata)
{
	return -1;
}

/*
 * _check_tls_ca(tls_ca text): one or more PEM certificates, nothing else.
 */
Datum
webhook_ingest_check_tls_ca(PG_FUNCTION_ARGS)
{
	text	   *pem = PG_GETARG_TEXT_PP(0);
	int			count;
	PemVerdict	verdict;

	check_size("tls_ca", pem, false);
	verdict = read_certificates(pem, &count, NULL);
	if (verdict != PEM_OK)
		refuse_certificates("tls_ca", verdict, count, false);
	PG_RETURN_VOID();
}

/* The private key of pem, or NULL; what went wrong in *encrypted. */
static EVP_PKEY *
read_key(text *pem, bool *encrypted)
{
	BIO		   *bio = BIO_new_mem_buf(VARDATA_ANY(pem), (int) VARSIZE_ANY_EXHDR(pem));
	EVP_PKEY   *key = NULL;

	*encrypted = false;
	if (bio == NULL)
		return NULL;
	key = PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL);
	BIO_free(bio);
	/* (the key is not copied to look: a copy would outlive the check) */
	if (key == NULL)
		*encrypted = memmem(VARDATA_ANY(pem), VARSIZE_ANY_EXHDR(pem), "ENCRYPTED", 9) != NULL;
	ERR_clear_error();
	return key;
}

/*
 * _check_tls_client(tls_client_cert text, tls_client_key text, need_key
 * boolean): both or neither (need_key false: the certificate alone); a PEM
 * certificate (its chain may follow), and an unencrypted PEM key that is
 * the certificate's.
 */
Datum
webhook_ingest_check_tls_client(PG_FUNCTION_ARGS)
{
	bool		need_key = PG_NARGS() < 3 || PG_ARGISNULL(2) || PG_GETARG_BOOL(2);
	text	   *cert_pem = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);
	text	   *key_pem = PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1);
	X509	   *leaf = NULL;
	EVP_PKEY   *key = NULL;
	bool		encrypted;
	bool		matches;
	int			count;
	PemVerdict	verdict;

	/*
	 * The statement that passed a key is not logged beside any error of
	 * this check: the log hook (log_redact.c) knows a key by its PEM header,
	 * and a key refused here may have none (its base64 body alone).
	 */
	bool		hide = key_pem != NULL;

	if (need_key && (cert_pem == NULL) != (key_pem == NULL))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errhidestmt(hide),
				 errmsg("tls_client_cert and tls_client_key go together"),
				 errhint("Pass both, or reset_tls_client => true in alter_source to drop both.")));
	if (cert_pem != NULL)
	{
		check_size("tls_client_cert", cert_pem, hide);
		verdict = read_certificates(cert_pem, &count, &leaf);
		if (verdict != PEM_OK)
			refuse_certificates("tls_client_cert", verdict, count, hide);
	}
	if (key_pem == NULL || !need_key)
	{
		X509_free(leaf);
		PG_RETURN_VOID();
	}
	check_size("tls_client_key", key_pem, true);
	key = read_key(key_pem, &encrypted);
	if (key == NULL)
	{
		X509_free(leaf);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errhidestmt(true),
				 errmsg(encrypted ? "tls_client_key is encrypted" : "tls_client_key is not a PEM private key"),
				 errhint(encrypted ? "Pass the key without a passphrase: the worker has nobody to ask for one."
						 : "Pass the key as PEM text, from \"-----BEGIN PRIVATE KEY-----\" (or RSA or EC PRIVATE KEY) to its END line.")));
	}
	matches = leaf == NULL || X509_check_private_key(leaf, key) == 1;
	X509_free(leaf);
	EVP_PKEY_free(key);
	ERR_clear_error();
	if (!matches)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errhidestmt(true),
				 errmsg("tls_client_key is not the key of tls_client_cert"),
				 errhint("The first certificate in tls_client_cert must be the one the key belongs to.")));
	PG_RETURN_VOID();
}
