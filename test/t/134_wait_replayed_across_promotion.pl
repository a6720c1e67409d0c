# wait_replayed across a failover, on plain streaming replication (no
# pg_auto_failover: the switches are made by hand, so what each standby has
# received is exact).  A waiter whose target is WAL of the old primary that
# the standby never received must get a retriable error (40001), not a
# success once the new timeline's LSNs pass the target:
#   A. the standby it waits on is promoted;
#   B. the standby it waits on follows another, promoted standby onto a new
#      timeline; a target both timelines share still succeeds there.
# Before the fix both waits of A and B returned success, and the row they
# waited for was not there.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

unless ($ENV{WI_TAP_VERBOSE})
{
	no warnings 'redefine';
	*PostgreSQL::Test::BackgroundPsql::note = sub { };
}

sub conf
{
	return qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
wal_keep_size = '64MB'
};
}

sub cut_off
{
	my ($standby) = @_;
	$standby->append_conf('postgresql.conf', "primary_conninfo = ''");
	$standby->reload;
	$standby->poll_query_until('postgres', 'SELECT count(*) = 0 FROM pg_stat_wal_receiver')
	  or die 'the walreceiver did not stop';
}

sub follow
{
	my ($standby, $upstream) = @_;
	$standby->append_conf('postgresql.conf',
		sprintf("primary_conninfo = 'host=%s port=%d'", $upstream->host, $upstream->port));
	$standby->reload;
}

# A committed row; returns the LSN after its commit (what done_lsn would be).
sub commit_row
{
	my ($node, $v) = @_;
	return $node->safe_psql('postgres', "INSERT INTO t VALUES ('$v'); SELECT pg_current_wal_lsn()");
}

# New WAL on a (new) primary until its flush position passes $lsn.
sub write_past
{
	my ($node, $lsn) = @_;
	for (1 .. 200)
	{
		$node->safe_psql('postgres', q{INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 100)});
		return if $node->safe_psql('postgres', "SELECT pg_current_wal_flush_lsn() > '$lsn'") eq 't';
	}
	die "no WAL past $lsn";
}

sub start_waiter
{
	my ($node, $lsn) = @_;
	my $w = $node->background_psql('postgres', on_error_stop => 0);
	$w->query_safe('\set VERBOSITY verbose');
	# (query_until keeps what came with "start": a quick wait's "done" too)
	my $early = $w->query_until(qr/start/,
		"\\echo start\nCALL webhook_ingest.wait_replayed('$lsn', '60s');\n\\echo done\n");
	$w->{stdout} = $early;
	return { session => $w, t0 => time() };
}

# 'ok', or the first ERROR line; and the seconds it took.
sub finish_waiter
{
	my ($waiter) = @_;
	my $w = $waiter->{session};
	$w->{run}->pump
	  until $w->{stdout} =~ /done/ || $w->{stderr} =~ /ERROR|FATAL/ || time() - $waiter->{t0} > 90;
	my $secs = time() - $waiter->{t0};
	my $out = $w->{stderr} =~ /((?:ERROR|FATAL):.*)/ ? $1 : ($w->{stdout} =~ /done/ ? 'ok' : 'hung');
	$w->quit;
	return ($out, $secs);
}

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', conf());
$primary->start;
$primary->safe_psql('postgres', q{
	CREATE EXTENSION webhook_ingest;
	CREATE TABLE t (v text);
	CREATE TABLE filler (x text);
});
$primary->backup('b');
my $s1 = PostgreSQL::Test::Cluster->new('s1');
$s1->init_from_backup($primary, 'b', has_streaming => 1);
$s1->start;
$primary->wait_for_catchup($s1);

# A. Promoted during the wait.
cut_off($s1);
my $lost_a = commit_row($primary, 'lost-a');
my $waiter = start_waiter($s1, $lost_a);
$primary->stop('immediate');
my $t_promote = time();
$s1->promote;
write_past($s1, $lost_a);
my ($out, $secs) = finish_waiter($waiter);
like($out, qr/ERROR:  40001: recovery ended before WAL replay reached \Q$lost_a\E/,
	sprintf('A. wait_replayed(%s) on a standby promoted during the wait, lacking that WAL: %s (%.1f s)',
		$lost_a, $out, $secs));
is($s1->safe_psql('postgres', q{SELECT count(*) FROM t WHERE v = 'lost-a'}), '0',
	"  the row it waited for is not on the promoted server (success would have been a lie)");
is($s1->safe_psql('postgres', "SELECT pg_current_wal_flush_lsn() > '$lost_a'"), 't',
	'  though its new timeline is past that LSN');
cmp_ok(time() - $t_promote, '<', 30, '  the error came within seconds of the promotion, not at the timeout');

# A waiter for WAL the standby did replay before its promotion still succeeds,
# and a new one on the promoted server waits for its flush, as on any primary.
$waiter = start_waiter($s1, $s1->safe_psql('postgres', 'SELECT pg_current_wal_flush_lsn()'));
($out) = finish_waiter($waiter);
is($out, 'ok', 'on the promoted server wait_replayed of a flushed LSN returns');

# B. Following a new primary on a new timeline.  s1 is now the primary
# (timeline 2); s2 and s3 stream from it.  s3 is cut off first, then s2 gets
# one more row (both timelines share it), then s2 is cut off and s1 commits
# a row nobody receives.  s2 is promoted (timeline 3), s3 follows it.
$s1->backup('b2');
my $s2 = PostgreSQL::Test::Cluster->new('s2');
$s2->init_from_backup($s1, 'b2', has_streaming => 1);
$s2->start;
my $s3 = PostgreSQL::Test::Cluster->new('s3');
$s3->init_from_backup($s1, 'b2', has_streaming => 1);
$s3->start;
$s1->wait_for_catchup($s2);
$s1->wait_for_catchup($s3);
cut_off($s3);
my $shared = commit_row($s1, 'shared-b');
$s1->wait_for_catchup($s2);
cut_off($s2);
my $lost_b = commit_row($s1, 'lost-b');
my $w_shared = start_waiter($s3, $shared);
my $w_lost = start_waiter($s3, $lost_b);
$s1->stop('immediate');
$s2->promote;
follow($s3, $s2);
write_past($s2, $lost_b);
($out, $secs) = finish_waiter($w_shared);
is($out, 'ok', sprintf('B. wait_replayed(%s), WAL both timelines share, returns on the standby that switched timelines (%.1f s)',
	$shared, $secs));
is($s3->safe_psql('postgres', q{SELECT count(*) FROM t WHERE v = 'shared-b'}), '1', '  and that row is there');
($out, $secs) = finish_waiter($w_lost);
like($out, qr/ERROR:  40001: WAL replay switched to a new timeline before reaching \Q$lost_b\E/,
	sprintf('B. wait_replayed(%s) of WAL only the old timeline had: %s (%.1f s)', $lost_b, $out, $secs));
$s3->poll_query_until('postgres', "SELECT pg_last_wal_replay_lsn() > '$lost_b'")
  or diag('s3 did not replay past the target on timeline 3');
is($s3->safe_psql('postgres', q{SELECT count(*) FROM t WHERE v = 'lost-b'}), '0',
	"  the row is not on that standby, whose replay on timeline 3 is past the LSN");
is($s3->safe_psql('postgres', q{SELECT received_tli FROM pg_stat_wal_receiver}), '3',
	'  it streams timeline 3 from the new primary');

$s3->stop;
$s2->stop;
$s1->stop;
done_testing();
