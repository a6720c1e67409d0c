# A sweep's cursor survives a failover (issue 30), on plain streaming
# replication (the switch made by hand, so what the standby has is exact):
# synchronous replication ('*', synchronous_commit on: a page's transaction
# - its items enqueued, the cursor moved on - returns once the standby has
# it); a sweep in each style - Stripe's cursor (starting_after) and GitHub's
# Link rel="next" - of 12 pages of 10 objects none of which is known
# (since 0), each page taking 300 ms.  Mid-way the primary is stopped
# (immediate: a crash) and the standby promoted.  Then:
#  - the standby had each sweep's cursor: the page count and the URL of the
#    next page (for Stripe, starting_after the last event of the last page
#    done) as the old primary committed them;
#  - the new primary's worker goes on from that cursor at once (the page the
#    old one had leased is not waited for): the page after it is the first
#    it asks for, and is asked for exactly once; no page before it is asked
#    for again, none after it skipped or asked for twice;
#  - every object is stored at its current version; those stored before the
#    failover (on the standby at the switch) are not fetched again; the sweep
#    completes with each object listed once and no failure.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use lib 'test/t';
use ReconcileWorld;

unless ($ENV{WI_TAP_VERBOSE})
{
	no warnings 'redefine';
	*PostgreSQL::Test::BackgroundPsql::note = sub { };
}

my $primary = PostgreSQL::Test::Cluster->new('reconcile_primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', q{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 100ms
wal_keep_size = '64MB'
});
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION webhook_ingest');
$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('reconcile_standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup($standby);
$primary->append_conf('postgresql.conf', "synchronous_standby_names = '*'");
$primary->reload;
$primary->poll_query_until('postgres', q{SELECT sync_state = 'sync' FROM pg_stat_replication})
  or die 'the standby is not synchronous';

my $run = 'r194' . int(rand(1e9));
my $objects = 120;
my $pages = $objects / 10;
my %world = map { $_ => ReconcileWorld->new(key => "$run$_", style => $_, objects => $objects) } qw(github stripe);
$primary->safe_psql('postgres',
	join '', map { $world{$_}->add_source_sql($_, since => 0, list_args => '&delay_ms=300') } sort keys %world);

sub cursors
{
	my ($node, $what) = @_;
	return $node->safe_psql('postgres', qq{SELECT string_agg(s.name || ' ' || $what, ', ' ORDER BY s.name)
	    FROM webhook_ingest.reconcile_sweeps sw JOIN webhook_ingest.sources s ON s.id = sw.source_id});
}

# Mid-way: both sweeps past their 4th page.
$primary->poll_query_until('postgres', q{SELECT bool_and(pages >= 4) FROM webhook_ingest.reconcile_sweeps})
  or die 'the sweeps did not get to page 4: ' . cursors($primary, 'sw.pages');
$primary->stop('immediate');
my $t_stop = time();
# What the standby has at the switch (all it received replayed: synchronous_commit on waits for its flush, not
# its replay); the old primary's requests in flight are answered meanwhile (300 ms).
$standby->poll_query_until('postgres', 'SELECT pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn()')
  or die 'the standby did not replay what it received';
my %done = map { split / / } split /, /, cursors($standby, 'sw.pages');
my %next = map { /^(\S+) (.*)$/ } split /, (?=github |stripe )/, cursors($standby, 'sw.page_url');
my %stored = map { my $s = $_; $s => { map { $_ => 1 } split /\n/,
	$standby->safe_psql('postgres', "SELECT external_id FROM webhook_ingest.documents WHERE source = '$s'") } }
  keys %world;
Time::HiRes::sleep(0.1) while time() < $t_stop + 1.5;
my $t_switch = time();
$standby->promote;
note(sprintf('pages done at the crash, as the standby has them: %s; %s objects stored there',
	join(', ', map { "$_ $done{$_}" } sort keys %done), join(', ', map { "$_ " . keys %{ $stored{$_} } } sort keys %stored)));

$standby->poll_query_until('postgres', q{
	SELECT count(*) = 2 FROM webhook_ingest.reconcile_stats WHERE sweeps = 1 AND state = 'idle'})
  or diag($standby->safe_psql('postgres', q{SELECT source, state, page, attempts, last_error FROM webhook_ingest.reconcile_stats}));
$standby->poll_query_until('postgres', q{SELECT NOT EXISTS (SELECT FROM webhook_ingest.queue)})
  or diag($standby->safe_psql('postgres', q{SELECT source, state, count(*) FROM webhook_ingest.queue GROUP BY 1, 2}));
note(sprintf('the sweeps completed %.1f s after the promotion', time() - $t_switch));

for my $s (sort keys %world)
{
	my $w = $world{$s};
	my $k = $done{$s};
	ok($k >= 4 && $k <= $pages - 2, "$s: the crash came mid-way ($k of $pages pages done, on the standby)");
	if ($s eq 'github')
	{
		like($next{$s}, qr/[?&]page=${\ ($k + 1)}(&|$)/, "$s: the standby's cursor is the next page's Link ($k + 1)");
	}
	else
	{
		# events newest first (evt_000120 down): page $k ends at evt_(120 - 10 k + 1)
		like($next{$s}, qr/[?&]starting_after=${\ sprintf('evt_%06d', $objects - 10 * $k + 1)}(&|$)/,
			"$s: the standby's cursor is starting_after the last event of page $k");
	}
	my @log = @{ $w->requests->{log} };
	my @old = map { $_->[0] =~ /^page (\d+)/ ? $1 : () } grep { $_->[1] < $t_switch } @log;
	my @new = map { $_->[0] =~ /^page (\d+)/ ? $1 : () } grep { $_->[1] >= $t_switch } @log;
	my $old_seen = join ' ', @old;
	ok($old_seen eq join(' ', 1 .. $k) || $old_seen eq join(' ', 1 .. $k + 1),
		"$s: the old primary asked for pages 1 to $k, and at most the next one (in flight at the crash): $old_seen");
	my ($first_new) = map { $_->[1] } grep { $_->[1] >= $t_switch && $_->[0] =~ /^page/ } @log;
	cmp_ok(($first_new // 1e12) - $t_switch, '<', 15,
		sprintf("$s: the new primary went on %.1f s after the switch (the old one's page lease is 60 s)",
			($first_new // 1e12) - $t_switch));
	is("@new", join(' ', $k + 1 .. $pages),
		"$s: the new primary asked for page " . ($k + 1) . " first, then each later page once, none before again");
	my @refetched = sort grep { $stored{$s}{$_} } map { $_->[0] =~ /^fetch (.*)$/ ? $1 : () }
	  grep { $_->[1] >= $t_switch } @log;
	is(scalar(@refetched), 0, "$s: none of the " . keys(%{ $stored{$s} }) . " objects stored before the failover fetched again (@refetched)");
	cmp_ok(scalar(keys %{ $stored{$s} }), '>=', 10 * ($k - 1), "$s: (the objects of the pages done were mostly stored by then)");
	is($standby->safe_psql('postgres', "SELECT last_pages || ' ' || last_listed || ' ' || last_missed || ' ' || sweeps_failed
	         FROM webhook_ingest.reconcile_stats WHERE source = '$s'"),
		"$pages $objects $objects 0", "$s: the sweep listed each object once, across the two primaries");
	my $state = $w->state;
	my @stored = split /\n/, $standby->safe_psql('postgres', $w->stored_version_sql($s));
	is(scalar(@stored) . ' ' . scalar(grep { my ($id, $v) = split /\|/; $v == $state->{$id} } @stored),
		"$objects $objects", "$s: every object stored at its current version");
}

# (the walreceiver's FATALs once the primary is gone are not the worker's)
my @bad = grep { /ERROR|WARNING|FATAL/ && /webhook_ingest/ } split /\n/, slurp_file($standby->logfile);
is(scalar(@bad), 0, 'no error of webhook_ingest in the new primary\'s log') or diag(join "\n", @bad);
$standby->stop;
note(sprintf('%s took %d s', $0, time() - $^T));
done_testing();
