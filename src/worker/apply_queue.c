/*
 * apply_queue.c
 *		An apply worker's hand-off queues: one DSM segment per apply worker
 *		holding two shm_mq rings, "in" (batches of fetched results, from the
 *		fetcher; webhook_ingest.apply_queue_size) and "out" (the outcomes,
 *		back to it).  The apply worker makes the segment, is the receiver of
 *		"in" and the sender of "out", and publishes the segment's handle in
 *		its slot (shmem.c); the fetcher attaches as the other end.  A
 *		message larger than a ring streams through it (shm_mq), so a body up
 *		to max_response_size gets through whatever the ring's size.  When
 *		either end exits, its detach tells the other (SHM_MQ_DETACHED), and
 *		the apply worker makes a new segment for the next fetcher.
 *
 * IDENTIFICATION
 *		src/worker/apply_queue.c
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/proc.h"
#include "storage/shm_toc.h"
#include "utils/memutils.h"

#include "webhook_ingest.h"
#include "apply_queue.h"

#define WI_APPLY_QUEUES_MAGIC	0x57494151	/* "WIAQ" */
#define WI_TOC_IN				1
#define WI_TOC_OUT				2

static WiApplyQueues *
new_queues(dsm_segment *segment)
{
	WiApplyQueues *q = MemoryContextAllocZero(TopMemoryContext, sizeof(WiApplyQueues));

	q->segment = segment;
	/* For the process's life, not a transaction's (no resource owner holds it). */
	dsm_pin_mapping(segment);
	return q;
}

/* Apply worker: a new segment with both queues, this process at its ends. */
WiApplyQueues *
wi_apply_queues_create(Size in_size)
{
	shm_toc_estimator e;
	Size		size;
	dsm_segment *segment;
	shm_toc    *toc;
	shm_mq	   *in;
	shm_mq	   *out;
	WiApplyQueues *q;
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	in_size = MAXALIGN(Max(in_size, shm_mq_minimum_size + 1024));
	shm_toc_initialize_estimator(&e);
	shm_toc_estimate_chunk(&e, in_size);
	shm_toc_estimate_chunk(&e, WI_APPLY_REPLY_QUEUE_SIZE);
	shm_toc_estimate_keys(&e, 2);
	size = shm_toc_estimate(&e);

	segment = dsm_create(size, 0);
	q = new_queues(segment);
	toc = shm_toc_create(WI_APPLY_QUEUES_MAGIC, dsm_segment_address(segment), size);
	in = shm_mq_create(shm_toc_allocate(toc, in_size), in_size);
	shm_toc_insert(toc, WI_TOC_IN, in);
	out = shm_mq_create(shm_toc_allocate(toc, WI_APPLY_REPLY_QUEUE_SIZE), WI_APPLY_REPLY_QUEUE_SIZE);
	shm_toc_insert(toc, WI_TOC_OUT, out);
	shm_mq_set_receiver(in, MyProc);
	shm_mq_set_sender(out, MyProc);
	/* The handles' buffers (for messages that wrap) live as long as the queues. */
	q->in = shm_mq_attach(in, segment, NULL);
	q->out = shm_mq_attach(out, segment, NULL);
	MemoryContextSwitchTo(old);
	return q;
}

/*
 * Fetcher: the other end of an apply worker's queues, or NULL if the segment
 * is gone, or if another fetcher was attached to it (one that exited: the
 * apply worker may still complete that fetcher's batch, then makes new
 * queues).
 */
WiApplyQueues *
wi_apply_queues_attach(dsm_handle handle)
{
	dsm_segment *segment;
	shm_toc    *toc;
	shm_mq	   *in;
	shm_mq	   *out;
	WiApplyQueues *q;
	MemoryContext old;

	segment = dsm_attach(handle);
	if (segment == NULL)
		return NULL;			/* its apply worker left meanwhile */
	old = MemoryContextSwitchTo(TopMemoryContext);
	q = new_queues(segment);
	toc = shm_toc_attach(WI_APPLY_QUEUES_MAGIC, dsm_segment_address(segment));
	if (toc == NULL)
		elog(ERROR, "webhook_ingest: bad magic number in an apply worker's queues");
	in = shm_toc_lookup(toc, WI_TOC_IN, false);
	out = shm_toc_lookup(toc, WI_TOC_OUT, false);
	if (shm_mq_get_sender(in) != NULL)
	{
		/* a previous fetcher's */
		dsm_detach(segment);
		pfree(q);
		MemoryContextSwitchTo(old);
		return NULL;
	}
	shm_mq_set_sender(in, MyProc);
	shm_mq_set_receiver(out, MyProc);
	q->in = shm_mq_attach(in, segment, NULL);
	q->out = shm_mq_attach(out, segment, NULL);
	MemoryContextSwitchTo(old);
	return q;
}

/* Either end: leave the queues (the other end sees SHM_MQ_DETACHED). */
void
wi_apply_queues_detach(WiApplyQueues *q)
{
	if (q == NULL)
		return;
	shm_mq_detach(q->in);
	shm_mq_detach(q->out);
	dsm_detach(q->segment);
	pfree(q);
}

/* Where apply worker index of this database keeps its guard file (apply_queue.h). */
char *
wi_applier_guard_path(int index)
{
	return psprintf("pg_stat_tmp/webhook_ingest.%u.applier%d", MyDatabaseId, index);
}
