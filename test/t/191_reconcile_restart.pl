# A sweep's cursor is a row (issue 30): a sweep in each style - Stripe's
# cursor (starting_after) and GitHub's Link rel="next" - interrupted twice,
# by pg_ctl restart and by kill -9 of the fetcher (a crash restart of the
# cluster), resumes at the page it was on, at once (the page leased by the
# fetcher that went is not waited for: its lease would hold it 60 s): the
# upstream's page request counts show no page fetched from the beginning
# again and none skipped; every object is listed once and stored.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use lib 'test/t';
use ReconcileWorld;

my $node = ReconcileWorld::start_node('reconcile_restart', q{
restart_after_crash = on
});

sub q1 { return $node->safe_psql('postgres', shift); }

my $run = 'r191' . int(rand(1e9));
my $objects = 120;
my %world = map { $_ => ReconcileWorld->new(key => "$run$_", style => $_, objects => $objects) } qw(github stripe);
# every object unknown (since 0): each page enqueues its 10; a page takes 300 ms
q1(join '', map { $world{$_}->add_source_sql($_, since => 0, list_args => '&delay_ms=300') } sort keys %world);

sub pages
{
	return q1(q{SELECT string_agg(s.name || ' ' || sw.pages, ', ' ORDER BY s.name)
	              FROM webhook_ingest.reconcile_sweeps sw JOIN webhook_ingest.sources s ON s.id = sw.source_id});
}

sub wait_pages
{
	my $n = shift;
	$node->poll_query_until('postgres', qq{
		SELECT bool_and(sw.pages >= $n OR sw.sweeps > 0) FROM webhook_ingest.reconcile_sweeps sw})
	  or die 'the sweeps did not get to page ' . $n . ': ' . pages();
	return pages();
}

# 1. pg_ctl restart mid-sweep.
my $before = wait_pages(3);
$node->restart;
my $up = time();
my $after = pages();
note("pages done at the restart: $before; once it was back: $after");
like($after, qr/^github ([3-9]|1[01]), stripe ([3-9]|1[01])$/, 'the restart left both sweeps mid-way, their cursors kept');
my ($least) = sort { $a <=> $b } $after =~ /(\d+)/g;
wait_pages($least + 1);
my $resumed = time() - $up;
cmp_ok($resumed, '<', 15, sprintf('the sweeps went on %.1f s after the restart (the page lease is 60 s)', $resumed));

# 2. kill -9 of the fetcher mid-sweep: the cluster restarts after a crash.
my $before_kill = wait_pages(7);
my $fetcher = q1(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'});
kill 'KILL', $fetcher;
note("pages done when the fetcher (pid $fetcher) was killed: $before_kill");
like($before_kill, qr/^github ([7-9]|1[01]), stripe ([7-9]|1[01])$/, 'the kill came mid-way in both sweeps');
$node->poll_query_until('postgres', q{
	SELECT count(*) = 2 FROM webhook_ingest.reconcile_stats WHERE sweeps = 1 AND state = 'idle'})
  or diag(q1(q{SELECT source, state, page, attempts, last_error FROM webhook_ingest.reconcile_stats}));
$node->poll_query_until('postgres', q{SELECT NOT EXISTS (SELECT FROM webhook_ingest.queue)})
  or diag(q1(q{SELECT source, state, count(*) FROM webhook_ingest.queue GROUP BY 1, 2}));
like(slurp_file($node->logfile), qr/\(PID $fetcher\) was terminated by signal 9/, 'the fetcher was killed');

for my $s (sort keys %world)
{
	my $asked = $world{$s}->requests->{pages};
	my $pages = $objects / 10;
	my @counts = map { $asked->{$_} // 0 } 1 .. $pages;
	is($counts[0], 1, "$s: page 1 asked for once: no sweep started from the beginning again");
	is(scalar(grep { $_ == 0 } @counts), 0, "$s: no page skipped (@counts)");
	cmp_ok(eval { my $t = 0; $t += $_ for @counts; $t }, '<=', $pages + 2,
		"$s: at most the two pages in flight at the restart and the kill asked for again");
	is(q1("SELECT last_pages || ' ' || last_listed || ' ' || last_changed || ' ' || last_missed || ' ' || sweeps_failed
	         FROM webhook_ingest.reconcile_stats WHERE source = '$s'"),
		"$pages $objects $objects $objects 0", "$s: the sweep listed each object once, all found missed");
	my $state = $world{$s}->state;
	my @stored = split /\n/, q1($world{$s}->stored_version_sql($s));
	is(scalar(grep { my ($id, $v) = split /\|/; $v == $state->{$id} } @stored), $objects,
		"$s: every object fetched and stored");
}
$node->stop;
note(sprintf('%s took %d s', $0, time() - $^T));
done_testing();
