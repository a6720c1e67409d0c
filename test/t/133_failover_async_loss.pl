# What asynchronous replication can lose, shown deterministically under
# pg_auto_failover.  The secondary leaves the replication quorum (`pg_autoctl
# set node replication-quorum false`: the primary's synchronous_standby_names
# becomes empty, commits wait for no standby).  The primary's walsender is
# frozen with SIGSTOP (the primary's, not the standby's walreceiver: WAL
# already sent would wait in the socket buffers and arrive after SIGCONT, so
# what the standby lacks would depend on timing); N webhooks are enqueued and
# every enqueue returns; the primary is killed (kill -9 of its postmaster and
# its pg_autoctl); the monitor promotes the secondary, whose lag is far below
# pgautofailover.promote_wal_log_threshold (16 MB).  Exactly the N webhooks
# accepted after the freeze are missing on the new primary, their handler
# effects too; everything accepted before it is there and handled once.  The
# old primary, started again, is rewound: it loses them as well.
# (With the secondary in the quorum, as in 130 and 131, nothing whose
# enqueue returned is lost.)
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use AutoFailover;
use PostgreSQL::Test::Utils;
use Test::More;

my ($before_n, $after_n) = (200, 100);

my $f = AutoFailover->new;
my $n1 = $f->add_node('node1');
$f->wait_states(node1 => 'single') or BAIL_OUT('node1 did not start');
$f->create_queue($n1, 0);
my $n2 = $f->add_node('node2');
$f->wait_states(node1 => 'primary', node2 => 'secondary') or BAIL_OUT('no secondary');

$f->autoctl_ok('set', 'node', 'replication-quorum', 'false', '--pgdata', $f->entry_of($n2)->{pgdata});
ok($n1->poll_query_until('postgres', q{SELECT current_setting('synchronous_standby_names') = ''}),
	'replication-quorum false on the secondary: the primary\'s synchronous_standby_names is empty (asynchronous)');
$f->wait_states(node1 => 'primary', node2 => 'secondary') or die 'not settled';

sub enqueue_many
{
	my ($node, $prefix, $n) = @_;
	# one transaction each (psql autocommit), each returns its job id
	my $out = $node->safe_psql('postgres', join("\n",
		map { "SELECT job_id FROM webhook_ingest.enqueue('ha', '$prefix-$_', NULL, 'ev-$prefix-$_');" } 1 .. $n));
	return scalar(grep { /^\d+$/ } split /\n/, $out);
}

is(enqueue_many($n1, 'before', $before_n), $before_n, "$before_n webhooks accepted before the freeze");
my $lsn = $n1->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
ok($n2->poll_query_until('postgres', "SELECT pg_last_wal_replay_lsn() >= '$lsn'"), '  and replayed on the secondary');

my $walsender = $n1->safe_psql('postgres', q{SELECT pid FROM pg_stat_replication});
ok($walsender =~ /^\d+$/ && kill('STOP', $walsender), "froze the primary's walsender (pid $walsender)");
is(enqueue_many($n1, 'after', $after_n), $after_n, "$after_n webhooks accepted after the freeze: every enqueue returned");
$n1->poll_query_until('postgres', q{SELECT count(*) > 0 FROM effects WHERE external_id LIKE 'after-%'});
my $handled_there = $n1->safe_psql('postgres', q{SELECT count(*) FROM effects WHERE external_id LIKE 'after-%'});

$f->kill9($n1);
# a stopped process does not notice its postmaster's death: it goes too,
# without ever running again
kill 'KILL', $walsender;
my $promoted = $f->wait_states(node2 => [ 'wait_primary', 'primary' ], timeout => 90);
ok($promoted, 'the monitor promoted the lagging secondary (pg_auto_failover did not refuse)');
SKIP:
{
	skip 'no promotion', 6 unless $promoted;
	$n2->poll_query_until('postgres', q{
		SELECT count(*) = 0 FROM webhook_ingest.jobs WHERE source = 'ha' AND state IN ('pending', 'running')})
	  or diag('jobs still active on the new primary');
	my $counts = $n2->safe_psql('postgres', q{
		SELECT (SELECT count(*) FROM webhook_ingest.jobs WHERE external_id LIKE 'before-%' AND state = 'done') || '/'
		    || (SELECT count(*) FROM effects WHERE external_id LIKE 'before-%' AND n = 1) || '/'
		    || (SELECT count(*) FROM webhook_ingest.jobs WHERE external_id LIKE 'after-%') || '/'
		    || (SELECT count(*) FROM effects WHERE external_id LIKE 'after-%')});
	my ($b_jobs, $b_effects, $a_jobs, $a_effects) = split m{/}, $counts;
	is("$b_jobs/$b_effects", "$before_n/$before_n",
		"every webhook accepted before the freeze is on the new primary and handled once ($b_jobs)");
	is($a_jobs, 0, "none of the $after_n accepted after the freeze is on the new primary");
	is($a_effects, 0, "  nor the handler effects the old primary had committed for $handled_there of them");
	my $lost = $after_n - $a_jobs;
	is($lost, $after_n, "lost = $lost: exactly the webhooks accepted after the freeze");
	diag(sprintf('asynchronous replication: accepted %d, lost %d (all accepted after the walsender froze), '
		  . 'handled %d on the new primary; the old primary had handled %d of the lost ones',
		$before_n + $after_n, $lost, $b_effects, $handled_there));

	$f->restart($n1);
	my $back = $f->wait_states(node1 => 'secondary', node2 => 'primary', timeout => 120);
	ok($back, 'the old primary rejoined as a secondary');
	is($back ? $n1->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.jobs WHERE external_id LIKE 'after-%'}) : 'not back',
		'0', '  rewound: it no longer has the lost webhooks either');
}

$f->stop_all;
done_testing();
