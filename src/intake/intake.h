/*
 * intake.h
 *		A source's intake settings: how receive() verifies and reads a
 *		request (intake.c; kept with each source in source_cache.c).
 *
 * IDENTIFICATION
 *		src/intake/intake.h
 */
#ifndef WI_INTAKE_H
#define WI_INTAKE_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "utils/array.h"
#include "utils/jsonpath.h"

#include "signature.h"

typedef struct WiSourceIntake
{
	text	   *signature_scheme;	/* NULL: none set */
	ArrayType  *signing_secrets;	/* text[]; NULL: none */
	Interval	signature_tolerance;
	JsonPath   *external_id_path;	/* NULL: none set */
	JsonPath   *event_id_path;	/* NULL: the scheme's delivery id */
} WiSourceIntake;

#endif							/* WI_INTAKE_H */
