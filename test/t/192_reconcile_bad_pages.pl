# Bad list responses through the worker (issue 30): page 2 of a 3-page sweep
# answers once with something that is not a page - not JSON, an item
# without its id, a cursor that repeats (GitHub's Link to itself, Stripe's
# starting_after giving page 1 again), a valid page of 10 MB (over
# max_page_size, cut off while it is read), an HTTP 500, a 503 with
# Retry-After: 3 (honoured: longer than the back-off).  Each is refused
# with a clear error in recent_failures (no job id; the page's URL) and
# nothing of it kept; the page is asked for again after the back-off, never
# skipped, and the sweep ends with every object found: nothing lost.  A page
# bad every time ends the sweep after the source's max_attempts (failed,
# recent_failures says so), page 3 never asked for; the next sweep starts
# over at its time.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 'test/t';
use ReconcileWorld;

my $node = ReconcileWorld::start_node('reconcile_bad', q{
webhook_ingest.backoff_base = 200ms
webhook_ingest.backoff_max = 1s
});

sub q1 { return $node->safe_psql('postgres', shift); }

my $run = 'r192' . int(rand(1e9));
my $repeats = qr/^page 2: the cursor repeats: the next page is one this sweep fetched already \(SQLSTATE 22023\)$/;
my %bad = (    # name => [style, kind, times, the error]
	notjson => [ github => notjson => 1, qr/^page 2: the page is not JSON: invalid input syntax for type json \(SQLSTATE 22P02\)$/ ],
	noid => [ github => noid => 1, qr/^page 2: item 2 of the page has no id at \$\."number" \(SQLSTATE 22023\)$/ ],
	repeat => [ github => repeat => 1, $repeats ],
	repeat_cursor => [ stripe => repeat => 1, $repeats ],
	huge => [ github => huge => 1, qr/^page 2: response body over the reconcile setting max_page_size \(4194304 bytes\)$/ ],
	500 => [ github => 500 => 1, qr/^page 2: HTTP status 500$/ ],
	retryafter => [ github => retryafter => 1, qr/^page 2: HTTP status 503$/ ],
	always => [ github => notjson => -1, qr/^page 2: the page is not JSON/ ]);
my %world;
for my $name (sort keys %bad)
{
	my ($style, $kind, $times) = @{ $bad{$name} };
	$world{$name} = ReconcileWorld->new(key => "$run$name", style => $style, objects => 12);
	$world{$name}->up("reconcile/bad?page=2&kind=$kind&times=$times");
}
# all at once: every object unknown (since 0), 4 a page
q1(join '', map { $world{$_}->add_source_sql("bad_$_", since => 0, per_page => 4, more => 'max_attempts => 3') }
	sort keys %world);
$node->poll_query_until('postgres', q{
	SELECT attempts = 1 FROM webhook_ingest.reconcile_stats WHERE source = 'bad_retryafter'});
is(q1(q{SELECT next_page_at - last_error_at >= interval '2.9 s' FROM webhook_ingest.reconcile_stats
         WHERE source = 'bad_retryafter'}), 't', "retryafter: the page is due again after its Retry-After (3 s)");
$node->poll_query_until('postgres', q{
	SELECT count(*) = 8 FROM webhook_ingest.reconcile_stats WHERE state = 'idle' AND (sweeps = 1 OR sweeps_failed = 1)})
  or diag(q1(q{SELECT source, state, page, attempts, last_error FROM webhook_ingest.reconcile_stats}));
$node->poll_query_until('postgres', q{SELECT NOT EXISTS (SELECT FROM webhook_ingest.queue)});

for my $name (sort grep { $_ ne 'always' } keys %world)
{
	my $w = $world{$name};
	my $asked = $w->requests;
	my @failures = split /\n/, q1("SELECT coalesce(job_id::text, 'none') || '|' || attempt || '|' || outcome || '|'
	  || (external_id ~ '^http://127.0.0.1:18080/.*key=$run$name') || '|' || error
	  FROM webhook_ingest.recent_failures WHERE source = 'bad_$name'");
	is(scalar(@failures), 1, "$name: one failed page in recent_failures");
	my ($job, $attempt, $outcome, $url_shown, $error) = split /\|/, $failures[0] // '', 5;
	is("$job $attempt $outcome $url_shown", 'none 1 retry true', "$name: no job id, the page's URL, retried");
	like($error, $bad{$name}[3], "$name: the error says what was wrong: $error");
	is(join(' ', map { $asked->{pages}{$_} // 0 } 1 .. 4), '1 2 1 0', "$name: page 2 asked for again, none skipped");
	my @page2 = map { $_->[1] } grep { $_->[0] eq 'page 2' } @{ $asked->{log} };
	my $wait = $name eq 'retryafter' ? 2.9 : 0.1;
	cmp_ok($page2[1] - $page2[0], '>=', $wait,
		sprintf("$name: after the back-off (%.2f s; $wait s at least)", $page2[1] - $page2[0]));
	is(q1("SELECT sweeps || ' ' || sweeps_failed || ' ' || last_listed || ' ' || last_missed || ' ' || attempts
	         || ' ' || (last_error IS NOT NULL) FROM webhook_ingest.reconcile_stats WHERE source = 'bad_$name'"),
		'1 0 12 12 0 true', "$name: the sweep completed and listed every object once");
	is(scalar(keys %{ $asked->{fetches} }), 12, "$name: every object fetched: nothing lost");
}

# A page bad every time.
my $asked = $world{always}->requests;
is(join(' ', map { $asked->{pages}{$_} // 0 } 1 .. 3), '1 3 0', 'always bad: page 2 asked for max_attempts (3) times, page 3 never');
is(q1(q{SELECT string_agg(attempt || ' ' || outcome, ', ' ORDER BY attempt) FROM webhook_ingest.recent_failures
         WHERE source = 'bad_always'}), '1 retry, 2 retry, 3 dead', 'each attempt in recent_failures, the last one dead');
is(q1(q{SELECT sweeps || ' ' || sweeps_failed || ' ' || state || ' ' || (page IS NULL) || ' '
              || (next_page_at > now() + interval '50 minutes') || ' ' || (last_error LIKE 'page 2: the page is not JSON%')
         FROM webhook_ingest.reconcile_stats WHERE source = 'bad_always'}),
	'0 1 idle true true true', 'the sweep failed with the page\'s error; the next starts over at its time');
is(scalar(keys %{ $asked->{fetches} }), 4, 'the objects of page 1 were fetched');
$node->stop;
note(sprintf('%s took %d s', $0, time() - $^T));
done_testing();
