/*
 * apply_dispatch.c
 *		The fetcher's side of the hand-off to the apply workers: it holds
 *		every fetched result (its Transfer, body included) until an apply
 *		worker says how the job's completion ended, so a result is lost only
 *		when the fetcher itself is.
 *
 *		Each pass: attach to the queues an apply worker published (not
 *		those a previous fetcher used: that apply worker may still complete
 *		its batch; then settle what a predecessor of that number left,
 *		crash_guard.c);
 *		read the outcomes of the batches handed over; go on streaming a
 *		batch larger than the queue; give every idle apply worker its next
 *		batch, as sched_apply.c picks it; and notice an apply worker that is
 *		gone (its queues detached), settle its file, and hand its batch over
 *		again (less the job whose handler ran past its hard deadline).
 *
 *		Results whose rows another session held are tried again after
 *		lock_timeout; past max_concurrent_requests of them the oldest are
 *		given up (their jobs come back when their leases expire), and the
 *		log names them.  A result whose completion met WI_MAX_COMPLETION_ERRORS
 *		errors is given up the same way.  Everything held counts against the
 *		fetcher's transfer slots: when the apply workers fall behind, it
 *		starts fewer transfers.  A batch of quick sources, and a slow one's
 *		that takes the apply worker kept for the others, is leashed
 *		(apply_queue.h); a result that comes back too slow goes again alone.
 *		A list page of a reconciliation sweep goes the same way, flagged
 *		(apply_queue.h); its answer tells the loop that the sweep's next page
 *		may be due.
 *
 * IDENTIFICATION
 *		src/worker/apply_dispatch.c
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/shm_mq.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "webhook_ingest.h"
#include "apply_dispatch.h"
#include "apply_queue.h"
#include "crash_guard.h"
#include "http.h"
#include "job_store.h"
#include "sched_apply.h"
#include "scheduler.h"
#include "settings.h"
#include "shmem.h"

/* Recovered errors a result may meet before its job goes back to the queue. */
#define WI_MAX_COMPLETION_ERRORS	3

/* The fetcher's end of one apply worker's queues, and the batch it holds. */
typedef struct Link
{
	uint32		generation;		/* of the queues attached, or last seen */
	WiApplyQueues *queues;		/* NULL: not attached */
	pid_t		pid;
	List	   *batch;			/* Transfers handed over; NIL: idle */
	uint64		batch_id;
	bool		restricted;		/* a batch of a source not known to be quick */
	bool		leashed;		/* its handlers may not take long (apply_queue.h) */
	TimestampTz handed_at;
	/* the batch's message while it streams into the queue (sending) */
	bool		sending;
	WiApplyBatchHeader header;
	WiApplyItem *items;
	shm_mq_iovec *iov;
	int			niov;
} Link;

static Link links[WI_MAX_APPLIERS];
static uint64 next_batch_id = 1;
static int	held = 0;			/* results held: ready, handed over, or locked */
static List *locked = NIL;		/* results whose rows another session held */
static TimestampTz next_locked_try = 0;
static int64 *abandoned = NULL; /* jobs given up, for the lease check to take back */
static bool page_answered = false;	/* since wi_dispatch_page_answered last said so */
static int	nabandoned = 0;
static int	abandoned_size = 0;

static const char empty[1] = "";

/* A result that went to an apply worker alone, after an error or as a suspect of a crash. */
static bool
must_go_alone(Transfer *t)
{
	return t->errors > 0 || t->too_slow || wi_crash_guard_must_go_alone(t);
}

static List *
keep(List *list, Transfer *t)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	list = lappend(list, t);
	MemoryContextSwitchTo(old);
	return list;
}

/* Done with a result: its job is no longer in flight here. */
static void
release(Transfer *t)
{
	wi_sched_completed(t->source, t->reconciled);
	held--;
	wi_transfer_free(t);
}

/* Give a result up: its job goes back to the queue when its lease expires. */
static void
abandon(Transfer *t)
{
	if (nabandoned == abandoned_size)
	{
		abandoned_size = Max(64, abandoned_size * 2);
		abandoned = abandoned ? repalloc(abandoned, sizeof(int64) * abandoned_size) :
			MemoryContextAlloc(TopMemoryContext, sizeof(int64) * abandoned_size);
	}
	abandoned[nabandoned++] = t->job_id;
	release(t);
}

/* ---- handing a batch over ---- */

static void
add_iov(Link *l, const char *data, Size len)
{
	l->iov[l->niov].data = data;
	l->iov[l->niov].len = len;
	l->niov++;
}

/* The batch's message as iovecs over the Transfers (nothing is copied before shm_mq does). */
static void
build_message(Link *l)
{
	int			n = list_length(l->batch);
	int			i = 0;
	ListCell   *lc;
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	l->header.kind = WI_MSG_BATCH;
	l->header.njobs = n;
	l->header.batch_id = l->batch_id;
	l->header.fetcher_pid = MyProcPid;
	l->header.leash_ms = l->leashed ? WI_APPLY_LEASH_MS : 0;
	l->items = palloc0(sizeof(WiApplyItem) * n);
	l->iov = palloc(sizeof(shm_mq_iovec) * (1 + 7 * n));
	l->niov = 0;
	MemoryContextSwitchTo(old);
	add_iov(l, (const char *) &l->header, sizeof(l->header));
	foreach(lc, l->batch)
	{
		Transfer   *t = (Transfer *) lfirst(lc);
		WiApplyItem *item = &l->items[i++];
		const char *why = t->why ? t->why : empty;
		const char *link = t->link ? t->link : empty;

		item->job_id = t->job_id;
		item->created_at = t->created_at;
		item->fetch_seconds = t->seconds;
		item->body_len = t->body ? t->body_len : 0;
		item->attempt = t->attempt;
		item->max_attempts = t->max_attempts;
		item->handler = t->handler;
		item->verdict = t->verdict;
		item->status = (int32) t->status;
		item->retry_after_s = (int32) Max(Min(t->retry_after_s, PG_INT32_MAX), -1);
		item->source_len = strlen(t->source);
		item->external_id_len = strlen(t->external_id);
		item->why_len = strlen(why);
		item->link_len = strlen(link);
		item->flags = (t->page ? WI_ITEM_PAGE : 0) | (t->reconciles ? WI_ITEM_RECONCILES : 0);
		add_iov(l, (const char *) item, sizeof(WiApplyItem));
		add_iov(l, t->source, item->source_len + 1);
		add_iov(l, t->external_id, item->external_id_len + 1);
		add_iov(l, why, item->why_len + 1);
		add_iov(l, link, item->link_len + 1);
		add_iov(l, t->body ? t->body : empty, item->body_len);
		add_iov(l, empty, 1);
	}
}

static void
free_message(Link *l)
{
	if (l->items)
		pfree(l->items);
	if (l->iov)
		pfree(l->iov);
	l->items = NULL;
	l->iov = NULL;
	l->niov = 0;
	l->sending = false;
}

/* Stream the batch's message on; false if the apply worker has left. */
static bool
send_more(Link *l)
{
	shm_mq_result res;

	res = shm_mq_sendv(l->queues->in, l->iov, l->niov, true, true);
	if (res == SHM_MQ_WOULD_BLOCK)
		return true;			/* the rest when it has read on (it sets our latch) */
	free_message(l);
	return res == SHM_MQ_SUCCESS;
}

static void applier_gone(int index);

static void
hand_over(int index, List *batch, bool restricted, bool leashed)
{
	Link	   *l = &links[index];

	l->batch = batch;
	l->batch_id = next_batch_id++;
	l->restricted = restricted;
	l->leashed = leashed;
	l->handed_at = GetCurrentTimestamp();
	if (list_length(batch) == 1)
	{
		Transfer   *t = (Transfer *) linitial(batch);

		t->alone = true;		/* for the crash guard's count of lone completions */
		/* a crash of its apply worker must find its claim, to count it (job_store.c) */
		if (!t->page && wi_crash_guard_must_go_alone(t))
			wi_claims_flush();
	}
	build_message(l);
	l->sending = true;
	if (!send_more(l))
		applier_gone(index);
}

/* ---- what comes back ---- */

static void
count_outcome(WiCounters *c, int outcome, int flags)
{
	if (outcome == WI_OUTCOME_DONE || outcome == WI_OUTCOME_REFETCH)
		c->succeeded++;
	else if (outcome == WI_OUTCOME_RETRY)
		c->retried++;
	else if (outcome == WI_OUTCOME_DEAD)
		c->dead++;
	if (flags & WI_OUTCOME_FLAG_HANDLER_ERROR)
		c->handler_errors++;
}

/* A result the apply worker did not complete this time: when and how it goes again. */
static void
hand_back(Transfer *t, int outcome)
{
	if (outcome == WI_OUTCOME_LOCKED)
	{
		if (locked == NIL)
			next_locked_try = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), wi_lock_timeout_ms);
		locked = keep(locked, t);
		wi_sched_locked(t->source, 1);
		return;
	}
	if (outcome == WI_OUTCOME_ERROR && ++t->errors >= WI_MAX_COMPLETION_ERRORS)
	{
		ereport(WARNING,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("webhook_ingest worker: giving up completing job %lld after %d errors",
						(long long) t->job_id, t->errors),
				 errdetail("The lease check takes the job back once its lease has expired.")));
		abandon(t);
		return;
	}
	wi_sched_ready(t, true);
}

static void
take_outcome(Transfer *t, const WiApplyOutcome *o, WiCounters *counters)
{
	bool		ended = o->outcome != WI_OUTCOME_LOCKED && o->outcome != WI_OUTCOME_NOT_STARTED &&
		o->outcome != WI_OUTCOME_ERROR && o->outcome != WI_OUTCOME_TOO_SLOW;

	wi_sched_left_applier(t);
	if (o->outcome != WI_OUTCOME_NOT_STARTED)
		wi_sched_applied(t, o->handler_us);
	if (t->alone)
		wi_crash_guard_completed_alone(t->job_id, t->handler, o->outcome);
	t->alone = false;
	if (o->outcome == WI_OUTCOME_TOO_SLOW)
		t->too_slow = true;
	if (!ended)
	{
		hand_back(t, o->outcome);
		return;
	}
	page_answered |= t->page;
	if (o->outcome == WI_OUTCOME_PAGE)
	{
		release(t);				/* not a job: not counted */
		return;
	}
	counters->applied++;
	counters->handler_us += o->handler_us;
	count_outcome(counters, o->outcome, o->flags);
	release(t);
}

/* An apply worker's answer: the outcome of each job of its batch, in the order handed over. */
static void
take_reply(Link *l, const char *data, Size nbytes, WiCounters *counters)
{
	WiApplyReplyHeader h;
	int			i = 0;
	ListCell   *lc;

	if (nbytes < sizeof(h))
		elog(ERROR, "webhook_ingest worker: an apply worker's reply is cut short");
	memcpy(&h, data, sizeof(h));
	if (h.kind != WI_MSG_OUTCOMES || h.batch_id != l->batch_id || h.njobs != (uint32) list_length(l->batch) ||
		nbytes < sizeof(h) + sizeof(WiApplyOutcome) * h.njobs)
		elog(ERROR, "webhook_ingest worker: an apply worker's reply does not match its batch");
	if (h.last_error_at != 0)
	{
		strlcpy(counters->last_error, h.last_error, sizeof(counters->last_error));
		counters->last_error_at = h.last_error_at;
	}
	foreach(lc, l->batch)
	{
		WiApplyOutcome o;

		memcpy(&o, data + sizeof(h) + sizeof(WiApplyOutcome) * i++, sizeof(o));
		if (o.job_id != ((Transfer *) lfirst(lc))->job_id)
			elog(ERROR, "webhook_ingest worker: an apply worker's reply names another job");
		take_outcome((Transfer *) lfirst(lc), &o, counters);
	}
	list_free(l->batch);
	l->batch = NIL;
}

/*
 * Apply worker index is gone: its queues are left, what its file says is
 * settled, and its batch goes to the others - but for the job whose handler
 * ran past its hard deadline (dead now), charged to its source with the time
 * it took.
 */
static void
applier_gone(int index)
{
	Link	   *l = &links[index];
	dsm_handle	queues;
	pid_t		pid;
	WiExitReason reason;
	int64		culprit;
	int64		deadline_job;
	ListCell   *lc;

	(void) wi_shmem_applier(index, &queues, &pid, &reason, &culprit);
	if (reason != WI_EXIT_DEADLINE)
		culprit = 0;
	wi_apply_queues_detach(l->queues);
	l->queues = NULL;
	free_message(l);
	deadline_job = wi_crash_guard_settle(index);
	foreach(lc, l->batch)
	{
		Transfer   *t = (Transfer *) lfirst(lc);

		t->alone = false;
		wi_sched_left_applier(t);
		if (t->job_id == culprit || t->job_id == deadline_job)
		{
			/* charged what ignoring its cancel would take without a leash: its source is heavy now */
			wi_sched_applied(t, Max(GetCurrentTimestamp() - l->handed_at,
									(int64) (wi_handler_timeout_ms + WI_HARD_DEADLINE_GRACE_MS(wi_handler_timeout_ms)) * 1000));
			release(t);			/* dead (crash_guard.c): nothing more to do */
		}
		else
			wi_sched_ready(t, true);
	}
	list_free(l->batch);
	l->batch = NIL;
}

/* Attach to the queues an apply worker published since the last look. */
static void
look_for_queues(int index)
{
	Link	   *l = &links[index];
	dsm_handle	queues;
	pid_t		pid;
	WiExitReason reason;
	int64		handling;
	uint32		generation = wi_shmem_applier(index, &queues, &pid, &reason, &handling);

	if (generation == l->generation || queues == DSM_HANDLE_INVALID)
		return;
	if (l->queues != NULL)
		applier_gone(index);	/* a new apply worker of that number: the old one left */
	l->generation = generation;
	/*
	 * Not queues a previous fetcher used: their apply worker may still be
	 * completing that fetcher's batch, and its file is its own, not a
	 * predecessor's.  It makes new queues once that batch is over.
	 */
	l->queues = wi_apply_queues_attach(queues);
	if (l->queues == NULL)
		return;
	/* What a predecessor of this number left, before this one gets a batch. */
	(void) wi_crash_guard_settle(index);
	l->pid = pid;
}

/* Read what an apply worker answered, and stream its batch on. */
static void
serve_link(int index, WiCounters *counters)
{
	Link	   *l = &links[index];
	Size		nbytes;
	void	   *data;
	shm_mq_result res;

	if (l->queues == NULL)
		return;
	if (l->sending && !send_more(l))
	{
		applier_gone(index);
		return;
	}
	res = shm_mq_receive(l->queues->out, &nbytes, &data, true);
	if (res == SHM_MQ_SUCCESS && l->batch != NIL)
		take_reply(l, (const char *) data, nbytes, counters);
	else if (res == SHM_MQ_DETACHED)
		applier_gone(index);
}

/* Locked results whose wait is over go back to the ready ones. */
static void
retry_locked(void)
{
	ListCell   *lc;

	if (locked == NIL || GetCurrentTimestamp() < next_locked_try)
		return;
	foreach(lc, locked)
	{
		wi_sched_locked(((Transfer *) lfirst(lc))->source, -1);
		wi_sched_ready((Transfer *) lfirst(lc), false);
	}
	list_free(locked);
	locked = NIL;
}

/*
 * Results waiting for a row lock are kept up to max_concurrent_requests of
 * them; past that the oldest are given up (an application holding that many
 * rows locked delays those jobs until their leases expire, not the fetcher).
 */
static void
bound_locked(void)
{
	static TimestampTz last_logged = 0;
	StringInfoData ids;
	int			dropped = 0;

	initStringInfo(&ids);
	while (list_length(locked) > wi_max_concurrent_requests)
	{
		Transfer   *t = (Transfer *) linitial(locked);

		if (dropped < 10)
			appendStringInfo(&ids, "%s%lld", dropped > 0 ? ", " : "", (long long) t->job_id);
		wi_sched_locked(t->source, -1);
		abandon(t);
		locked = list_delete_first(locked);
		dropped++;
	}
	if (dropped > 0 && TimestampDifferenceExceeds(last_logged, GetCurrentTimestamp(), 10000))
	{
		ereport(WARNING,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("webhook_ingest worker: gave up the results of %d jobs whose rows other sessions hold locked",
						dropped),
				 errdetail("Jobs %s%s are fetched again once their leases expire.", ids.data,
						   dropped > 10 ? " and others" : "")));
		last_logged = GetCurrentTimestamp();
	}
	pfree(ids.data);
}

/* Apply workers busy with batches of slow or heavy sources. */
static int
restricted_busy(void)
{
	int			n = 0;

	for (int i = 0; i < WI_MAX_APPLIERS; i++)
		if (links[i].batch != NIL && links[i].restricted)
			n++;
	return n;
}

/* Every idle apply worker gets its next batch. */
static void
hand_out(void)
{
	int			restricted_cap = Max(1, wi_apply_workers - 1);

	for (int i = 0; i < WI_MAX_APPLIERS; i++)
	{
		bool		restricted;
		bool		reserve_free;
		List	   *batch;

		if (links[i].queues == NULL || links[i].batch != NIL)
			continue;
		reserve_free = restricted_busy() < restricted_cap;
		batch = wi_sched_next_batch(WI_APPLY_MAX_BATCH, reserve_free, must_go_alone, &restricted);
		if (batch == NIL)
			return;
		/*
		 * Leashed: a batch of quick sources (a handler that turns out slow
		 * must not hold the others' jobs of its batch), and a slow source's
		 * that takes the apply worker kept for the others.
		 */
		hand_over(i, batch, restricted, restricted ? !reserve_free : wi_sched_quick(linitial(batch)));
	}
}

/* A finished transfer, judged (verdict and why set): it waits for an apply worker. */
void
wi_dispatch_result(Transfer *t)
{
	held++;
	wi_sched_ready(t, false);
}

/* One pass of the hand-off (see the header). */
void
wi_dispatch_pass(WiCounters *counters)
{
	for (int i = 0; i < WI_MAX_APPLIERS; i++)
	{
		look_for_queues(i);
		serve_link(i, counters);
	}
	retry_locked();
	bound_locked();
	hand_out();
}

/* Results held for an apply worker or in one; those waiting for a row lock are not counted (they hold no transfer slot). */
int
wi_dispatch_held(void)
{
	return held - list_length(locked);
}

/* Every result held, those waiting for a row lock included. */
int
wi_dispatch_held_all(void)
{
	return held;
}

/* Apply workers attached. */
int
wi_dispatch_appliers(void)
{
	int			n = 0;

	for (int i = 0; i < WI_MAX_APPLIERS; i++)
		if (links[i].queues != NULL)
			n++;
	return n;
}

/* How long the loop may sleep for the hand-off's sake (-1: no limit). */
long
wi_dispatch_timeout_ms(void)
{
	if (locked == NIL)
		return -1;
	return Max(0, (long) ((next_locked_try - GetCurrentTimestamp()) / 1000));
}

/*
 * The jobs given up, for the lease check (it takes them back though this
 * fetcher holds their lease); it says which are no longer ours.
 */
int64 *
wi_dispatch_abandoned(int *n)
{
	*n = nabandoned;
	return abandoned;
}

void
wi_dispatch_set_abandoned(int n)
{
	nabandoned = n;
}

/* Has a list page's completion been answered since the last call? */
bool
wi_dispatch_page_answered(void)
{
	bool		answered = page_answered;

	page_answered = false;
	return answered;
}

/* A job claimed again is this fetcher's once more. */
void
wi_dispatch_claimed_again(int64 job_id)
{
	for (int i = 0; i < nabandoned; i++)
		if (abandoned[i] == job_id)
			abandoned[i--] = abandoned[--nabandoned];
}
