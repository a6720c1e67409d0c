/*
 * packed_jobs_planner.c
 *		Narrowing the jobs view's call of _packed_jobs() (job_history.c) to
 *		what a query asks.  A row of the call is an array element of
 *		job_history_packed, which no index of the table can find by its
 *		columns; so a planner hook gives the call what a query compares
 *		them with: restrictions "id = v", "external_id = v" (or = ANY
 *		(array)), "finished_at < v" (<=, >, >=, =) on that function scan, v a
 *		constant, a parameter or a stable expression of them (now() -
 *		interval '10 s'), pushed into the view by the planner, turn
 *		_packed_jobs() into _packed_jobs(v, ...).  The restrictions stay and
 *		are checked as before, so the narrowed call needs only to return
 *		every job they could accept; any other query reads every packed
 *		row, as a scan of the history would.  A support function tells the
 *		planner how few rows a narrowed call returns.  0.8.0's definition,
 *		_packed_jobs(job_id), is narrowed by id only.
 *
 * IDENTIFICATION
 *		src/history/packed_jobs_planner.c
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/supportnodes.h"
#include "optimizer/clauses.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "parser/parse_coerce.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "webhook_ingest.h"
#include "packed_jobs.h"
#include "packed_jobs_planner.h"

PG_FUNCTION_INFO_V1(webhook_ingest_packed_jobs_support);

#define PACKED_JOBS_FUNC	"_packed_jobs"

/* The OUT columns a restriction may narrow the call by (attribute numbers). */
#define ATT_ID				1
#define ATT_FINISHED_AT		2
#define ATT_EXTERNAL_ID		9

static set_rel_pathlist_hook_type prev_set_rel_pathlist_hook = NULL;

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

/*
 * The btree operator family a column's own type sorts by (from the type
 * cache: GetDefaultOpClass scans pg_opclass, for each clause of each
 * statement planned).
 */
static Oid
btree_family(Oid type)
{
	return lookup_type_cache(type, TYPECACHE_BTREE_OPFAMILY)->btree_opf;
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
wi_packed_jobs_planner_install(void)
{
	prev_set_rel_pathlist_hook = set_rel_pathlist_hook;
	set_rel_pathlist_hook = narrow_packed_jobs_scan;
}
