# Reconciliation through the worker (issue 30), against the test upstream's
# lists, with the settings of doc/pending/30-reconciliation.md's examples:
#  1. a sweep in each shape - GitHub (Link rel="next", page numbers), Shopify
#     (a Link header per rel, page_info), Stripe (/v1/events, starting_after,
#     has_more) - after 40 changes of 60 objects whose 36 webhooks were taken:
#     the 4 changes no webhook announced are found, fetched as jobs with
#     events 0 and counted as missed (10 %); every object's stored document
#     is its newest; nothing current was fetched (the upstream counts each
#     object's fetches: each changed one exactly once); each page once, with
#     the source's headers; a sweep after that fetches nothing;
#  2. page fetches count against the source's concurrency cap and come after
#     its webhooks' jobs: with max_in_flight 1 and three slow webhook fetches
#     due, the page waits for all three;
#  3. pages take at most share of the source's rate_limit: 20/s with share
#     0.1 spaces the pages of a sweep half a second apart;
#  4. a source's jobs a webhook announced are claimed before those no webhook
#     announced (reconciled), with one slot (max_in_flight 1);
#  5. a backlog of webhooks pauses the sweep: with pause_backlog 3 and 10
#     webhooks' jobs due that the fetcher's claim cannot take (a transaction
#     holds their rows: the claim skips locked rows) and nothing else holding
#     the pages back (no rate limit, no max_in_flight), the source shows as
#     backlogged and no page of its due sweep is asked for in 1.5 s; once 8
#     are released and fetched (2 due, fewer than 3) the page is asked for
#     and the sweep completes; without the backlog check the page would be
#     asked for at once.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use lib 'test/t';
use ReconcileWorld;

my $node = ReconcileWorld::start_node('reconcile_sweeps', q{
webhook_ingest.backoff_base = 50ms
webhook_ingest.backoff_max = 200ms
});

sub q1 { return $node->safe_psql('postgres', shift); }

my $run = 'r190' . int(rand(1e9));
my %world = map { $_ => ReconcileWorld->new(key => "$run$_", style => $_, objects => 60) } qw(github shopify stripe);

# Time passes: the next sweep of each source is due (the lease check's round looks within a second).
sub sweep_now
{
	my @sources = map { ReconcileWorld::lit($_) } @_;
	q1("UPDATE webhook_ingest.reconcile_sweeps sw SET next_attempt_at = now() FROM webhook_ingest.sources s
	     WHERE s.id = sw.source_id AND s.name IN (" . join(', ', @sources) . ')');
}

sub wait_sweeps
{
	my ($n, @sources) = @_;
	my $in = join ', ', map { ReconcileWorld::lit($_) } @sources;
	$node->poll_query_until('postgres', qq{
		SELECT count(*) = ${\ scalar @sources} FROM webhook_ingest.reconcile_stats
		 WHERE source IN ($in) AND sweeps >= $n AND state = 'idle'
		   AND NOT EXISTS (SELECT FROM webhook_ingest.queue q WHERE q.source IN ($in) AND q.state <> 'dead')})
	  or diag(q1("SELECT source, state, page, attempts, last_error FROM webhook_ingest.reconcile_stats"));
}

# 1. The three shapes.
q1(join '', map { $world{$_}->add_source_sql($_) } sort keys %world);
wait_sweeps(1, keys %world);
is(q1(q{SELECT string_agg(source || ' ' || last_listed || ' ' || last_changed, ', ' ORDER BY source)
         FROM webhook_ingest.reconcile_stats}),
	'github 1 0, shopify 1 0, stripe 1 0', 'the first sweeps ran when configured, and found nothing changed since');

my %changes;
my %missed;
for my $s (sort keys %world)
{
	$changes{$s} = $world{$s}->change(40);
	$missed{$s} = join ' ', sort map { $_->{id} } grep { !$_->{webhook} } @{ $changes{$s} };
	q1($world{$s}->deliver_sql($s, $changes{$s}));
}
$node->poll_query_until('postgres', q{SELECT count(*) = 108 FROM webhook_ingest.jobs WHERE state = 'done'})
  or diag(q1(q{SELECT source, state, count(*) FROM webhook_ingest.jobs GROUP BY 1, 2}));
my $t0 = time();
sweep_now(keys %world);
wait_sweeps(2, keys %world);
note(sprintf('the three sweeps and their fetches took %.1f s', time() - $t0));

for my $s (sort keys %world)
{
	my $w = $world{$s};
	my $asked = $w->requests;
	my %changed = map { $_->{id} => $_->{version} } @{ $changes{$s} };
	is(q1("SELECT last_changed || ' ' || last_missed || ' ' || last_missed_rate || ' ' || missed_rate
	         || ' ' || sweeps || ' ' || sweeps_failed || ' ' || (lag < '1 minute') || ' ' || reconciled_jobs
	         FROM webhook_ingest.reconcile_stats WHERE source = '$s'"),
		'40 4 0.1000 0.1000 2 0 true 0', "$s: 40 changed, the 4 no webhook announced counted as missed (10 %), lag shown");
	is(q1("SELECT string_agg(external_id, ' ' ORDER BY external_id) FROM webhook_ingest.jobs
	        WHERE source = '$s' AND state = 'done' AND events = 0"),
		$missed{$s}, "$s: exactly those were fetched as jobs no webhook announced (events 0)");
	my @twice = grep { $asked->{fetches}{$_} != 1 } keys %changed;
	my @current = grep { !exists $changed{$_} } keys %{ $asked->{fetches} };
	is(scalar(@twice) . ' ' . scalar(@current), '0 0',
		"$s: each changed object fetched exactly once, no current one fetched (@twice @current)");
	my $state = $w->state;
	my @stored = split /\n/, q1($w->stored_version_sql($s));
	my @stale = grep { my ($id, $v) = split /\|/; $v != $state->{$id} } @stored;
	is(scalar(@stored) . ' ' . scalar(@stale), '40 0', "$s: every changed object's stored document is its newest");
	is(q1("SELECT count(*) FILTER (WHERE o.version = (1704067200 + s.v::bigint) * 1000000 AND o.listed IS NULL)
	         FROM jsonb_each_text('${\ JSON::PP::encode_json(\%changed)}') s(id, v)
	         JOIN webhook_ingest.reconcile_objects o ON o.external_id = s.id
	         JOIN webhook_ingest.sources x ON x.id = o.source_id AND x.name = '$s'"),
		'40', "$s: the version kept per object is the one fetched");
	my $pages = q1("SELECT last_pages FROM webhook_ingest.reconcile_stats WHERE source = '$s'");
	is(join(' ', map { $asked->{pages}{$_} // 0 } 1 .. $pages + 1), join(' ', 2, (1) x ($pages - 1), 0),
		"$s: each of its $pages pages asked for once (page 1 by both sweeps)");
	is(scalar(grep { $_->[0] =~ /^page/ && ($_->[2] // '') ne $w->credential } @{ $asked->{log} }), 0,
		"$s: every page was fetched with the source's headers");
}

# Nothing changed since: the next sweep fetches nothing.
sweep_now(keys %world);
wait_sweeps(3, keys %world);
is(q1(q{SELECT string_agg(source || ' ' || last_changed || ' ' || last_missed, ', ' ORDER BY source)
         FROM webhook_ingest.reconcile_stats}), 'github 0 0, shopify 0 0, stripe 0 0',
	'a sweep after that finds nothing changed');
is(join(' ', map { my $f = $world{$_}->requests->{fetches}; (grep { $f->{$_} != 1 } keys %$f) + 0 } sort keys %world),
	'0 0 0', 'and fetches nothing again');

# A GitHub source with one fetch at a time (max_in_flight 1), each of its objects' taking $delay_ms, its first sweep done.
sub one_slot_source
{
	my ($name, $delay_ms) = @_;
	my $w = ReconcileWorld->new(key => "$run$name", style => 'github', objects => 20);
	q1($w->add_source_sql($name, more => 'max_in_flight => 1'));
	wait_sweeps(1, $name);
	q1("SELECT webhook_ingest.alter_source('$name', url_template => " . ReconcileWorld::lit(
		"http://127.0.0.1:18080/github/repos/acme/app/issues/{external_id}?key=$run$name&delay_ms=$delay_ms") . ')');
	return $w;
}

# 2. The concurrency cap: a page waits while the webhooks' jobs hold the one slot.
my $cap = one_slot_source('cap', 300);
my $capped = $cap->change(3);
q1("BEGIN; " . $cap->deliver_sql('cap', $capped, 1)
	. "UPDATE webhook_ingest.reconcile_sweeps SET next_attempt_at = now()
	    WHERE source_id = (SELECT id FROM webhook_ingest.sources WHERE name = 'cap');
	   SELECT webhook_ingest.alter_source('cap', weight => 1); COMMIT;");
wait_sweeps(2, 'cap');
my @log = @{ $cap->requests->{log} };
my @fetches = map { $_->[1] } grep { $_->[0] =~ /^fetch/ } @log;
my ($page) = map { $_->[1] } grep { $_->[0] eq 'page 1' } reverse @log;
cmp_ok($page, '>', $fetches[-1], 'max_in_flight 1: the page came after the third webhook fetch was answered')
  or diag(join "\n", map { "$_->[0] $_->[1]" } @log);
is(scalar(@fetches), 3, 'each fetched once');
cmp_ok(min_gap(@fetches), '>=', 0.25, 'one at a time (each takes 0.3 s)');

# 3. The share of the rate limit: 4 pages of current objects at 0.1 x 20 a second.
my $paced = ReconcileWorld->new(key => "${run}paced", style => 'github', objects => 20);
q1($paced->add_source_sql('paced', per_page => 5, reconcile => { share => 0.1 }, more => 'rate_limit => 20'));
wait_sweeps(1, 'paced');
q1($paced->deliver_sql('paced', $paced->change(20), 1));
$node->poll_query_until('postgres', q{SELECT count(*) = 20 FROM webhook_ingest.jobs WHERE source = 'paced' AND state = 'done'});
sweep_now('paced');
wait_sweeps(2, 'paced');
my @pages = map { $_->[1] } grep { $_->[0] =~ /^page/ } @{ $paced->requests->{log} };
shift @pages;    # the first sweep's
is(scalar(@pages) . ' ' . q1(q{SELECT last_pages || ' ' || last_changed || ' ' || last_missed
                                  FROM webhook_ingest.reconcile_stats WHERE source = 'paced'}),
	'4 4 20 0', 'a sweep of 4 pages: 20 objects changed since the last, none missed');
is(scalar(grep { $_ != 1 } values %{ $paced->requests->{fetches} }), 0, 'none fetched again');
cmp_ok(min_gap(@pages), '>=', 0.4, sprintf('share 0.1 of rate_limit 20: pages %.2f s apart at least (0.5 s)', min_gap(@pages)));

# 4. The jobs a webhook announced are claimed before those no webhook announced: a sweep
# enqueues 3 of the latter, one is fetched (1 s, max_in_flight 1), two webhooks come.
my $ord = one_slot_source('order', 1000);
my @unannounced = map { $_->{id} } @{ $ord->change(3) };
sweep_now('order');
q1(q{SELECT webhook_ingest.alter_source('order', weight => 1)});
$node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM webhook_ingest.queue WHERE source = 'order' AND state = 'running' AND events = 0})
  or diag(q1(q{SELECT external_id, state, events FROM webhook_ingest.queue WHERE source = 'order'}));
q1(q{SELECT webhook_ingest.enqueue('order', '5'), webhook_ingest.enqueue('order', '6')});
wait_sweeps(2, 'order');
my @order = map { $_->[0] =~ s/^fetch //r } grep { $_->[0] =~ /^fetch/ } @{ $ord->requests->{log} };
is(join(' ', map { my $id = $_; (grep { $_ eq $id } @unannounced) ? 'r' : 'w' } @order), 'r w w r r',
	"the webhooks' jobs went before the two no webhook announced that were waiting (@order)");

# 5. A backlog of webhooks pauses the sweep (pause_backlog 3), and nothing else holds its pages back here:
# no rate limit, no max_in_flight; the 10 webhooks' jobs are due, but the claim cannot take them (a
# transaction holds their rows, FOR KEY SHARE as a foreign key's check would; the claim skips locked rows).
my $bl = ReconcileWorld->new(key => "${run}backlog", style => 'github', objects => 20);
# (a page takes 600 ms: the released jobs' fetches are stored before it is read, or they would be fetched again)
q1($bl->add_source_sql('backlog', list_args => '&delay_ms=600', reconcile => { pause_backlog => 3 }));
wait_sweeps(1, 'backlog');
my @bl_changed = map { $_->{id} } @{ $bl->change(8) };    # 8 changed, webhooks for them and for 2 unchanged
q1("BEGIN; SELECT webhook_ingest.pause_source('backlog'); " . $bl->deliver_sql('backlog', [ map { +{ id => $_, payload => {} } } @bl_changed, 5, 6 ], 1) . 'COMMIT;');
my %hold;
for my $who ([ changed => "external_id NOT IN ('5', '6')" ], [ unchanged => "external_id IN ('5', '6')" ])
{
	$hold{ $who->[0] } = $node->background_psql('postgres');
	$hold{ $who->[0] }->query_safe("BEGIN; SELECT count(*) FROM (SELECT FROM webhook_ingest.queue
	    WHERE source = 'backlog' AND $who->[1] FOR KEY SHARE) l");
}
q1(q{BEGIN; SELECT webhook_ingest.resume_source('backlog');
      UPDATE webhook_ingest.reconcile_sweeps SET next_attempt_at = now()
       WHERE source_id = (SELECT id FROM webhook_ingest.sources WHERE name = 'backlog'); COMMIT;});
Time::HiRes::sleep(1.5);    # the sweep is due, the fetcher free: several claims of jobs and pages
is(q1(q{SELECT count(*) || ' ' || (SELECT state FROM webhook_ingest.reconcile_stats WHERE source = 'backlog')
          FROM webhook_ingest.queue WHERE source = 'backlog' AND state = 'pending' AND next_attempt_at <= now()}),
	'10 backlogged', '10 webhook jobs due for 1.5 s, pause_backlog 3: the source shows as backlogged');
is($bl->requests->{pages}{1}, 1, '  and no page of its due sweep was asked for');
my $t_release = time();
$hold{changed}->query_safe('COMMIT');
$node->poll_query_until('postgres', q{SELECT sweeps = 2 FROM webhook_ingest.reconcile_stats WHERE source = 'backlog'})
  or diag(q1(q{SELECT state, page, attempts, last_error FROM webhook_ingest.reconcile_stats WHERE source = 'backlog'}));
my $bl_asked = $bl->requests;
my ($bl_page) = map { $_->[1] } grep { $_->[0] eq 'page 1' } reverse @{ $bl_asked->{log} };
my @bl_fetched = map { "$_:" . ($bl_asked->{fetches}{$_} // 0) } @bl_changed, 5, 6;
is("@bl_fetched", join(' ', map { "$_:1" } @bl_changed) . ' 5:0 6:0',
	'the 8 released jobs fetched once each; the 2 still held not fetched');
cmp_ok($bl_page, '>', $t_release, 'the page was asked for once the jobs were released');
is(q1(q{SELECT sweeps || ' ' || sweeps_failed || ' ' || state || ' '
                || (SELECT count(*) FROM webhook_ingest.queue WHERE source = 'backlog' AND state = 'pending')
          FROM webhook_ingest.reconcile_stats WHERE source = 'backlog'}),
	'2 0 idle 2', 'with 2 jobs due (fewer than pause_backlog), the sweep went on and completed');
$hold{unchanged}->query_safe('COMMIT');
$_->quit for values %hold;
wait_sweeps(2, 'backlog');
is(join(' ', map { $bl->requests->{fetches}{$_} // 0 } @bl_changed, 5, 6), join(' ', (1) x 10),
	'then the 2 were fetched, each of the 10 once');

sub min_gap
{
	my @t = sort { $a <=> $b } @_;
	my $min = 1e9;
	$min = $t[$_] - $t[ $_ - 1 ] < $min ? $t[$_] - $t[ $_ - 1 ] : $min for 1 .. $#t;
	return $min;
}

my @bad = grep { /ERROR|WARNING|FATAL/ } split /\n/, slurp_file($node->logfile);
is(scalar(@bad), 0, 'no error in the log') or diag(join "\n", @bad);
$node->stop;
note(sprintf('%s took %d s', $0, time() - $^T));
done_testing();
