# wait_for_job and wait_replayed across a pg_auto_failover switch: every
# waiter gets an error it can retry, never a hang.
#   - wait_for_job on a primary that `pg_autoctl perform failover` shuts
#     down: 57P01 (admin_shutdown); on one killed with kill -9: the
#     connection is lost;
#   - wait_replayed on the secondary that is promoted, for WAL it had not
#     replayed: 40001, with a hint to read done_lsn again from the new
#     primary (before the fix it returned once the new timeline passed the
#     LSN: test/t/134_wait_replayed_across_promotion.pl shows that case
#     exactly);
#   - wait_for_job on the demoted old primary, now a secondary: 55000;
#   - and the retry the hint asks for works: done_lsn from the new primary,
#     wait_replayed on the new secondary.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use AutoFailover;
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $f = AutoFailover->new;
my $n1 = $f->add_node('node1');
$f->wait_states(node1 => 'single') or BAIL_OUT('node1 did not start');
$f->create_queue($n1, 200);
$n1->safe_psql('postgres', q{
	SELECT webhook_ingest.add_source('stuck', 'http://127.0.0.1:18080/slow/{external_id}?delay_ms=100000',
	                                 timeout_ms => 120000)});
my $n2 = $f->add_node('node2');
$f->wait_states(node1 => 'primary', node2 => 'secondary') or BAIL_OUT('no secondary');

# A psql of its own for one waiting statement (a session whose server goes
# away ends with psql, which BackgroundPsql does not expect).
sub start_waiter
{
	my ($node, $sql) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([ 'psql', '-XAtq', '-v', 'VERBOSITY=verbose', '-h', '127.0.0.1', '-p', $node->port,
		'-d', 'postgres', '-c', $sql ], '>', \$out, '2>', \$err);
	my $w = { h => $h, out => \$out, err => \$err, t0 => time() };
	# until its statement is under way (its wait event shows)
	$node->poll_query_until('postgres', q{SELECT count(*) > 0 FROM pg_stat_activity
		WHERE query LIKE '%webhook_ingest.wait_%' AND pid <> pg_backend_pid() AND state = 'active'})
	  or die "the waiter did not start: $err";
	return $w;
}

# The first error line (or 'ok'), and the seconds since the waiter started.
sub finish_waiter
{
	my ($w, $limit) = @_;
	while ($w->{h}->pumpable && time() - $w->{t0} < $limit)
	{
		$w->{h}->pump_nb;
		usleep(50_000);
	}
	my $secs = time() - $w->{t0};
	if ($w->{h}->pumpable)
	{
		$w->{h}->kill_kill;
		return ('hung', $secs);
	}
	$w->{h}->finish;
	my $err = ${ $w->{err} };
	my ($first) = $err =~ /^((?:ERROR|FATAL):.*|psql: error:.*|server closed the connection.*|connection to server was lost.*)$/m;
	return ($first // ($err eq '' ? 'ok' : $err), $secs, $err);
}

sub enqueue_stuck
{
	my ($node, $id) = @_;
	return $node->safe_psql('postgres', "SELECT job_id FROM webhook_ingest.enqueue('stuck', '$id')");
}

# 1. perform failover: node1 is shut down (fast), node2 promoted.
my $job = enqueue_stuck($n1, 's1');
my $w_job = start_waiter($n1, "SELECT webhook_ingest.wait_for_job($job, '120s')");
# 16 MB ahead: more than the old primary writes until it stops
my $target = $n2->safe_psql('postgres', q{SELECT pg_last_wal_replay_lsn() + 16777216});
my $w_rep = start_waiter($n2, "CALL webhook_ingest.wait_replayed('$target', '120s')");
my ($rc, $secs) = $f->perform_failover;
is($rc, 0, sprintf('pg_autoctl perform failover with two waiters: %.1f s', $secs));
my ($e, $t) = finish_waiter($w_job, 60);
like($e, qr/^FATAL:  57P01: terminating connection due to administrator command/,
	sprintf("wait_for_job on the primary being shut down: %s (after %.1f s)", $e, $t));
my ($e2, $t2, $all2) = finish_waiter($w_rep, 60);
like($e2, qr/^ERROR:  40001: recovery ended before WAL replay reached \Q$target\E/,
	sprintf("wait_replayed(%s) on the secondary being promoted: %s (after %.1f s)", $target, $e2, $t2));
like($all2, qr/HINT:  Read the job's done_lsn again from the current primary, and wait for that\./,
	'  with a hint to read done_lsn again from the new primary');
$f->wait_states(node1 => 'secondary', node2 => 'primary') or die 'no switch';
$n2->safe_psql('postgres', q{CREATE TABLE filler AS SELECT repeat('x', 1000) x FROM generate_series(1, 20000)});
is($n2->safe_psql('postgres', "SELECT pg_current_wal_flush_lsn() > '$target'"), 't',
	"  the new primary's WAL is past that LSN now (the old code returned success there)");

# 2. On the demoted old primary, a secondary now: wait_for_job refuses.
my ($ret, $out, $err) = $n1->psql('postgres', "SELECT webhook_ingest.wait_for_job($job, '1s')",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/ERROR:  55000: wait_for_job\(\) runs on the primary/,
	'wait_for_job on the old primary, now a secondary: 55000');

# 3. The retry: done_lsn from the new primary, wait_replayed on its secondary.
my $j = $n2->safe_psql('postgres', q{SELECT job_id FROM webhook_ingest.enqueue('ha', 'after-switch', NULL, 'ev-after')});
is($n2->safe_psql('postgres', "SELECT webhook_ingest.wait_for_job($j, '60s')"), 't',
	'a job enqueued on the new primary: wait_for_job true');
my $lsn = $n2->safe_psql('postgres', "SELECT done_lsn FROM webhook_ingest.jobs WHERE id = $j");
($ret, $out, $err) = $n1->psql('postgres', "CALL webhook_ingest.wait_replayed('$lsn', '60s')");
is($ret, 0, "  wait_replayed of its done_lsn ($lsn) on the new secondary returns") or diag($err);
is($n1->safe_psql('postgres', q{SELECT n FROM effects WHERE external_id = 'after-switch'}), '1',
	'  and the handler\'s row is there');

# 4. kill -9 of the primary (node2 now): its waiter loses the connection;
# the waiter on node1, promoted, gets 40001.
$job = enqueue_stuck($n2, 's2');
$w_job = start_waiter($n2, "SELECT webhook_ingest.wait_for_job($job, '120s')");
$target = $n1->safe_psql('postgres', q{SELECT pg_last_wal_replay_lsn() + 65536});
$w_rep = start_waiter($n1, "CALL webhook_ingest.wait_replayed('$target', '120s')");
my $t_kill = time();
$f->kill9($n2);
($e, $t) = finish_waiter($w_job, 60);
like($e, qr/server closed the connection unexpectedly|connection to server was lost|terminating connection/,
	sprintf('wait_for_job on a primary killed with kill -9: %s (%.1f s after the kill)', $e, time() - $t_kill));
cmp_ok(time() - $t_kill, '<', 30, '  at once, not after its 120 s timeout');
($e2, $t2) = finish_waiter($w_rep, 90);
like($e2, qr/^ERROR:  40001: recovery ended before WAL replay reached/,
	sprintf('wait_replayed on the secondary the monitor promoted: %s (%.1f s after the kill)', $e2, time() - $t_kill));
ok($f->wait_states(node1 => [ 'wait_primary', 'primary' ], timeout => 60), 'node1 is the primary again');

$f->stop_all;
done_testing();
