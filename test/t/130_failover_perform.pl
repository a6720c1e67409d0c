# Failover under pg_auto_failover in the middle of a run: `pg_autoctl
# perform failover` while 8 senders enqueue (test/ha/sender.py, a multi-host
# connection string with target_session_attrs=read-write, each delivery sent
# again with its event id after an error) and the worker fetches from a
# 200 ms upstream.  Synchronous replication (pg_auto_failover's default with
# one secondary: synchronous_standby_names 'ANY 1 (...)', synchronous_commit
# on): every webhook whose enqueue returned is handled on the new primary,
# its handler effect exactly once; jobs in flight are fetched again; nothing
# is left running.  The worker runs only on the primary; the new one claims
# soon after the promotion.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use AutoFailover;
use PostgreSQL::Test::Utils;
use Test::More;

my ($objects, $senders, $rate) = (1500, 8, 100);

my ($f, $n1, $n2) = AutoFailover->start_pair(200);

my $before = AutoFailover::upstream_fetches();
my $s = $f->start_senders($senders, $objects, $rate, 150);
$f->poll_until(sub { AutoFailover::accepted_so_far($s) >= $objects / 3 }, 90) or die 'the senders are stuck';
my $running = $n1->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.jobs WHERE source = 'ha' AND state = 'running'});
my $accepted = AutoFailover::accepted_so_far($s);
my ($rc, $secs, $out) = $f->perform_failover;
is($rc, 0, sprintf('pg_autoctl perform failover with %d accepted, %s jobs running: done in %.1f s', $accepted, $running, $secs))
  or diag($out);
$f->wait_states(node1 => 'secondary', node2 => 'primary') or die 'no new primary';
my $recs = AutoFailover::finish_senders($s);
my $r = $f->check_run($n2, $recs, $before, 'perform failover');
cmp_ok($r->{again}, '>=', 1, "jobs in flight at the switch were fetched again on the new primary ($r->{again})");
ok($f->server_log($n2) =~ /reclaimed (\d+) jobs left running by a previous worker/,
	"the new primary's worker reclaimed at its start the jobs the old one left running (" . ($1 // 0) . ')');

my ($claim_ms, $worker_ms, $writable_ms) = $f->promotion_to_first_claim($n2);
my $timing = sprintf('promotion to the new worker\'s first claim: %.0f ms (worker started after %.0f ms; '
	  . 'pg_auto_failover turned default_transaction_read_only off after %.0f ms)',
	$claim_ms // -1, $worker_ms // -1, $writable_ms // -1);
ok(defined $claim_ms, $timing);
diag("perform failover: $timing");
# (before 0.9.0 the worker failed while the server was read-only and the
# launcher restarted it after 1 s, then 2 s: 130 measured 3.1 s, 2.1 s after
# the server became writable)
cmp_ok(($claim_ms // 1e9) - ($writable_ms // 0), '<', 1000,
	'  within 1 s of the server becoming writable: no lease to wait for, no restart back-off');
is(AutoFailover::workers_on($n2), '1/1', 'the new primary runs a worker');
is(AutoFailover::workers_on($n1), '0/0', 'the old primary, a secondary again, runs none');

$f->stop_all;
done_testing();
