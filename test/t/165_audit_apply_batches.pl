# Audit of 0.10.0's apply workers (test/audit/FINDINGS-0.10.0-apply.md):
#  A1. a source known to be quick whose handler turns slow (a handler owner
#      without admin rights decides when: a flag, the clock, a lock its
#      handler waits for) held every other quick source's jobs of its batches
#      for as long as its handler ran (handler_timeout; 3 s for one that
#      ignores its cancel), in every apply worker that had one of its jobs at
#      once: all tenants stalled.  A batch of quick sources now has a leash:
#      past it the handler is cancelled, its work rolled back, and the job
#      completed again alone, as a heavy source's - its effect still exactly
#      once; one that ignores the leash's cancel is ended at its double;
#  A2. a batch carried every ready result's body, whatever their size: with
#      large bodies each apply worker kept a receive buffer the size of the
#      largest batch message (a power of two above it) for its life, and the
#      results its batch budget left were shipped again and again.  A batch's
#      bodies now fit an apply worker's queue (one result at least);
#  A3. lastval() in a handler gave the previous job's sequence - another
#      role's: its value, or its name in the error - across jobs;
#  A4. the parse of a fetched document was not charged to its source: an
#      upstream whose documents are slow to parse (1 MB of small keys, about
#      60 ms each) kept a source with a handler that does nothing "quick", so
#      its results filled every quick batch, ahead of the others by the
#      virtual clock.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use List::Util;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('audit_apply_batches');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.backoff_base = 50ms
webhook_ingest.backoff_max = 200ms
webhook_ingest.max_concurrent_requests = 256
});
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION webhook_ingest;
	CREATE ROLE dev NOLOGIN;
	CREATE ROLE dev2 NOLOGIN;
	CREATE SCHEMA devs AUTHORIZATION dev;
	CREATE SCHEMA devs2 AUTHORIZATION dev2;
	CREATE TABLE calls (external_id text);
	CREATE FUNCTION count_it(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE sql AS $$ INSERT INTO calls VALUES (external_id) $$;
	CREATE FUNCTION noop(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE sql AS $$ SELECT 1 $$;
	CREATE TABLE seen (what text, result text);
	GRANT INSERT ON seen TO dev2;
	SET ROLE dev;
	CREATE TABLE devs.flag (mode text);
	INSERT INTO devs.flag VALUES ('quick');
	CREATE TABLE devs.effects (external_id text);
	CREATE FUNCTION devs.turncoat(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE plpgsql AS $$
	BEGIN
		INSERT INTO devs.effects VALUES (external_id);
		IF (SELECT mode FROM devs.flag) = 'slow' THEN
			PERFORM pg_sleep(1.8);
		ELSIF (SELECT mode FROM devs.flag) = 'stubborn' THEN
			LOOP
				BEGIN
					PERFORM pg_sleep(30);
				EXCEPTION WHEN query_canceled THEN
					NULL;
				END;
			END LOOP;
		END IF;
	END $$;
	CREATE SEQUENCE devs.invoice_numbers;
	CREATE FUNCTION devs.numbered(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE sql AS $$ SELECT nextval('devs.invoice_numbers') $$;
	RESET ROLE;
	SET ROLE dev2;
	CREATE FUNCTION devs2.peek(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE plpgsql AS $$
	BEGIN
		INSERT INTO public.seen VALUES ('lastval', lastval()::text);
	EXCEPTION WHEN OTHERS THEN
		INSERT INTO public.seen VALUES ('lastval', SQLERRM);
	END $$;
	RESET ROLE;
	SELECT webhook_ingest.add_source('turncoat', 'http://127.0.0.1:18080/posts/{external_id}',
	                                 'devs.turncoat(text,jsonb,jsonb)');
	SELECT webhook_ingest.add_source('victim', 'http://127.0.0.1:18080/posts/{external_id}', 'count_it(text,jsonb,jsonb)');
	SELECT webhook_ingest.add_source('bigdocs', 'http://127.0.0.1:18080/big/{external_id}?kb=1000', 'noop(text,jsonb,jsonb)');
	SELECT webhook_ingest.add_source('keyed', 'http://127.0.0.1:18080/keys/{external_id}', 'noop(text,jsonb,jsonb)');
	SELECT webhook_ingest.add_source('numbered', 'http://127.0.0.1:18080/posts/{external_id}',
	                                 'devs.numbered(text,jsonb,jsonb)');
	SELECT webhook_ingest.add_source('peek', 'http://127.0.0.1:18080/posts/{external_id}', 'devs2.peek(text,jsonb,jsonb)');
});
$node->poll_query_until('postgres', q{
	SELECT count(*) = 2 FROM webhook_ingest.worker_status WHERE role = 'applier' AND state = 'idle'})
  or die 'the apply workers did not start';

sub q1 { return $node->safe_psql('postgres', shift); }

sub drained
{
	my ($where, $n) = @_;
	return $node->poll_query_until('postgres',
		"SELECT count(*) = $n FROM webhook_ingest.jobs WHERE $where AND state IN ('done', 'dead')");
}

# A1. Both sources become known as quick, then the turncoat's handler sleeps (1.8 s, under
# handler_timeout), then, known as quick again, ignores its cancel.
sub turn
{
	my ($mode, $tag, $per_tick) = @_;
	q1(qq{UPDATE devs.flag SET mode = 'quick';
	      SELECT count(*) FROM generate_series(1, 100) g, webhook_ingest.enqueue('turncoat', 'w$tag' || g) a;
	      SELECT count(*) FROM generate_series(1, 40) g, webhook_ingest.enqueue('victim', 'w$tag' || g) b});
	drained(qq{external_id LIKE 'w$tag%'}, 140) or die 'the warm-up did not drain';
	q1("UPDATE devs.flag SET mode = '$mode'");
	for my $i (1 .. 30)
	{
		q1("SELECT webhook_ingest.enqueue('turncoat', '$tag$i.' || g) FROM generate_series(1, $per_tick) g;
		    SELECT webhook_ingest.enqueue('victim', 'v$tag$i')");
		usleep(100_000);
	}
	drained(qq{source = 'victim' AND external_id LIKE 'v$tag%'}, 30) or diag('the victim did not drain');
	q1(q{UPDATE devs.flag SET mode = 'quick'});
	my ($max_ms, $late) = split /\|/, q1(qq{
		SELECT round(max(extract(epoch FROM finished_at - created_at) * 1000)),
		       count(*) FILTER (WHERE finished_at - created_at > interval '1 s')
		  FROM webhook_ingest.jobs WHERE source = 'victim' AND external_id LIKE 'v$tag%'});
	cmp_ok($max_ms, '<=', 1000,
		"a quick source's handler turned $mode: another quick source's webhooks done within 1 s (max $max_ms ms, $late later)");
	drained(qq{source = 'turncoat' AND external_id LIKE '$tag%'}, 30 * $per_tick) or diag('the turncoat did not drain');
}

turn('slow', 't', 3);
is(q1(q{SELECT count(*) FILTER (WHERE state = 'done') || ' done, ' ||
               (SELECT count(*) FROM devs.effects WHERE external_id LIKE 't%') || ' effects, ' ||
               (SELECT count(DISTINCT external_id) FROM devs.effects WHERE external_id LIKE 't%') || ' distinct'
          FROM webhook_ingest.jobs WHERE source = 'turncoat' AND external_id LIKE 't%'}),
	'90 done, 90 effects, 90 distinct', "the turncoat's jobs: each done, its handler's effect committed exactly once");
is(q1(q{SELECT count(*) FROM webhook_ingest.jobs WHERE source = 'turncoat' AND external_id LIKE 't%' AND last_error IS NOT NULL}),
	'0', 'no failed attempt was recorded against them');

turn('stubborn', 's', 1);
is(q1(q{SELECT count(*) FROM webhook_ingest.jobs j WHERE source = 'turncoat' AND external_id LIKE 's%'
           AND (SELECT count(*) FROM devs.effects e WHERE e.external_id = j.external_id) <> (state = 'done')::int}),
	'0', "the stubborn turncoat's jobs: one effect for each done, none for each dead");
cmp_ok(q1(q{SELECT count(*) FROM webhook_ingest.jobs WHERE source = 'turncoat' AND external_id LIKE 's%' AND state = 'dead'
              AND last_error LIKE '%hard deadline%not retried'}), '>', 0, 'those that ignored their cancel are dead');

# A2. 160 results with 1000 kB bodies, a handler that does nothing: what each apply worker keeps.
sub applier_bytes
{
	my @pids = split /\n/, q1(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'webhook_ingest applier' ORDER BY pid});
	my %bytes;
	for my $pid (@pids)
	{
		my $offset = -s $node->logfile;
		q1("SELECT pg_log_backend_memory_contexts($pid)");
		my $total;
		for (1 .. 100)
		{
			my $log = slurp_file($node->logfile, $offset);
			if ($log =~ /\[$pid\][^\n]*Grand total: (\d+) bytes/) { $total = $1; last; }
			usleep(100_000);
		}
		$bytes{$pid} = $total // -1;
	}
	return %bytes;
}
q1(q{SELECT webhook_ingest.enqueue('bigdocs', 'warm')});
drained(q{source = 'bigdocs'}, 1);
my %before = applier_bytes();
# The apply workers stopped while the documents are fetched: then every result is ready at once.
kill 'STOP', keys %before;
q1(q{SELECT count(*) FROM generate_series(1, 160) g, webhook_ingest.enqueue('bigdocs', 'b' || g) e});
$node->poll_query_until('postgres', q{SELECT applying = 160 FROM webhook_ingest.worker_status WHERE role = 'fetcher'})
  or diag('the documents were not all fetched');
my $t0 = time();
kill 'CONT', keys %before;
drained(q{source = 'bigdocs'}, 161) or diag('the large documents did not drain');
my $big_s = time() - $t0;
my %after = applier_bytes();
my $grown = 0;
$grown = List::Util::max($grown, $after{$_} - ($before{$_} // 0)) for keys %after;
cmp_ok($grown / 1048576, '<', 32,
	sprintf('160 results of 1000 kB ready at once (done in %.1f s): an apply worker keeps %.1f MB more, not the largest batch', $big_s,
		$grown / 1048576));
is(q1(q{SELECT count(*) FROM webhook_ingest.jobs WHERE source = 'bigdocs' AND state = 'done'}), '161', 'all done');

# A4. Documents slow to parse (60 000 keys each), a handler that does nothing: the parse is the source's cost.
my $before_ms = q1(q{SELECT handler_ms FROM webhook_ingest.worker_status WHERE role = 'fetcher'});
q1(q{SELECT count(*) FROM generate_series(1, 10) g, webhook_ingest.enqueue('keyed', 'k' || g) e});
drained(q{source = 'keyed'}, 10) or diag('the keyed documents did not drain');
my $charged = q1(q{SELECT handler_ms FROM webhook_ingest.worker_status WHERE role = 'fetcher'}) - $before_ms;
cmp_ok($charged, '>=', 10 * 10, "10 documents slow to parse: their source is charged $charged ms of apply time (their parse)");

# A3. One apply worker: a job's nextval(), then another role's handler calls lastval().
$node->append_conf('postgresql.conf', "webhook_ingest.apply_workers = 1\n");
$node->reload;
$node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM webhook_ingest.worker_status WHERE role = 'applier'})
  or die 'apply worker 1 did not stop';
q1(q{SELECT webhook_ingest.enqueue('numbered', 'n1')});
drained(q{source = 'numbered'}, 1);
q1(q{SELECT webhook_ingest.enqueue('peek', 'k1')});
drained(q{source = 'peek'}, 1);
is(q1(q{SELECT result FROM seen WHERE what = 'lastval'}), 'lastval is not yet defined in this session',
	"a handler's lastval() knows nothing of the previous job's sequence (another role's)");

$node->stop;
done_testing();
