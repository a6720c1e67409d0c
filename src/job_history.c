/*
 * job_history.c
 *		Reading the packed history: done jobs kept a block of 128 ids to a
 *		row of job_history_packed (the storage round packs them, see
 *		_pack_history in the extension's SQL).
 *
 *		_packed_jobs(job_id, external_ids, finished_from, finished_to)
 *		returns them one row per job: all of them, or only the one with that
 *		id, or those of these external ids, or those that finished in
 *		[finished_from, finished_to] (either bound may be NULL), and only
 *		those its caller may read (the admin role all, an app role those of
 *		the sources it may enqueue into: the jobs view's rule; to an app role
 *		only the columns the view lets it read, or needs for them).  It
 *		checks its caller and then reads the table as its owner, as enqueue()
 *		does (access.c).  Each narrowing is an index's: the block index for
 *		an id, the object keys' GIN index for external ids (object_keys.c),
 *		the GiST index on each row's span of finished_at for a time window.
 *
 *		The jobs view calls _packed_jobs() for every packed job; a row of
 *		it is an array element, which no index of the table can find.  So
 *		a planner hook gives the call what a query compares its columns
 *		with: restrictions "id = v", "external_id = v" (or = ANY (array)),
 *		"finished_at < v" (<=, >, >=, =) on that function scan, v a
 *		constant, a parameter or a stable expression of them (now() -
 *		interval '10 s'), pushed into the view by the planner, turn
 *		_packed_jobs() into _packed_jobs(v, ...).  The restrictions stay and
 *		are checked as before, so the narrowed call needs only to return
 *		every job they could accept; any other query reads every packed
 *		row, as a scan of the history would.  A support function tells the
 *		planner how few rows a narrowed call returns.
 *
 *		Between installing this library and ALTER EXTENSION UPDATE, the
 *		0.8.0 definition, _packed_jobs(job_id) with nine columns, calls it:
 *		it then reads the table 0.8.0 made (no errors) and is narrowed by id
 *		only, as 0.8.0's was.
 *
 * IDENTIFICATION
 *		src/job_history.c
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/supportnodes.h"
#include "optimizer/clauses.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "parser/parse_coerce.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "webhook_ingest.h"
#include "access.h"
#include "object_keys.h"

PG_FUNCTION_INFO_V1(webhook_ingest_packed_jobs);
PG_FUNCTION_INFO_V1(webhook_ingest_packed_jobs_support);
PG_FUNCTION_INFO_V1(webhook_ingest_packed_jobs_plan);

#define PACKED_JOBS_FUNC	"_packed_jobs"
#define PACKED_JOBS_NARGS	4	/* job_id, external_ids, finished_from, finished_to */
#define PACKED_JOBS_NATTS	10	/* its OUT columns; the 11th column read is the source's name */
#define PACKED_JOBS_NARGS_080	1	/* 0.8.0's: job_id; nine columns (no last_error) */

/* The OUT columns a restriction may narrow the call by (attribute numbers). */
#define ATT_ID				1
#define ATT_FINISHED_AT		2
#define ATT_EXTERNAL_ID		9

/*
 * Every packed job, or those of a narrowing; with its source's name.
 * ($1 id, $2 external ids, $3 finished from, $4 finished to, $5 the ids'
 * buckets, $6 their checks: wi_object_probe.)  All of them, or a time
 * window's: every array of the rows unnested.  An id or external ids: one
 * array unnested and compared, and only the matching elements read from the
 * others (each array of a row is a TOAST value of its own, read as a whole
 * for each element read: right for the one job of a row an object has, not
 * for the many of a window).
 */
#define ALL_JOBS_SQL(errors_array, errors) \
	"SELECT u.id, u.finished_at, u.created_at, u.started_at, u.source_id, u.events, u.attempts, " \
	"       u.last_status, u.external_id, " errors ", s.name " \
	"  FROM webhook_ingest.job_history_packed p " \
	"  CROSS JOIN LATERAL ROWS FROM (pg_catalog.unnest(p.ids), pg_catalog.unnest(p.finished), " \
	"       pg_catalog.unnest(p.created), pg_catalog.unnest(p.started), pg_catalog.unnest(p.source_ids), " \
	"       pg_catalog.unnest(p.events), pg_catalog.unnest(p.attempts), pg_catalog.unnest(p.statuses), " \
	"       pg_catalog.unnest(p.external_ids)" errors_array ") " \
	"       AS u(id, finished_at, created_at, started_at, source_id, events, attempts, last_status, external_id, " \
	"            last_error) " \
	"  JOIN webhook_ingest.sources s ON s.id OPERATOR(pg_catalog.=) u.source_id WHERE true "
#define MATCHING_JOBS_SQL(array, errors) \
	"SELECT p.ids[x.k], p.finished[x.k], p.created[x.k], p.started[x.k], p.source_ids[x.k], p.events[x.k], " \
	"       p.attempts[x.k], p.statuses[x.k], p.external_ids[x.k], " errors ", s.name " \
	"  FROM webhook_ingest.job_history_packed p " \
	"  CROSS JOIN LATERAL pg_catalog.unnest(p." array ") WITH ORDINALITY AS x(v, k) " \
	"  JOIN webhook_ingest.sources s ON s.id OPERATOR(pg_catalog.=) p.source_ids[x.k] WHERE true "
#define BY_ID_SQL \
	" AND p.block OPERATOR(pg_catalog.=) ($1 OPERATOR(pg_catalog.>>) 7) " \
	" AND $1 OPERATOR(pg_catalog.=) ANY (p.ids) AND x.v OPERATOR(pg_catalog.=) $1"
/* (rows packed before 0.10.0 and not keyed yet have no checks: their ids are read) */
#define BY_OBJECT_SQL \
	" AND webhook_ingest._object_keys(p.external_ids, p.object_bits) OPERATOR(pg_catalog.&&) $5 " \
	" AND (p.object_checks IS NULL OR p.object_checks OPERATOR(pg_catalog.&&) $6) " \
	" AND x.v OPERATOR(pg_catalog.=) ANY ($2)"
/* (a row's span is [its first finished_at, last_finished]; open above while last_finished is unknown) */
#define BY_TIME_SQL(finished) \
	" AND pg_catalog.tstzrange(p.finished_at, p.last_finished, '[]') " \
	"     OPERATOR(pg_catalog.&&) pg_catalog.tstzrange($3, $4, '[]') " \
	" AND " finished " OPERATOR(pg_catalog.>=) COALESCE($3, '-infinity') " \
	" AND " finished " OPERATOR(pg_catalog.<=) COALESCE($4, 'infinity')"
#define ERRORS			"p.errors[x.k]"
#define NO_ERRORS		"NULL::text"

/* The statements, by narrowing: none, objects, time, both; by id; 0.8.0's table, all and by id. */
#define BY_OBJECT	1
#define BY_TIME		2
#define BY_ID		4
#define OF_080		5
static const char *const packed_jobs_sql[7] = {
	ALL_JOBS_SQL(", pg_catalog.unnest(p.errors)", "u.last_error"),
	MATCHING_JOBS_SQL("external_ids", ERRORS) BY_OBJECT_SQL,
	ALL_JOBS_SQL(", pg_catalog.unnest(p.errors)", "u.last_error") BY_TIME_SQL("u.finished_at"),
	MATCHING_JOBS_SQL("external_ids", ERRORS) BY_OBJECT_SQL BY_TIME_SQL("p.finished[x.k]"),
	MATCHING_JOBS_SQL("ids", ERRORS) BY_ID_SQL,
	ALL_JOBS_SQL("", NO_ERRORS),
	MATCHING_JOBS_SQL("ids", NO_ERRORS) BY_ID_SQL
};

static Oid	packed_jobs_argtypes[6] = {INT8OID, TEXTARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT4ARRAYOID,
	INT2ARRAYOID};

static set_rel_pathlist_hook_type prev_set_rel_pathlist_hook = NULL;

/* The sources seen in one call, and whether the caller may read their jobs. */
typedef struct SourceSeen
{
	int32		source_id;
	bool		readable;
} SourceSeen;

static bool
may_read(int32 source_id, text *name, Oid caller, SourceSeen *seen, int *nseen)
{
	WiSourceAccess access;
	bool		readable;

	for (int i = 0; i < *nseen; i++)
		if (seen[i].source_id == source_id)
			return seen[i].readable;
	readable = wi_source_lookup(name, false, &access) && wi_source_admits(&access, caller);
	if (*nseen < 64)
	{
		seen[*nseen].source_id = source_id;
		seen[(*nseen)++].readable = readable;
	}
	return readable;
}

/*
 * An app role may read a job's id, state and done_lsn through the jobs view
 * (a column grant), no more: of a packed job it gets the id, and the
 * finished_at and source_id the view needs for done_lsn and its row filter;
 * the rest NULL, so a direct call shows no more than the view would.
 */
static void
app_columns_only(bool *nulls)
{
	nulls[2] = nulls[3] = true;		/* created_at, started_at */
	for (int c = 5; c < PACKED_JOBS_NATTS; c++)
		nulls[c] = true;			/* events, attempts, last_status, external_id, last_error */
}

/*
 * Which statement the call's arguments pick, and its parameters: none
 * when the call can return nothing (a time window that ends before it
 * starts).
 */
static int
narrowing(FunctionCallInfo fcinfo, Datum *args, char *nulls)
{
	int			which = 0;

	for (int i = 0; i < 6; i++)
	{
		bool		given = i < PG_NARGS() && !PG_ARGISNULL(i);

		args[i] = given ? PG_GETARG_DATUM(i) : (Datum) 0;
		nulls[i] = given ? ' ' : 'n';
	}
	if (PG_NARGS() == PACKED_JOBS_NARGS_080)
		return OF_080 + (nulls[0] == ' ');
	if (!PG_ARGISNULL(0))
		return BY_ID;
	if (!PG_ARGISNULL(1))
	{
		wi_object_probe(PG_GETARG_ARRAYTYPE_P(1), &args[4], &args[5]);
		nulls[4] = nulls[5] = ' ';
		which |= BY_OBJECT;
	}
	if (!PG_ARGISNULL(2) || !PG_ARGISNULL(3))
	{
		if (!PG_ARGISNULL(2) && !PG_ARGISNULL(3) &&
			timestamp_cmp_internal(PG_GETARG_TIMESTAMPTZ(2), PG_GETARG_TIMESTAMPTZ(3)) > 0)
			return -1;
		which |= BY_TIME;
	}
	return which;
}

/*
 * The start of a call of either function below: its tuplestore, which
 * statement its arguments pick and its parameters, and then SPI as the
 * function's owner; false (nothing to read) when they pick none.
 */
static bool
begin_call(FunctionCallInfo fcinfo, int *which, Datum *args, char *nulls, WiSavedUser *saved)
{
	wi_init_srf(fcinfo);
	*which = narrowing(fcinfo, args, nulls);
	if (*which < 0)
		return false;
	wi_become_owner(fcinfo, saved);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	return true;
}

static void
end_call(const WiSavedUser *saved)
{
	SPI_finish();
	wi_restore_user(saved);
}

/*
 * _packed_jobs(job_id bigint, external_ids text[], finished_from
 * timestamptz, finished_to timestamptz), all DEFAULT NULL: see the file's
 * header.  Read through a cursor, a thousand rows at a time, into the
 * call's tuplestore (which spills to disk past work_mem).
 */
Datum
webhook_ingest_packed_jobs(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plans[lengthof(packed_jobs_sql)];
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			caller = GetUserId();
	Oid			admin = get_role_oid("webhook_ingest_admin", true);
	bool		sees_all = OidIsValid(admin) && has_privs_of_role(caller, admin);
	SourceSeen	seen[64];
	int			nseen = 0;
	Datum		args[6];
	char		nulls_in[6];
	int			which;
	WiSavedUser saved;
	Portal		cursor;

	if (!begin_call(fcinfo, &which, args, nulls_in, &saved))
		return (Datum) 0;
	wi_prepare_once(&plans[which], packed_jobs_sql[which], 6, packed_jobs_argtypes, false);
	cursor = SPI_cursor_open(NULL, plans[which], args, nulls_in, true);
	for (;;)
	{
		SPI_cursor_fetch(cursor, true, 1000);
		if (SPI_processed == 0)
			break;
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	row = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			Datum		values[PACKED_JOBS_NATTS + 1];
			bool		nulls[PACKED_JOBS_NATTS + 1];

			for (int c = 0; c <= PACKED_JOBS_NATTS; c++)
				values[c] = SPI_getbinval(row, desc, c + 1, &nulls[c]);
			if (!sees_all)
			{
				if (!may_read(DatumGetInt32(values[4]), DatumGetTextPP(values[PACKED_JOBS_NATTS]), caller, seen,
							  &nseen))
					continue;
				app_columns_only(nulls);
			}
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(cursor);
	end_call(&saved);
	return (Datum) 0;
}

/*
 * _packed_jobs_plan(job_id, external_ids, finished_from, finished_to):
 * EXPLAIN (COSTS OFF) of the statement _packed_jobs runs for these
 * arguments, planned for their values, a row (n, line) a line (none when
 * the call returns nothing without a statement).  For operators and the
 * plan tests.
 */
Datum
webhook_ingest_packed_jobs_plan(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		args[6];
	char		nulls[6];
	int			which;
	WiSavedUser saved;

	if (!begin_call(fcinfo, &which, args, nulls, &saved))
		return (Datum) 0;
	if (SPI_execute_with_args(psprintf("EXPLAIN (COSTS OFF) %s", packed_jobs_sql[which]), 6, packed_jobs_argtypes,
							  args, nulls, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not explain the packed history's statement");
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull[2] = {false, false};
		Datum		values[2];

		values[0] = Int32GetDatum((int32) r + 1);
		values[1] = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull[1]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}
	end_call(&saved);
	return (Datum) 0;
}

/*
 * How many rows a call returns, for the planner (SupportRequestRows): one
 * for an id, a few per external id, a few hundred for a time window, else
 * the function's ROWS.
 */
Datum
webhook_ingest_packed_jobs_support(PG_FUNCTION_ARGS)
{
	Node	   *req = (Node *) PG_GETARG_POINTER(0);
	SupportRequestRows *rows;
	FuncExpr   *call;
	List	   *args;

	if (!IsA(req, SupportRequestRows))
		PG_RETURN_POINTER(NULL);
	rows = (SupportRequestRows *) req;
	if (!IsA(rows->node, FuncExpr))
		PG_RETURN_POINTER(NULL);
	call = (FuncExpr *) rows->node;
	args = call->args;
	if (list_length(args) != PACKED_JOBS_NARGS)
		PG_RETURN_POINTER(NULL);
#define GIVEN(n) (!(IsA(list_nth(args, (n)), Const) && ((Const *) list_nth(args, (n)))->constisnull))
	if (GIVEN(0))
		rows->rows = 1;
	else if (GIVEN(1))
		rows->rows = 10;
	else if (GIVEN(2) || GIVEN(3))
		rows->rows = 200;
	else
		PG_RETURN_POINTER(NULL);
#undef GIVEN
	PG_RETURN_POINTER(rows);
}

/* Is this the call _packed_jobs() with no narrowing, in the extension's schema? */
static bool
is_packed_jobs_scan(RangeTblEntry *rte)
{
	RangeTblFunction *rtfunc;
	FuncExpr   *call;
	ListCell   *lc;
	char	   *name;

	if (rte->rtekind != RTE_FUNCTION || list_length(rte->functions) != 1 || rte->funcordinality)
		return false;
	rtfunc = linitial_node(RangeTblFunction, rte->functions);
	if (!IsA(rtfunc->funcexpr, FuncExpr))
		return false;
	call = (FuncExpr *) rtfunc->funcexpr;
	if (list_length(call->args) != PACKED_JOBS_NARGS && list_length(call->args) != PACKED_JOBS_NARGS_080)
		return false;
	foreach(lc, call->args)
		if (!IsA(lfirst(lc), Const) || !((Const *) lfirst(lc))->constisnull)
			return false;
	name = get_func_name(call->funcid);
	if (name == NULL || strcmp(name, PACKED_JOBS_FUNC) != 0)
		return false;
	return get_func_namespace(call->funcid) == get_namespace_oid(WI_SCHEMA_NAME, true);
}

/* Is any Param in the expression other than a parameter of the statement? */
static bool
has_internal_param(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Param))
		return ((Param *) node)->paramkind != PARAM_EXTERN;
	return expression_tree_walker(node, has_internal_param, context);
}

/*
 * A value fixed for the whole scan: a constant, a parameter of the
 * statement, or a stable expression of them; not NULL when a constant.
 */
static bool
is_scan_constant(Node *node)
{
	Node	   *bare = strip_implicit_coercions(node);

	if (IsA(bare, Const))
		return !((Const *) bare)->constisnull;
	return is_pseudo_constant_clause(bare) && !contain_subplans(bare) && !has_internal_param(bare, NULL);
}

/* The OUT column of the scan rel that this is a plain reference to, or 0. */
static AttrNumber
column_of(Node *node, Index rti)
{
	Var		   *var = (Var *) strip_implicit_coercions(node);

	if (!IsA(var, Var) || var->varno != rti || var->varlevelsup != 0)
		return 0;
	return var->varattno;
}

/* The btree operator family a column's own type sorts by. */
static Oid
btree_family(Oid type)
{
	Oid			opclass = GetDefaultOpClass(type, BTREE_AM_OID);

	return OidIsValid(opclass) ? get_opclass_family(opclass) : InvalidOid;
}

static Node *
as_type(Node *value, Oid type)
{
	return coerce_to_target_type(NULL, value, exprType(value), type, -1, COERCION_IMPLICIT,
								 COERCE_IMPLICIT_CAST, -1);
}

/* What the restrictions of the scan give the call. */
typedef struct Narrowing
{
	Node	   *id;				/* bigint */
	Node	   *external_ids;	/* text[] */
	List	   *from;			/* timestamptz lower bounds: the greatest */
	List	   *to;				/* upper bounds: the least */
} Narrowing;

/* "column op value" (either way round): what it says of the column. */
static void
narrow_by_comparison(OpExpr *op, Index rti, Narrowing *n)
{
	static const Oid types[] = {InvalidOid, INT8OID, TIMESTAMPTZOID};
	Node	   *value = lsecond(op->args);
	Oid			opno = op->opno;
	AttrNumber	att = column_of(linitial(op->args), rti);
	int			strategy;
	Node	   *coerced;

	if (att == 0)
	{
		att = column_of(value, rti);
		value = linitial(op->args);
		opno = get_commutator(opno);
	}
	if (att != ATT_ID && att != ATT_FINISHED_AT && att != ATT_EXTERNAL_ID)
		return;
	if (!OidIsValid(opno) || !is_scan_constant(value))
		return;
	strategy = get_op_opfamily_strategy(opno, btree_family(att == ATT_EXTERNAL_ID ? TEXTOID : types[att]));
	if (strategy == 0)
		return;
	coerced = as_type(value, att == ATT_EXTERNAL_ID ? TEXTOID : types[att]);
	if (coerced == NULL)
		return;
	if (att == ATT_ID && strategy == BTEqualStrategyNumber)
		n->id = coerced;
	else if (att == ATT_EXTERNAL_ID && strategy == BTEqualStrategyNumber)
	{
		ArrayExpr  *one = makeNode(ArrayExpr);

		one->array_typeid = TEXTARRAYOID;
		one->element_typeid = TEXTOID;
		one->elements = list_make1(coerced);
		one->location = -1;
		n->external_ids = (Node *) one;
	}
	else if (att == ATT_FINISHED_AT)
	{
		if (strategy != BTLessStrategyNumber && strategy != BTLessEqualStrategyNumber)
			n->from = lappend(n->from, coerced);
		if (strategy != BTGreaterStrategyNumber && strategy != BTGreaterEqualStrategyNumber)
			n->to = lappend(n->to, coerced);
	}
}

/* "external_id = ANY (array)", an IN list. */
static void
narrow_by_list(ScalarArrayOpExpr *op, Index rti, Narrowing *n)
{
	Node	   *list = lsecond(op->args);

	if (!op->useOr || column_of(linitial(op->args), rti) != ATT_EXTERNAL_ID ||
		get_op_opfamily_strategy(op->opno, btree_family(TEXTOID)) != BTEqualStrategyNumber ||
		exprType(list) != TEXTARRAYOID || !is_scan_constant(list))
		return;
	n->external_ids = list;
}

/* GREATEST or LEAST of the bounds, or the one bound. */
static Node *
bound(List *values, MinMaxOp op)
{
	MinMaxExpr *m;

	if (list_length(values) <= 1)
		return values == NIL ? NULL : linitial(values);
	m = makeNode(MinMaxExpr);
	m->minmaxtype = TIMESTAMPTZOID;
	m->op = op;
	m->args = values;
	m->location = -1;
	return (Node *) m;
}

static Node *
arg_or_null(Node *value, Oid type)
{
	return value ? value : (Node *) makeNullConst(type, -1, InvalidOid);
}

/*
 * The call's arguments from the scan's restrictions (columns: its OUT
 * parameters); NIL when they narrow nothing.  0.8.0's definition takes
 * the id only.
 */
static List *
narrowed_args(PlannerInfo *root, RelOptInfo *rel, Index rti, int nargs)
{
	Narrowing	n = {0};
	ListCell   *lc;

	foreach(lc, rel->baserestrictinfo)
	{
		Node	   *clause = (Node *) lfirst_node(RestrictInfo, lc)->clause;

		if (IsA(clause, OpExpr) && list_length(((OpExpr *) clause)->args) == 2)
			narrow_by_comparison((OpExpr *) clause, rti, &n);
		else if (IsA(clause, ScalarArrayOpExpr))
			narrow_by_list((ScalarArrayOpExpr *) clause, rti, &n);
	}
	if (n.id != NULL)
	{
		/* (a NULL id matches nothing: -1, no block, not NULL, which would read them all) */
		CoalesceExpr *id = makeNode(CoalesceExpr);

		id->coalescetype = INT8OID;
		id->args = list_make2(n.id, makeConst(INT8OID, -1, InvalidOid, sizeof(int64), Int64GetDatum(-1),
											  false, FLOAT8PASSBYVAL));
		id->location = -1;
		n.id = (Node *) id;
	}
	if (nargs == PACKED_JOBS_NARGS_080)
		return n.id == NULL ? NIL : (List *) eval_const_expressions(root, (Node *) list_make1(n.id));
	if (n.id == NULL && n.external_ids == NULL && n.from == NIL && n.to == NIL)
		return NIL;
	return (List *) eval_const_expressions(root, (Node *)
										   list_make4(arg_or_null(n.id, INT8OID),
													  arg_or_null(n.external_ids, TEXTARRAYOID),
													  arg_or_null(bound(n.from, IS_GREATEST), TIMESTAMPTZOID),
													  arg_or_null(bound(n.to, IS_LEAST), TIMESTAMPTZOID)));
}

static void
narrow_packed_jobs_scan(PlannerInfo *root, RelOptInfo *rel, Index rti, RangeTblEntry *rte)
{
	if (prev_set_rel_pathlist_hook)
		prev_set_rel_pathlist_hook(root, rel, rti, rte);
	if (rel->reloptkind == RELOPT_BASEREL && is_packed_jobs_scan(rte))
	{
		RangeTblFunction *rtfunc = linitial_node(RangeTblFunction, rte->functions);
		List	   *args = narrowed_args(root, rel, rti, list_length(((FuncExpr *) rtfunc->funcexpr)->args));
		FuncExpr   *call;

		if (args == NIL)
			return;
		call = copyObject((FuncExpr *) rtfunc->funcexpr);
		call->args = args;
		rtfunc->funcexpr = (Node *) call;
		set_function_size_estimates(root, rel);
		rel->pathlist = NIL;
		rel->partial_pathlist = NIL;
		add_path(rel, create_functionscan_path(root, rel, NIL, rel->lateral_relids));
	}
}

void
wi_job_history_install(void)
{
	prev_set_rel_pathlist_hook = set_rel_pathlist_hook;
	set_rel_pathlist_hook = narrow_packed_jobs_scan;
}
