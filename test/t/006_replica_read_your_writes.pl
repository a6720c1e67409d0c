# Replica read-your-writes against a real streaming standby.  The worker on
# the primary fetches from the loopback upstream (test/upstream.py, started by
# test/run on 127.0.0.1:18080; WI_UPSTREAM_PORT overrides the port) and its
# handler writes rows.  The standby applies commits 300 ms late
# (recovery_min_apply_delay), so a reader there that does not wait misses the
# handler's rows, and one that calls wait_replayed(done_lsn) first always sees
# them.  Also: wait_for_job's timeout, dead and cancelled jobs, where and in
# which transactions the two refuse to run, a lost done_lsn filled in again
# by the next worker, and a wait_replayed that holds no snapshot, so a
# cleanup record it waits past does not stop replay.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

# BackgroundPsql notes every query and its output; the few hundred below
# would bury the results (and test/run shows the tail of the log on failure).
# WI_TAP_VERBOSE=1 keeps them.
unless ($ENV{WI_TAP_VERBOSE})
{
	no warnings 'redefine';
	*PostgreSQL::Test::BackgroundPsql::note = sub { };
}

my $port = $ENV{WI_UPSTREAM_PORT} // 18080;
my $apply_delay_ms = 300;
my $n_jobs = 50;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.database = 'postgres'
webhook_ingest.poll_interval = 50ms
webhook_ingest.backoff_base = 50ms
webhook_ingest.backoff_max = 200ms
});
$primary->start;
$primary->safe_psql('postgres', qq{
	CREATE EXTENSION webhook_ingest;
	CREATE TABLE posts (id text PRIMARY KEY, title text);
	CREATE TABLE post_tags (post_id text, tag text);
	-- two tables, three rows per object, all in the worker's transaction
	CREATE FUNCTION store_post(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE sql AS \$\$
		INSERT INTO posts VALUES (external_id, details->>'title');
		INSERT INTO post_tags SELECT external_id, jsonb_array_elements_text(details->'tags');
	\$\$;
	SELECT webhook_ingest.add_source('blog', 'http://127.0.0.1:$port/posts/{external_id}',
	                                 'store_post(text,jsonb,jsonb)');
	SELECT webhook_ingest.add_source('stuck', 'http://127.0.0.1:$port/slow/{external_id}',
	                                 'store_post(text,jsonb,jsonb)');
	SELECT webhook_ingest.add_source('refused', 'http://127.0.0.1:$port/badrequest/{external_id}',
	                                 'store_post(text,jsonb,jsonb)');
});
$primary->poll_query_until('postgres',
	q{SELECT state = 'running' FROM webhook_ingest.worker_status WHERE role = 'fetcher'})
  or die 'the worker did not start';
$primary->backup('b');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->append_conf('postgresql.conf', "recovery_min_apply_delay = '${apply_delay_ms}ms'");
$standby->start;
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');

# Persistent sessions: the app's connection to the primary, the reader's to the standby.
my $app = $primary->background_psql('postgres', on_error_stop => 0);
$app->set_query_timer_restart;
my $reader = $standby->background_psql('postgres', on_error_stop => 0);
$reader->set_query_timer_restart;

# LSN + n in SQL.
sub lsn_plus
{
	my ($lsn, $n) = @_;
	return "(($lsn) + ${n}::numeric)";
}

sub q_ok
{
	my ($session, $sql) = @_;
	my ($out, $err) = $session->query($sql);
	die "query failed: $sql\n$session->{stderr}" if $err;
	return $out;
}

sub timed
{
	my ($session, $sql) = @_;
	my $t0 = time();
	my $out = q_ok($session, $sql);
	return ($out, (time() - $t0) * 1000);
}

# CALL wait_replayed(lsn_sql, timeout): 't' when it returned, 'f' when it
# timed out (query_canceled), and how long it took.
sub replayed
{
	my ($session, $lsn_sql, $timeout) = @_;
	my $t0 = time();
	my ($out, $err) = $session->query("CALL webhook_ingest.wait_replayed($lsn_sql, '$timeout')");
	my $ms = (time() - $t0) * 1000;
	my $stderr = $session->{stderr};
	$session->{stderr} = '';	# query() keeps it; the next query must not see it
	return ('t', $ms) if !$err;
	return ('f', $ms) if $stderr =~ /timed out waiting for WAL replay/;
	die "wait_replayed failed: $stderr";
}

# The first line of an error, for a test name.
sub first_error
{
	my ($err) = @_;
	return $err =~ /(ERROR:.*)/ ? $1 : "(no error) $err";
}

sub median
{
	my @s = sort { $a <=> $b } @_;
	return @s % 2 ? $s[$#s / 2] : ($s[@s / 2 - 1] + $s[@s / 2]) / 2;
}

sub enqueue
{
	my ($source, $id) = @_;
	return q_ok($app, "SELECT job_id FROM webhook_ingest.enqueue('$source', '$id', NULL, 'ev-$id')");
}

# What the reader sees of object $id: posts rows / tag rows.
sub seen_sql
{
	my ($id) = @_;
	return "SELECT (SELECT count(*) FROM posts WHERE id = '$id') || '/' ||"
	  . " (SELECT count(*) FROM post_tags WHERE post_id = '$id')";
}

# 1. N jobs, each enqueued in its own transaction.  After wait_for_job on the
# primary, the reader first reads the standby at once (no wait), then waits
# for the job's done_lsn and reads again in the next statement.
my ($done_true, $lsn_known, $unwaited_missed, $waited_true, $waited_seen) = (0, 0, 0, 0, 0);
my (@wait_ms, @replayed_ms, @last_jobs, @problems);
for my $i (1 .. $n_jobs)
{
	my $id = "rw-$i";
	my $job = enqueue('blog', $id);
	my ($done, $ms) = timed($app, "SELECT webhook_ingest.wait_for_job($job, '30s')");
	push @wait_ms, $ms;
	$done_true++ if $done eq 't';
	my $lsn = q_ok($app, "SELECT done_lsn FROM webhook_ingest.jobs WHERE id = $job");
	$lsn_known++ if $lsn =~ m{^[0-9A-F]+/[0-9A-F]+$};

	my $unwaited = q_ok($reader, seen_sql($id));
	$unwaited_missed++ if $unwaited ne '1/2';

	my ($replayed, $rms) = replayed($reader, "'$lsn'", '30s');
	push @replayed_ms, $rms;
	$waited_true++ if $replayed eq 't';
	my $seen = q_ok($reader, seen_sql($id));
	if ($seen eq '1/2') { $waited_seen++ }
	else { push @problems, "job $job ($id): done_lsn $lsn, wait_replayed $replayed, saw $seen" }
	push @last_jobs, $job;
}
if (@problems)
{
	diag("read after wait_replayed missed: $_") for @problems[0 .. ($#problems < 9 ? $#problems : 9)];
	# A reader waiting in wait_replayed holds a snapshot: a cleanup record it
	# conflicts with stops replay until max_standby_streaming_delay, then
	# cancels the reader.
	diag('standby: ' . $standby->safe_psql('postgres', q{
		SELECT 'replayed ' || pg_last_wal_replay_lsn() || ', recovery conflicts (snapshot/lock): '
		       || confl_snapshot || '/' || confl_lock || ', startup waits on '
		       || coalesce((SELECT wait_event FROM pg_stat_activity WHERE backend_type = 'startup'), '-')
		  FROM pg_stat_database_conflicts WHERE datname = 'postgres'}));
}
is($done_true, $n_jobs, sprintf('wait_for_job returned true for %d/%d jobs (median %.1f ms)',
	$done_true, $n_jobs, median(@wait_ms)));
is($lsn_known, $n_jobs, "  and the next statement read the job's done_lsn $lsn_known/$n_jobs times");
cmp_ok($unwaited_missed, '>=', 1, sprintf(
	'reading the standby right after wait_for_job, without waiting, missed the rows %d/%d times (apply delay %d ms)',
	$unwaited_missed, $n_jobs, $apply_delay_ms));
is($waited_true, $n_jobs, sprintf('wait_replayed(done_lsn) on the standby returned true %d/%d times (median %.1f ms, max %.1f ms)',
	$waited_true, $n_jobs, median(@replayed_ms), (sort { $b <=> $a } @replayed_ms)[0]));
is($waited_seen, $n_jobs, "after wait_replayed(done_lsn) the reader saw the post and both tags $waited_seen/$n_jobs times");

# 2. wait_for_job: a timeout, a dead job, a cancelled job, a missing job.
my $stuck = enqueue('stuck', 'stuck-1');
$primary->poll_query_until('postgres', "SELECT state = 'running' FROM webhook_ingest.jobs WHERE id = $stuck")
  or die 'the stuck job did not start';
my ($r, $ms) = timed($app, "SELECT webhook_ingest.wait_for_job($stuck, '1s')");
is($r, 'f', sprintf('wait_for_job returns false when the job (upstream answers after 5 s) is not done within 1 s: took %.0f ms', $ms));
ok($ms >= 950 && $ms < 4000, sprintf('  and it waited about the timeout (%.0f ms)', $ms));
is(q_ok($app, "SELECT state FROM webhook_ingest.jobs WHERE id = $stuck"), 'running', '  the job was still running');
is(q_ok($app, "SELECT webhook_ingest.cancel($stuck)"), 't', 'cancelled the stuck job');
($r, $ms) = timed($app, "SELECT webhook_ingest.wait_for_job($stuck, '30s')");
is($r, 'f', sprintf('wait_for_job of a cancelled job returns false at once (%.0f ms)', $ms));
cmp_ok($ms, '<', 5000, '  well before its 30 s timeout');

my $refused = enqueue('refused', 'bad-1');
($r, $ms) = timed($app, "SELECT webhook_ingest.wait_for_job($refused, '30s')");
is($r, 'f', sprintf('wait_for_job of a job the upstream refuses (400) returns false (%.0f ms)', $ms));
cmp_ok($ms, '<', 10000, '  without waiting for its 30 s timeout');
is(q_ok($app, "SELECT state || ' ' || last_status FROM webhook_ingest.jobs WHERE id = $refused"),
	'dead 400', '  the job is dead, last status 400');

my ($ret, $out, $err) = $primary->psql('postgres', 'SELECT webhook_ingest.wait_for_job(-1, \'1s\')');
like($err, qr/job -1 does not exist/, 'wait_for_job of a job that does not exist raises an error: ' . first_error($err));

# 3. Where and in which transactions they refuse to run.
my $done_job = $last_jobs[-1];
($ret, $out, $err) = $standby->psql('postgres', "SELECT webhook_ingest.wait_for_job($done_job, '1s')");
ok($ret != 0 && $err =~ /wait_for_job\(\) runs on the primary/,
	"wait_for_job on the standby raises an error: " . first_error($err));

($ret, $out, $err) = $primary->psql('postgres', qq{
	BEGIN ISOLATION LEVEL REPEATABLE READ;
	SELECT webhook_ingest.wait_for_job($done_job, '1s');
	COMMIT;});
ok($ret != 0 && $err =~ /cannot be used in a REPEATABLE READ or SERIALIZABLE transaction/,
	"wait_for_job of a done job inside REPEATABLE READ raises an error: " . first_error($err));
($ret, $out, $err) = $standby->psql('postgres', q{
	BEGIN ISOLATION LEVEL REPEATABLE READ;
	CALL webhook_ingest.wait_replayed(pg_last_wal_replay_lsn(), '1s');
	COMMIT;});
ok($ret != 0 && $err =~ /wait_replayed\(\) cannot be used in a REPEATABLE READ/,
	"wait_replayed inside REPEATABLE READ on the standby raises an error: " . first_error($err));
is(q_ok($app, "SELECT webhook_ingest.wait_for_job($done_job, '1s')"), 't',
	'  the same wait_for_job in READ COMMITTED returns true');

($ret, $out, $err) = $primary->psql('postgres', q{
	BEGIN;
	SELECT job_id AS jid FROM webhook_ingest.enqueue('blog', 'same-tx-1') \gset
	SELECT webhook_ingest.wait_for_job(:jid, '5s');
	COMMIT;});
ok($ret != 0 && $err =~ /was written by this transaction/,
	"wait_for_job of a job enqueued in the same transaction raises an error: " . first_error($err));
is($primary->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.jobs WHERE external_id = 'same-tx-1'}),
	'0', '  and that transaction kept nothing');

# 4. wait_replayed on the primary and with an LSN that never comes.
($r, $ms) = replayed($app, 'pg_current_wal_flush_lsn()', '5s');
is($r, 't', sprintf('wait_replayed on the primary returns true for a flushed LSN (%.1f ms)', $ms));
cmp_ok($ms, '<', 2000, '  at once');
($r, $ms) = replayed($app, "'FF/0'", '500ms');
is($r, 'f', sprintf('wait_replayed on the primary returns false for an LSN not yet written (%.0f ms)', $ms));
my $far = q_ok($reader, "SELECT " . lsn_plus('pg_last_wal_replay_lsn()', 1099511627776));
($r, $ms) = replayed($reader, "'$far'", '1s');
is($r, 'f', "wait_replayed on the standby for a far-future LSN ($far) returns false");
ok($ms >= 950 && $ms < 4000, sprintf('  after about its 1 s timeout: %.0f ms', $ms));

# 5. A lost done_lsn write: the next worker fills it in.  No job is active,
# so the newest done jobs are the last ones of part 1.
$primary->poll_query_until('postgres',
	q{SELECT count(*) = 0 FROM webhook_ingest.jobs WHERE state IN ('pending', 'running')})
  or die 'jobs still active';
my $lost = 3;
my @lost_rows = split /\n/, q_ok($app, qq{
	SELECT id || ' ' || done_lsn FROM webhook_ingest.jobs WHERE state = 'done'
	 ORDER BY finished_at DESC, id DESC LIMIT $lost});
my %old_lsn = map { (split / /, $_) } @lost_rows;
my $ids = join(',', sort { $a <=> $b } keys %old_lsn);
is($ids, join(',', @last_jobs[-$lost .. -1]), "the $lost most recently finished done jobs are the last of part 1 ($ids)");
# (the commit LSN of a completion batch is its done_batches row)
ok(q_ok($app, "DELETE FROM webhook_ingest.done_batches WHERE finished_at IN
	(SELECT finished_at FROM webhook_ingest.job_history WHERE id IN ($ids)) RETURNING 1") =~ tr/1// > 0,
	"lost the done_lsn of jobs $ids by hand");
is(q_ok($app, "SELECT count(*) FROM webhook_ingest.jobs WHERE id IN ($ids) AND done_lsn IS NULL"), $lost,
	"  they have none now");
($r, $ms) = timed($app, "SELECT webhook_ingest.wait_for_job($done_job, '300ms')");
is($r, 'f', sprintf('  wait_for_job of job %d, done but without done_lsn, returns false after its 300 ms timeout (%.0f ms)',
	$done_job, $ms));

my $old_pid = q_ok($app, q{SELECT pid FROM webhook_ingest.worker_status WHERE role = 'fetcher'});
is(q_ok($app, "SELECT pg_terminate_backend($old_pid)"), 't', "terminated the worker (pid $old_pid)");
($r, $ms) = timed($app, "SELECT webhook_ingest.wait_for_job($done_job, '60s')");
is($r, 't', sprintf('wait_for_job of that job returns true once the restarted worker filled in done_lsn (%.0f ms)', $ms));
my $new_pid = q_ok($app, q{SELECT pid FROM webhook_ingest.worker_status WHERE role = 'fetcher'});
ok($new_pid ne $old_pid && $new_pid ne '', "a new worker runs (pid $new_pid)");
my %new_lsn = map { (split / /, $_) } split /\n/, q_ok($app,
	"SELECT id || ' ' || coalesce(done_lsn::text, 'NULL') FROM webhook_ingest.jobs WHERE id IN ($ids)");
my @bad = grep { $new_lsn{$_} eq 'NULL' } sort keys %new_lsn;
is(scalar(@bad), 0, "every lost done_lsn was filled in: " . join(', ', map { "$_ $new_lsn{$_}" } sort keys %new_lsn));
is(q_ok($app, join(' AND ', 'SELECT true', map { "'$new_lsn{$_}'::pg_lsn >= '$old_lsn{$_}'" } grep { $new_lsn{$_} ne 'NULL' } keys %new_lsn)),
	't', '  each at or past the commit it stands for');
ok($primary->log_contains('filled in done_lsn of \d+ completion batches a previous worker committed'),
	"the new worker logged that it filled in $lost");
my $filled = $new_lsn{$done_job};
is((replayed($reader, "'$filled'", '30s'))[0], 't',
	'wait_replayed of the filled-in done_lsn on the standby returns true');
my ($id) = q_ok($app, "SELECT external_id FROM webhook_ingest.jobs WHERE id = $done_job");
is(q_ok($reader, seen_sql($id)), '1/2', "  and the reader sees the rows of $id");

# Jobs still work after the restart: one more round trip.
my $job = enqueue('blog', 'after-restart');
is(q_ok($app, "SELECT webhook_ingest.wait_for_job($job, '30s')"), 't', 'a job after the restart: wait_for_job true');
my $lsn = q_ok($app, "SELECT done_lsn FROM webhook_ingest.jobs WHERE id = $job");
is((replayed($reader, "'$lsn'", '30s'))[0] . ' ' . q_ok($reader, seen_sql('after-restart')),
	't 1/2', '  wait_replayed true and the reader sees its rows');

# 6. A waiter holds no snapshot: a cleanup record between the standby's
# position and the target, which would conflict with a snapshot taken before
# the cleaned-up transaction ended, does not stop replay.  (As a function,
# wait_replayed held the calling query's snapshot; replay then stopped until
# max_standby_streaming_delay cancelled the waiter.)
$standby->safe_psql('postgres', q{ALTER SYSTEM SET max_standby_streaming_delay = '5s'});
$standby->safe_psql('postgres', 'SELECT pg_reload_conf()');
$primary->safe_psql('postgres', q{
	CREATE TABLE churn (id int, v int);
	INSERT INTO churn SELECT i, 0 FROM generate_series(1, 1000) i;
	CREATE TABLE filler (x text);
});
my $open = $primary->background_psql('postgres');
$open->query_safe('BEGIN; UPDATE churn SET v = v + 1; SELECT txid_current()');
$primary->wait_for_catchup($standby);
my $target = q_ok($app, "SELECT " . lsn_plus('pg_current_wal_lsn()', 2000000));
my $waiter = $standby->background_psql('postgres', on_error_stop => 0);
$waiter->query_until(qr/start/, "\\echo start\nCALL webhook_ingest.wait_replayed('$target', '20s');\n\\echo done\n");
my $t0 = time();
$open->query_safe('COMMIT');
$open->quit;
$primary->safe_psql('postgres', q{VACUUM churn; INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 3000)});
$waiter->{run}->pump until $waiter->{stdout} =~ /done/ || $waiter->{stderr} =~ /ERROR|FATAL/ || time() - $t0 > 30;
my $waited_ms = (time() - $t0) * 1000;
ok($waiter->{stdout} =~ /done/ && $waiter->{stderr} !~ /ERROR/,
	sprintf('wait_replayed past a conflicting cleanup record returns (%.0f ms)', $waited_ms))
  or diag("stdout [$waiter->{stdout}] stderr [$waiter->{stderr}]");
cmp_ok($waited_ms, '<', 4500, '  before max_standby_streaming_delay (5 s) could have cancelled it');
is($waiter->{stderr}, '', '  and no conflict with recovery');
$waiter->quit;

$app->quit;
$reader->quit;
$standby->stop;
$primary->stop;
done_testing();
