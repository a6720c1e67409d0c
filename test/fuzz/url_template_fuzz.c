/*
 * test/fuzz/url_template_fuzz.c
 *		libFuzzer target for src/net/url_template.c, the {external_id} expansion.
 *		The input is "TEMPLATE\0ID" (ID may hold NULs), or, without a NUL,
 *		an ID alone under a fixed template.  Checks invariants, not only the
 *		absence of crashes:
 *		- the segment holds only RFC 3986 unreserved characters and %XX with
 *		  uppercase hex, so never '/', '?', '#' or a bare '%' from the id;
 *		- it is never "." or "..", nor empty for a non-empty id;
 *		- percent-decoding it gives the id back byte for byte, and a byte is
 *		  encoded exactly when it is not unreserved (or the id is "."/"..");
 *		- the expansion is the template with each placeholder, left to right
 *		  and non-overlapping, replaced by the segment, everything else kept;
 *		- libcurl, which fetches the URL, parses the fixed template's result
 *		  with the segment as one path segment and the query untouched.
 *		A broken invariant aborts (a crash for libFuzzer).
 */
#include "postgres_fe.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <curl/curl.h>

#include "url_template.h"

#define PLACEHOLDER		"{external_id}"
#define PLACEHOLDER_LEN	13
#define FIXED_PREFIX	"https://api.example.com/v1/"
#define FIXED_SUFFIX	"?expand=all#top"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define require(cond) \
	do { if (!(cond)) { fprintf(stderr, "invariant broken at %s:%d: %s\n", __FILE__, __LINE__, #cond); abort(); } } while (0)

static bool
unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		c == '-' || c == '.' || c == '_' || c == '~';
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;					/* lowercase hex is not what we emit */
}

/* The segment's own invariants, and that it decodes to id. */
static void
check_segment(const char *seg, int seglen, const char *id, int idlen)
{
	bool		dots = (idlen == 1 && id[0] == '.') || (idlen == 2 && memcmp(id, "..", 2) == 0);
	int			j = 0;

	require(idlen == 0 || seglen > 0);
	require(!(seglen == 1 && seg[0] == '.'));
	require(!(seglen == 2 && memcmp(seg, "..", 2) == 0));
	for (int i = 0; i < seglen; j++)
	{
		require(j < idlen);
		require(seg[i] != '/' && seg[i] != '?' && seg[i] != '#');
		if (seg[i] == '%')
		{
			require(i + 2 < seglen);
			require(hexval(seg[i + 1]) >= 0 && hexval(seg[i + 2]) >= 0);
			require((unsigned char) id[j] == hexval(seg[i + 1]) * 16 + hexval(seg[i + 2]));
			require(dots || !unreserved((unsigned char) id[j]));
			i += 3;
		}
		else
		{
			require(unreserved((unsigned char) seg[i]));
			require(seg[i] == id[j]);
			require(!dots);
			i++;
		}
	}
	require(j == idlen);
}

/* What the expansion must be, built another way: a byte-by-byte scan. */
static void
check_expansion(const char *tmpl, const char *out, int outlen, const char *seg, int seglen)
{
	size_t		n = strlen(tmpl);
	int			o = 0;

	for (size_t i = 0; i < n;)
	{
		if (n - i >= PLACEHOLDER_LEN && memcmp(tmpl + i, PLACEHOLDER, PLACEHOLDER_LEN) == 0)
		{
			require(outlen - o >= seglen && memcmp(out + o, seg, seglen) == 0);
			o += seglen;
			i += PLACEHOLDER_LEN;
		}
		else
		{
			require(o < outlen && out[o] == tmpl[i]);
			o++;
			i++;
		}
	}
	require(o == outlen);
}

/* libcurl sees the fixed template's segment as one segment of the path. */
static void
check_with_curl(const char *out, const char *seg, int seglen)
{
	CURLU	   *u = curl_url();
	char	   *path = NULL;
	char	   *query = NULL;

	require(u != NULL);
	/* As src/net/http.c sends it: CURLOPT_PATH_AS_IS (libcurl 8 drops "%2E" segments otherwise). */
	require(curl_url_set(u, CURLUPART_URL, out, CURLU_PATH_AS_IS) == CURLUE_OK);
	require(curl_url_get(u, CURLUPART_PATH, &path, 0) == CURLUE_OK);
	require(curl_url_get(u, CURLUPART_QUERY, &query, 0) == CURLUE_OK);
	require(strlen(path) == strlen("/v1/") + seglen);
	require(memcmp(path, "/v1/", 4) == 0 && memcmp(path + 4, seg, seglen) == 0);
	require(strcmp(query, "expand=all") == 0);
	curl_free(path);
	curl_free(query);
	curl_url_cleanup(u);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *nul = memchr(data, '\0', size);
	char	   *tmpl;
	const char *id;
	int			idlen;
	bool		fixed = (nul == NULL);
	StringInfoData seg;
	StringInfoData out;

	if (size > 1000000)
		return 0;
	if (fixed)
	{
		tmpl = strdup(FIXED_PREFIX PLACEHOLDER FIXED_SUFFIX);
		id = (const char *) data;
		idlen = (int) size;
	}
	else
	{
		tmpl = strndup((const char *) data, nul - (const char *) data);
		id = nul + 1;
		idlen = (int) (size - (nul - (const char *) data) - 1);
	}

	initStringInfo(&seg);
	wi_append_path_segment(&seg, id, idlen);
	check_segment(seg.data, seg.len, id, idlen);

	initStringInfo(&out);
	wi_expand_url_template(&out, tmpl, id, idlen);
	require((int) strlen(out.data) == out.len);	/* a NUL of the id is %00 */
	check_expansion(tmpl, out.data, out.len, seg.data, seg.len);

	/* The fixed template: prefix and suffix intact, one segment between. */
	if (fixed)
	{
		require(out.len == (int) (strlen(FIXED_PREFIX) + seg.len + strlen(FIXED_SUFFIX)));
		require(memcmp(out.data, FIXED_PREFIX, strlen(FIXED_PREFIX)) == 0);
		require(strcmp(out.data + out.len - strlen(FIXED_SUFFIX), FIXED_SUFFIX) == 0);
		if (idlen > 0)
			check_with_curl(out.data, seg.data, seg.len);
	}

	pfree(seg.data);
	pfree(out.data);
	free(tmpl);
	return 0;
}
