/*
 * signature_sql.h
 *		The backend glue of signature verification (signature_sql.c):
 *		verify_signature's checks, the request's headers from jsonb, scheme
 *		names and tolerances.
 *
 * IDENTIFICATION
 *		src/intake/signature_sql.h
 */
#ifndef WI_SIGNATURE_SQL_H
#define WI_SIGNATURE_SQL_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "utils/array.h"
#include "utils/jsonb.h"

#include "signature.h"

/*
 * The headers of a jsonb object of name -> value, pointing into it (keep it
 * alive).  A string value is the header's value; an array of strings is a
 * repeated header, its elements joined with ", " as HTTP does; any other
 * value (null, number, boolean, object, an empty array or one holding
 * anything but strings) is skipped, as if the header were absent.  Not an
 * object: ERROR 22023.
 */
extern WiHeader *wi_headers_from_jsonb(Jsonb *headers, int *nheaders);

/*
 * wi_sig_verify with now = GetCurrentTimestamp(), the body's bytes, the
 * non-NULL elements of secrets (text[]) and the tolerance in whole seconds
 * (fractions dropped; a month counts 30 days, a year 365.25).  A negative
 * tolerance: ERROR 22023.  An unusable secret, or none: WI_SIG_BAD_SECRET,
 * returned, not raised.
 */
extern WiSigStatus wi_check_signature(WiSigScheme scheme, const WiHeader *headers, int nheaders,
									  struct varlena *body, ArrayType *secrets, const Interval *tolerance);

/* The scheme a name means; unknown: ERROR 22023. */
extern WiSigScheme wi_scheme_of(text *name);

/* A secret the scheme cannot sign with (wi_sig_secret_valid): ERROR 22023. */
extern void wi_check_secret_usable(WiSigScheme scheme, const char *secret, size_t len);

/* The tolerance in whole seconds; negative: ERROR 22023. */
extern int64 wi_tolerance_seconds(const Interval *tolerance);

#endif							/* WI_SIGNATURE_SQL_H */
