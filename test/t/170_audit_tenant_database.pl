# Audit 0.10.0, third pass (test/audit/FINDINGS-0.10.0-third.md): what one
# database (its owner, its traffic) can do to the cluster's others.
#
# Item 4: the stats slots and the failures ring of queue_stats, latency and
# recent_failures were the cluster's (64 and 128), first come, first served,
# with one catch-all shown in every database: 70 active sources in one
# database left a new source of another uncounted, and 130 failures in one
# emptied the other's recent_failures.  Now each database has its own,
# sized by webhook_ingest.stats_sources and webhook_ingest.stats_failures.
#
# Item 5: every committed ALTER DATABASE ... WITH <option> of a database
# without the extension woke the launcher, which started a worker there to
# find that out: its owner (no CREATEDB needed) made the launcher fork in a
# loop.  Now only a change of IS_TEMPLATE or ALLOW_CONNECTIONS (and CREATE
# EXTENSION, a rename) makes it look again, at most once a second per
# database.  Worker starts are counted from the launcher's DEBUG1 line.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('tenant');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.stats_sources = 16
webhook_ingest.stats_failures = 64
max_worker_processes = 16
});
$node->start;

sub q1 { my ($db, $sql) = @_; return $node->safe_psql($db, $sql); }

# --- item 4: one database's traffic cannot blind another's monitoring ---------
for my $db (qw(mon1 mon2))
{
	q1('postgres', "CREATE DATABASE $db");
	q1($db, q{CREATE EXTENSION webhook_ingest;
		SELECT webhook_ingest.add_source('bad', 'http://127.0.0.1:18080/badrequest/{external_id}', max_attempts => 1)});
}
sub wait_jobs
{
	my ($db, $state, $n) = @_;
	$node->poll_query_until($db, qq{SELECT count(*) >= $n FROM webhook_ingest.jobs WHERE state = '$state'})
	  or die "$db: fewer than $n $state jobs";
}
# mon2's three failures first, then mon1's traffic: 70 sources, 130 failures
q1('mon2', q{SELECT count(*) FROM generate_series(1, 3) i, webhook_ingest.enqueue('bad', 'b-' || i)});
wait_jobs('mon2', 'dead', 3);
q1('mon1', q{SELECT count(*) FROM generate_series(1, 70) i,
	LATERAL (SELECT webhook_ingest.add_source('s' || i, 'http://127.0.0.1:18080/posts/{external_id}')) a,
	LATERAL webhook_ingest.enqueue('s' || i, 'p-' || i) e});
q1('mon1', q{SELECT count(*) FROM generate_series(1, 130) i, webhook_ingest.enqueue('bad', 'b-' || i)});
wait_jobs('mon1', 'done', 70);
wait_jobs('mon1', 'dead', 130);
# then a new source in mon2
q1('mon2', q{SELECT webhook_ingest.add_source('fresh', 'http://127.0.0.1:18080/posts/{external_id}');
	SELECT count(*) FROM generate_series(1, 5) i, webhook_ingest.enqueue('fresh', 'f-' || i)});
wait_jobs('mon2', 'done', 5);
sleep 1;	# (the stats are written after each batch commits)
is(q1('mon2', q{SELECT done_last_hour FROM webhook_ingest.queue_stats WHERE source = 'fresh'}), '5',
	'after 70 active sources in mon1, queue_stats of mon2 counts its new source\'s 5 done jobs');
is(q1('mon2', q{SELECT string_agg(source || ':' || jobs, ',' ORDER BY source) FROM webhook_ingest.latency}), 'fresh:5',
	'  latency in mon2 shows its own source, no "(other sources)" of mon1\'s traffic');
is(q1('mon2', q{SELECT count(*) || ' ' || string_agg(DISTINCT source, ',') FROM webhook_ingest.recent_failures}), '3 bad',
	'  and after 130 failures in mon1, mon2\'s recent_failures still has its 3');
is(q1('mon1', q{SELECT count(*) <= 16 AND bool_or(source = '(other sources)') AND sum(jobs) = 70
	FROM webhook_ingest.latency}), 't',
	'mon1: 15 sources of its 71 and its own "(other sources)" (webhook_ingest.stats_sources = 16), all 70 done jobs counted');
is(q1('mon1', q{SELECT count(*) FROM webhook_ingest.recent_failures}), '64',
	'  and the latest 64 failures (webhook_ingest.stats_failures)');

# --- item 5: a database's owner cannot make the launcher fork ----------------
q1('postgres', q{CREATE ROLE own LOGIN; CREATE DATABASE own1 OWNER own});
q1('postgres', q{ALTER SYSTEM SET log_min_messages = debug1; SELECT pg_reload_conf()});
sleep 1;

# Worker starts for a database (any of its names) logged since a position.
sub starts_since
{
	my ($pos, @names) = @_;
	my $log = slurp_file($node->logfile, $pos);
	my $n = 0;
	$n += () = $log =~ /started a worker for database "\Q$_\E"/g for @names;
	return $n;
}

# As the owner, for SECONDS, in a loop from two sessions: the SQL lines.
sub owner_loop
{
	my ($seconds, $name, @sql) = @_;
	my $pos = -s $node->logfile;
	my $script = $node->basedir . "/$name.sql";
	open my $fh, '>', $script or die $!;
	print $fh join("\n", @sql), "\n";
	close $fh;
	my ($out, $err);
	IPC::Run::run([ 'pgbench', '-n', '-c', '2', '-T', $seconds, '-f', $script, '-U', 'own',
			'-h', $node->host, '-p', $node->port, 'postgres' ], '>', \$out, '2>', \$err);
	my ($tx) = $out =~ /number of transactions actually processed: (\d+)/;
	sleep 1;	# what the launcher still had to do
	return ($pos, $tx // 0, $err);
}

my ($pos, $tx, $err) = owner_loop(3, 'limit', 'ALTER DATABASE own1 CONNECTION LIMIT -1;');
cmp_ok($tx, '>', 100, "the owner altered own1's connection limit $tx times in 3 s") or diag($err);
my $n = starts_since($pos, 'own1');
is($n, 0, "  and the launcher started $n workers there (it looks only when IS_TEMPLATE or ALLOW_CONNECTIONS change)");

# (each count spans the 3 s loop and the second after it: at most 5 starts at one a second)
($pos, $tx, $err) = owner_loop(3, 'allow', 'ALTER DATABASE own1 ALLOW_CONNECTIONS true;');
$n = starts_since($pos, 'own1');
cmp_ok($n, '<=', 5, "$tx ALLOW_CONNECTIONS changes in 3 s: $n worker starts (at most one a second)");

($pos, $tx, $err) = owner_loop(3, 'toggle', 'ALTER DATABASE own1 ALLOW_CONNECTIONS false;',
	'ALTER DATABASE own1 ALLOW_CONNECTIONS true;');
$n = starts_since($pos, 'own1');
cmp_ok($n, '<=', 5, "$tx times ALLOW_CONNECTIONS off and on in 3 s: $n worker starts");

q1('postgres', 'ALTER ROLE own CREATEDB');
($pos, $tx, $err) = owner_loop(3, 'rename', 'ALTER DATABASE own1 RENAME TO own1x;',
	'ALTER DATABASE own1x RENAME TO own1;');
$n = starts_since($pos, 'own1', 'own1x');
cmp_ok($n, '<=', 5, "$tx renames there and back in 3 s (CREATEDB): $n worker starts");
q1('postgres', 'ALTER ROLE own NOCREATEDB');

# and CREATE EXTENSION (superusers only) still gets the database its worker at once,
# though the loops above had it looked at a moment ago
my $t0 = Time::HiRes::time();
q1('own1', 'CREATE EXTENSION webhook_ingest');
my $worker_ms;
for (1 .. 500)
{
	if (q1('postgres', q{SELECT count(*) FROM pg_stat_activity
		WHERE backend_type = 'webhook_ingest worker' AND datname = 'own1'}) eq '1')
	{
		$worker_ms = (Time::HiRes::time() - $t0) * 1000;
		last;
	}
	usleep(10_000);
}
cmp_ok($worker_ms // 99999, '<', 900, sprintf('CREATE EXTENSION in own1 then starts its worker at once (%.0f ms)', $worker_ms // -1));
q1('postgres', q{ALTER SYSTEM RESET log_min_messages; SELECT pg_reload_conf()});

$node->stop;
done_testing();
