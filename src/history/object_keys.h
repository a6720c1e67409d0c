/*
 * object_keys.h
 *		The keys that find an object's packed jobs (object_keys.c).
 *
 * IDENTIFICATION
 *		src/history/object_keys.h
 */
#ifndef WI_OBJECT_KEYS_H
#define WI_OBJECT_KEYS_H

#include "postgres.h"

#include "utils/array.h"

extern void wi_object_probe(ArrayType *ids, Datum *probe, Datum *checks);

#endif							/* WI_OBJECT_KEYS_H */
