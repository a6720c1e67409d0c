# Audit of 8d12040 (a batch's handled jobs marked done in one statement after
# all its handlers ran, NOTIFY by Async_Notify): what a handler owner (no
# admin rights, webhook_ingest_enqueue granted) can do to its own job and to
# the others of its batch.  One batch of 30 jobs (a 300 ms upstream, so they
# are fetched together) in which
#  - "self-*" handlers enqueue their own object while they run (a webhook
#    that came meanwhile): exactly one more fetch, then done;
#  - "enqfail-*" enqueue their own object and then raise, the first time:
#    the enqueue is rolled back with them, so exactly one retry, no refetch;
#  - "fail-*" raise the first time: retried, done, effect once;
#  - "guc-*" SET LOCAL statement_timeout/lock_timeout to 1 ms and
#    synchronous_commit off: the batch's one completion statement is not
#    hurt by them;
#  - every handler NOTIFYs its own channel: a listener hears each committed
#    run once, never a rolled-back one; webhook_ingest_done arrives exactly
#    once per done job, never for a job while it is pending or failed.
use strict;
use warnings;
use lib 'test/t';
use AuditNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = AuditNode::start('audit_batched_completion');
$node->safe_psql('postgres', q{
	GRANT webhook_ingest_enqueue TO dev;
	SET ROLE dev;
	CREATE TABLE devs.runs (external_id text, at timestamptz DEFAULT clock_timestamp());
	CREATE TABLE devs.once (what text PRIMARY KEY);
	CREATE SEQUENCE devs.calls_enqfail;
	CREATE SEQUENCE devs.calls_fail;
	CREATE FUNCTION devs.h(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE plpgsql AS $$
	BEGIN
		INSERT INTO devs.runs (external_id) VALUES (external_id);
		PERFORM pg_notify('dev_runs', external_id);
		IF external_id LIKE 'self-%' AND NOT EXISTS (SELECT FROM devs.once o WHERE o.what = external_id) THEN
			INSERT INTO devs.once VALUES (external_id);
			PERFORM webhook_ingest.enqueue('b', external_id);
		ELSIF external_id LIKE 'enqfail-%' THEN
			IF nextval('devs.calls_enqfail') <= 2 THEN
				PERFORM webhook_ingest.enqueue('b', external_id);
				RAISE EXCEPTION 'failing after an enqueue of my own object';
			END IF;
		ELSIF external_id LIKE 'fail-%' THEN
			IF nextval('devs.calls_fail') <= 2 THEN
				RAISE EXCEPTION 'failing once';
			END IF;
		ELSIF external_id LIKE 'guc-%' THEN
			SET LOCAL statement_timeout = 1;
			SET LOCAL lock_timeout = 1;
			SET LOCAL synchronous_commit = off;
			PERFORM set_config('search_path', 'devs', true);
		END IF;
	END $$;
	RESET ROLE;
	SELECT webhook_ingest.add_source('b', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=300',
	                                 'devs.h(text,jsonb,jsonb)', max_attempts => 5);
});
my $listener = $node->background_psql('postgres', on_error_stop => 0);
$listener->query_safe('LISTEN webhook_ingest_done; LISTEN dev_runs');

my @kinds = (map("self-$_", 1 .. 5), map("enqfail-$_", 1 .. 2), map("fail-$_", 1 .. 2), map("guc-$_", 1 .. 5),
	map("plain-$_", 1 .. 16));
my $list = join(',', map("'$_'", @kinds));
$node->safe_psql('postgres', qq{SELECT count(*) FROM unnest(ARRAY[$list]) k, webhook_ingest.enqueue('b', k)});
$node->poll_query_until('postgres', q{
	SELECT count(*) = 30 AND bool_and(state = 'done') FROM webhook_ingest.jobs WHERE source = 'b'
	   AND NOT EXISTS (SELECT FROM webhook_ingest.queue WHERE source = 'b')})
  or diag($node->safe_psql('postgres', q{SELECT string_agg(external_id || ':' || state || ':' || coalesce(last_error, ''), E'\n')
	FROM webhook_ingest.jobs WHERE source = 'b' AND state <> 'done'}));
sleep 1;    # anything that would come late (a refetch too many)

sub q1 { return $node->safe_psql('postgres', shift); }
is(q1(q{SELECT count(*) FROM webhook_ingest.jobs WHERE source = 'b' AND state = 'done'}), '30', 'all 30 jobs done');
is(q1(q{SELECT string_agg(DISTINCT n::text, ',') FROM (SELECT count(*) n FROM devs.runs
         WHERE external_id LIKE 'self-%' GROUP BY external_id) s}), '2',
	'a handler that enqueued its own object: exactly one refetch (2 committed runs each)');
is(q1(q{SELECT count(*) || '/' || count(DISTINCT external_id) FROM devs.runs WHERE external_id ~ '^(enqfail|fail|guc|plain)-'}),
	'25/25', 'every other job: one committed run');
is(q1(q{SELECT last_value FROM devs.calls_enqfail}), '4',
	'an enqueue rolled back with its failing handler asked for no fetch (2 objects: a failure and a success each)');
is(q1(q{SELECT string_agg(external_id || ':' || attempts, ',' ORDER BY external_id) FROM webhook_ingest.jobs
         WHERE source = 'b' AND external_id ~ '^(enqfail|fail)-'}),
	'enqfail-1:2,enqfail-2:2,fail-1:2,fail-2:2', 'the failed ones: done at their second attempt');

my $heard = '';
for (1 .. 30)
{
	$heard .= $listener->query('SELECT 1') // '';
	sleep 0.1;
}
my %done_heard;
$done_heard{$1}++ while $heard =~ /"webhook_ingest_done" with payload "\{"job_id": (\d+)\}"/g;
my %runs_heard;
$runs_heard{$1}++ while $heard =~ /"dev_runs" with payload "([^"]+)"/g;
my @done_ids = split /\n/, q1(q{SELECT id FROM webhook_ingest.jobs WHERE source = 'b' AND state = 'done' ORDER BY id});
my $self_done = q1(q{SELECT count(*) FROM webhook_ingest.jobs WHERE source = 'b' AND external_id LIKE 'self-%'});
is(scalar(grep { ($done_heard{$_} // 0) == 1 } @done_ids) . '/' . scalar(keys %done_heard), '30/30',
	'webhook_ingest_done: once for each done job, for no other');
is(join(',', map { "$_:" . ($runs_heard{$_} // 0) } qw(self-1 enqfail-1 fail-1 guc-1 plain-1)),
	'self-1:2,enqfail-1:1,fail-1:1,guc-1:1,plain-1:1',
	"a handler's own NOTIFY: once per committed run, none from a rolled-back one");
$listener->quit;
$node->stop;
done_testing();
