/*
 * job_history.c
 *		Reading the packed history: done jobs kept a block of 128 ids to a
 *		row of job_history_packed (the storage round packs them, see
 *		_pack_history in the extension's SQL).
 *
 *		_packed_jobs(job_id) returns them one row per job, all of them or
 *		the one with that id, and only those its caller may read (the admin
 *		role all, an app role those of the sources it may enqueue into: the
 *		jobs view's rule; to an app role only the columns the view lets it
 *		read, or needs for them; to any other role nothing, whatever grant it
 *		has).  It checks its caller and then reads the table as its owner, as
 *		enqueue() does (access.c).
 *
 *		The jobs view calls _packed_jobs() for every packed job; a row of
 *		it is an array element, which no index of the table can find by
 *		its id.  So a planner hook gives the call the id a query compares
 *		it with: a restriction "id = <constant or parameter>" on that
 *		function scan (a caller's WHERE id = $1, pushed into the view) turns
 *		_packed_jobs() into _packed_jobs($1), which reads one block through
 *		the block index.  The restriction stays and is checked as before;
 *		any other query reads every packed row, as a scan of the history
 *		would.
 *
 * IDENTIFICATION
 *		src/job_history.c
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "parser/parse_coerce.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"

#include "webhook_ingest.h"
#include "access.h"

PG_FUNCTION_INFO_V1(webhook_ingest_packed_jobs);

#define PACKED_JOBS_FUNC	"_packed_jobs"
#define PACKED_JOBS_NATTS	9	/* its OUT columns; the 10th column read is the source's name */

/* Every packed job, or the one with id $1, with its source's name. */
#define PACKED_JOBS_SQL \
	"SELECT u.id, u.finished_at, u.created_at, u.started_at, u.source_id, u.events, u.attempts, " \
	"       u.last_status, u.external_id, s.name " \
	"  FROM webhook_ingest.job_history_packed p " \
	"  CROSS JOIN LATERAL ROWS FROM (pg_catalog.unnest(p.ids), pg_catalog.unnest(p.finished), " \
	"       pg_catalog.unnest(p.created), pg_catalog.unnest(p.started), pg_catalog.unnest(p.source_ids), " \
	"       pg_catalog.unnest(p.events), pg_catalog.unnest(p.attempts), pg_catalog.unnest(p.statuses), " \
	"       pg_catalog.unnest(p.external_ids)) " \
	"       AS u(id, finished_at, created_at, started_at, source_id, events, attempts, last_status, external_id) " \
	"  JOIN webhook_ingest.sources s ON s.id OPERATOR(pg_catalog.=) u.source_id "

static const char *const packed_jobs_sql[2] = {
	PACKED_JOBS_SQL,
	PACKED_JOBS_SQL
	" WHERE p.block OPERATOR(pg_catalog.=) ($1 OPERATOR(pg_catalog.>>) 7) "
	"   AND $1 OPERATOR(pg_catalog.=) ANY (p.ids) AND u.id OPERATOR(pg_catalog.=) $1"
};

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
		nulls[c] = true;			/* events, attempts, last_status, external_id */
}

/*
 * _packed_jobs(job_id bigint DEFAULT NULL): see the file's header.  Read
 * through a cursor, a thousand rows at a time, into the call's tuplestore
 * (which spills to disk past work_mem).
 */
Datum
webhook_ingest_packed_jobs(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plans[2];
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		by_id = !PG_ARGISNULL(0);
	Oid			caller = GetUserId();
	Oid			admin = get_role_oid("webhook_ingest_admin", true);
	bool		sees_all = OidIsValid(admin) && has_privs_of_role(caller, admin);
	Oid			app = get_role_oid("webhook_ingest_enqueue", true);
	SourceSeen	seen[64];
	int			nseen = 0;
	Oid			argtypes[1] = {INT8OID};
	Datum		args[1];
	WiSavedUser saved;
	Portal		cursor;

	wi_init_srf(fcinfo);
	/* Neither the admin role nor an app role (EXECUTE granted to some other role): no job at all. */
	if (!sees_all && !(OidIsValid(app) && has_privs_of_role(caller, app)))
		return (Datum) 0;
	args[0] = by_id ? PG_GETARG_DATUM(0) : (Datum) 0;

	wi_become_owner(fcinfo, &saved);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	wi_prepare_once(&plans[by_id], packed_jobs_sql[by_id], by_id ? 1 : 0, argtypes, false);
	cursor = SPI_cursor_open(NULL, plans[by_id], args, NULL, true);
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
	SPI_finish();
	wi_restore_user(&saved);
	return (Datum) 0;
}

/* Is this the call _packed_jobs() with no id, in the extension's schema? */
static bool
is_packed_jobs_scan(RangeTblEntry *rte)
{
	RangeTblFunction *rtfunc;
	FuncExpr   *call;
	Const	   *arg;
	char	   *name;

	if (rte->rtekind != RTE_FUNCTION || list_length(rte->functions) != 1 || rte->funcordinality)
		return false;
	rtfunc = linitial_node(RangeTblFunction, rte->functions);
	if (!IsA(rtfunc->funcexpr, FuncExpr))
		return false;
	call = (FuncExpr *) rtfunc->funcexpr;
	if (list_length(call->args) != 1 || !IsA(linitial(call->args), Const))
		return false;
	arg = linitial_node(Const, call->args);
	if (!arg->constisnull || arg->consttype != INT8OID)
		return false;
	name = get_func_name(call->funcid);
	if (name == NULL || strcmp(name, PACKED_JOBS_FUNC) != 0)
		return false;
	return get_func_namespace(call->funcid) == get_namespace_oid(WI_SCHEMA_NAME, true);
}

/* A value fixed for the whole scan: a constant, or a parameter of the statement. */
static bool
is_scan_constant(Node *node)
{
	Node	   *bare = strip_implicit_coercions(node);

	if (IsA(bare, Const))
		return !((Const *) bare)->constisnull;
	return IsA(bare, Param) && ((Param *) bare)->paramkind == PARAM_EXTERN;
}

/*
 * The id a restriction "id = value" of the scan rel (id: its first column)
 * gives, as a bigint expression; NULL when it has none.  Any equality of
 * the integer operators' family, either way round.
 */
static Node *
id_of_restrictions(PlannerInfo *root, RelOptInfo *rel, Index rti)
{
	ListCell   *lc;

	foreach(lc, rel->baserestrictinfo)
	{
		RestrictInfo *rinfo = lfirst_node(RestrictInfo, lc);
		OpExpr	   *op = (OpExpr *) rinfo->clause;
		Node	   *left;
		Node	   *right;

		if (!IsA(op, OpExpr) || list_length(op->args) != 2 ||
			get_op_opfamily_strategy(op->opno, INTEGER_BTREE_FAM_OID) != BTEqualStrategyNumber)
			continue;
		left = linitial(op->args);
		right = lsecond(op->args);
		if (!(IsA(left, Var) && ((Var *) left)->varno == rti && ((Var *) left)->varattno == 1))
		{
			Node	   *swap = left;

			left = right;
			right = swap;
		}
		if (!(IsA(left, Var) && ((Var *) left)->varno == rti && ((Var *) left)->varattno == 1 &&
			  ((Var *) left)->varlevelsup == 0) || !is_scan_constant(right))
			continue;
		{
			/* (a NULL id matches nothing: -1, no block, not NULL, which would read them all) */
			CoalesceExpr *id = makeNode(CoalesceExpr);

			id->coalescetype = INT8OID;
			id->args = list_make2(coerce_to_target_type(NULL, right, exprType(right), INT8OID, -1,
														COERCION_IMPLICIT, COERCE_IMPLICIT_CAST, -1),
								  makeConst(INT8OID, -1, InvalidOid, sizeof(int64), Int64GetDatum(-1),
											false, FLOAT8PASSBYVAL));
			id->location = -1;
			return eval_const_expressions(root, (Node *) id);
		}
	}
	return NULL;
}

static void
narrow_packed_jobs_scan(PlannerInfo *root, RelOptInfo *rel, Index rti, RangeTblEntry *rte)
{
	if (prev_set_rel_pathlist_hook)
		prev_set_rel_pathlist_hook(root, rel, rti, rte);
	if (rel->reloptkind == RELOPT_BASEREL && is_packed_jobs_scan(rte))
	{
		Node	   *id = id_of_restrictions(root, rel, rti);
		RangeTblFunction *rtfunc = linitial_node(RangeTblFunction, rte->functions);
		FuncExpr   *call;

		if (id == NULL)
			return;
		call = copyObject((FuncExpr *) rtfunc->funcexpr);
		call->args = list_make1(id);
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
