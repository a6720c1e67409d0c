# ALTER EXTENSION webhook_ingest UPDATE from 0.5.0 with many finished jobs
# (issue 17): the update moves only the active and dead jobs; the worker
# moves the done and cancelled ones afterwards in batches, while enqueue()
# and claims go on.  (Before the update, enqueue() refuses 0.5.0's schema:
# the 0.10.0 library serves 0.9.0's and 0.10.0's; the load starts once the
# update is committed.)  Against the loopback upstream test/run starts on
# 127.0.0.1:18080.  Checks, during the move (sampled) and after it: every
# pre-upgrade job is visible through webhook_ingest.jobs exactly once, done
# jobs with the same state, external_id, created_at, finished_at and
# done_lsn; pending and running ones get done, dead ones stay dead and can
# be retried; a pre-upgrade event id is still a duplicate; jobs_legacy ends
# empty with no disk; the longest enqueue() call while the move runs stays
# under 2 s; jobs enqueued during the move get done.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);

# Jobs before the upgrade, by id modulo: 1 of 1000 cancelled, 1 of 1000
# dead, 1 of 1000 pending, 1 of 10000 running, the rest done.
my $n_jobs = 300_000;
my $n_events = 100_000;
my $max_stall_ms = 2000;

my $node = PostgreSQL::Test::Cluster->new('upgrade_move');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.backoff_base = 50ms
webhook_ingest.backoff_max = 200ms
# a worker for postgres only: in database "race" the test takes the move's steps itself
webhook_ingest.database = 'postgres'
max_wal_size = '2GB'
checkpoint_timeout = '30min'
});
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION webhook_ingest VERSION '0.5.0';
	SELECT webhook_ingest.add_source('src', 'http://127.0.0.1:18080/posts/{external_id}');
	CREATE TABLE load_log (at timestamptz NOT NULL DEFAULT clock_timestamp(), kind text, event_id text,
	                       job_id bigint, outcome text);
});

# 0.5.0's jobs: done ones finished in batches of 50 (one finished_at and one
# done_lsn per batch, as 0.5.0's completions wrote them) over the last three
# days, each with a payload of about 2 kB.
my $t0 = time();
$node->safe_psql('postgres', qq{
	INSERT INTO webhook_ingest.jobs (id, source, external_id, state, payload, events, attempts, last_status,
	       last_error, created_at, updated_at, next_attempt_at, started_at, finished_at, done_lsn,
	       lease_until, worker_pid)
	SELECT i, 'src', x.ext, x.st, jsonb_build_object('action', 'updated', 'n', i, 'body', repeat(md5(i::text), 60)),
	       1, CASE x.st WHEN 'dead' THEN 10 WHEN 'pending' THEN 0 ELSE 1 END,
	       CASE x.st WHEN 'done' THEN 200 WHEN 'dead' THEN 500 END,
	       CASE x.st WHEN 'dead' THEN 'HTTP 500' WHEN 'cancelled' THEN 'cancelled by admin' END,
	       coalesce(x.fin, now()) - interval '1 s', coalesce(x.fin, now()), coalesce(x.fin, now()),
	       CASE WHEN x.st IN ('done', 'running') THEN coalesce(x.fin, now()) - interval '0.5 s' END,
	       x.fin, CASE x.st WHEN 'done' THEN ('0/' || to_hex(16777216 + (i / 50) * 8192))::pg_lsn END,
	       CASE x.st WHEN 'running' THEN now() + interval '1 hour' END,
	       CASE x.st WHEN 'running' THEN 4242 END
	  FROM generate_series(1, $n_jobs) i,
	       LATERAL (SELECT CASE WHEN i % 10000 = 4 THEN 'running'
	                            WHEN i % 1000 = 1 THEN 'cancelled'
	                            WHEN i % 1000 = 2 THEN 'dead'
	                            WHEN i % 1000 = 3 THEN 'pending'
	                            ELSE 'done' END::webhook_ingest.job_state AS st) s,
	       LATERAL (SELECT s.st,
	                       CASE WHEN s.st IN ('pending', 'running') THEN 'active-' || i
	                            ELSE 'obj-' || (i % 100000) END AS ext,
	                       CASE WHEN s.st IN ('pending', 'running') THEN NULL
	                            WHEN s.st = 'done' THEN now() - interval '3 days'
	                                 + (i / 50) * (interval '3 days' / ($n_jobs / 50)) - interval '1 min'
	                            ELSE now() - interval '1 hour' END AS fin) x;
	-- (inserted running, a job is pending again: 0.5.0's jobs_restored_running)
	UPDATE webhook_ingest.jobs SET state = 'running', attempts = 1, started_at = now() - interval '1 s',
	       lease_until = now() + interval '1 hour', worker_pid = 4242
	 WHERE external_id LIKE 'active-%' AND id % 10000 = 4;
	SELECT setval(pg_get_serial_sequence('webhook_ingest.jobs', 'id'), $n_jobs);
	INSERT INTO webhook_ingest.events (source, event_id, received_at)
	SELECT 'src', 'pre-ev-' || i, now() - interval '1 day' FROM generate_series(1, $n_events) i;
	CREATE TABLE before_jobs AS
	SELECT id, state, external_id, created_at, finished_at, done_lsn FROM webhook_ingest.jobs;
	ALTER TABLE before_jobs ADD PRIMARY KEY (id);
});
$node->safe_psql('postgres', 'VACUUM (ANALYZE) webhook_ingest.jobs, webhook_ingest.events, before_jobs; CHECKPOINT');
diag(sprintf('filled 0.5.0 jobs with %d rows (%s) in %.1f s', $n_jobs,
	$node->safe_psql('postgres', q{SELECT pg_size_pretty(pg_total_relation_size('webhook_ingest.jobs'))}),
	time() - $t0));
my %before = map { split /\|/ } split /\n/, $node->safe_psql('postgres',
	'SELECT state, count(*) FROM before_jobs GROUP BY 1');
ok($before{done} > 0.99 * $n_jobs - 1000 && $before{dead} && $before{cancelled} && $before{pending}
	&& $before{running}, 'jobs in every state before the upgrade');
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'}),
	'the worker runs (and waits for the update)');

my ($ret, $stdout, $stderr) = $node->psql('postgres', q{SELECT webhook_ingest.enqueue('src', 'early', NULL, 'early-ev')});
like($stderr, qr/schema is at version 0\.5\.0, which library 0\.10\.0 does not serve.*HINT:  Run ALTER EXTENSION webhook_ingest UPDATE/s,
	'before the update, enqueue() refuses 0.5.0\'s schema (55000), with a hint');

# The load (once the update is in): pgbench runs of 3 s one after another
# until told to stop, two clients at 100 calls a second in all, each call
# logged with its latency.  One call in 20 redelivers a pre-upgrade event id.
my $dir = PostgreSQL::Test::Utils::tempdir();
open(my $fh, '>', "$dir/enqueue.sql") or die;
print $fh qq{\\set r random(1, 1000000000)
\\set x random(1, 20000)
\\set d random(1, 20)
\\set p random(1, $n_events)
\\if :d = 1
INSERT INTO load_log (kind, event_id, job_id, outcome) SELECT 'pre', 'pre-ev-' || :p, e.job_id, e.outcome FROM webhook_ingest.enqueue('src', 'obj-' || :p, NULL, 'pre-ev-' || :p) e;
\\else
INSERT INTO load_log (kind, event_id, job_id, outcome) SELECT 'new', 'new-ev-' || :client_id || '-' || :r, e.job_id, e.outcome FROM webhook_ingest.enqueue('src', 'load-' || :x, '{"k": 1}', 'new-ev-' || :client_id || '-' || :r) e;
\\endif
};
close($fh);
my $check_sql = q{
	SELECT count(*) FILTER (WHERE v.n IS DISTINCT FROM 1) || ' ' ||
	       count(*) FILTER (WHERE b.state IN ('done', 'dead', 'cancelled') AND v.n = 1
	                          AND (v.state, v.external_id, v.created_at, v.finished_at, v.done_lsn)
	                              IS DISTINCT FROM (b.state::text, b.external_id, b.created_at, b.finished_at, b.done_lsn))
	  FROM before_jobs b
	  LEFT JOIN (SELECT j.id, count(*) AS n, min(j.state::text) AS state, min(j.external_id) AS external_id,
	                    min(j.created_at) AS created_at, min(j.finished_at) AS finished_at, min(j.done_lsn) AS done_lsn
	               FROM webhook_ingest.jobs j GROUP BY j.id) v ON v.id = b.id};

# The update, with the worker running; then the load.
my $alter_start = time();
$node->safe_psql('postgres', 'ALTER EXTENSION webhook_ingest UPDATE');
my $alter_end = time();
diag(sprintf('ALTER EXTENSION webhook_ingest UPDATE: %.0f ms', ($alter_end - $alter_start) * 1000));
my ($host, $port) = ($node->host, $node->port);
my $load = IPC::Run::start(['bash', '-c', qq{
	i=0
	while [ ! -e "$dir/stop" ]; do
		i=\$((i + 1))
		pgbench -n -h "$host" -p $port -M simple -c 2 -j 1 -R 100 -T 3 -l --log-prefix="$dir/run\$i" \\
			-f "$dir/enqueue.sql" postgres >>"$dir/pgbench.out" 2>&1 || echo "pgbench run \$i failed" >>"$dir/pgbench.out"
	done
}]);
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest'}),
	'0.10.0', 'updated to 0.10.0 (through 0.6.0)');
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM webhook_ingest.jobs_legacy'), '>', 0.9 * $n_jobs,
	'the update left the done jobs in jobs_legacy for the worker');

# The move: sampled until jobs_truncated.
my ($samples, $bad_samples, $mid_samples, $done_during) = (0, 0, 0, 0);
my $move_end;
my $deadline = time() + 120;
my $still_moving;	# a moment the move was still going on
my $n_before_move = $node->safe_psql('postgres', 'SELECT moved_upto FROM webhook_ingest.legacy_migration');
while (time() < $deadline)
{
	my $t = time();
	my ($moved, $truncated) = split /\|/, $node->safe_psql('postgres',
		'SELECT moved_upto, jobs_truncated FROM webhook_ingest.legacy_migration');
	if ($truncated eq 't')
	{
		$move_end = time();
		last;
	}
	$still_moving = $t;
	if ($moved == $n_before_move)
	{
		usleep(20_000);		# the first step is not in yet
		next;
	}
	my ($not_once, $changed) = split / /, $node->safe_psql('postgres', $check_sql);
	$samples++;
	$mid_samples++ if $moved > 0 && $moved < $n_jobs;
	if ($not_once != 0 || $changed != 0)
	{
		$bad_samples++;
		diag("at moved_upto $moved: $not_once jobs not seen exactly once, $changed changed");
	}
	usleep(500_000);
}
ok(defined $move_end, 'the worker moved every legacy job and truncated jobs_legacy');
$move_end //= time();
diag(sprintf('the move took %.1f s after the update; %d samples (%d mid-move)', $move_end - $alter_end,
	$samples, $mid_samples));
is($bad_samples, 0, "every pre-upgrade job seen exactly once, unchanged, at each of $samples samples during the move");
cmp_ok($mid_samples, '>', 0, 'at least one sample fell in the middle of the move');
# Claimed while the move went on: enqueued after the update, and their fetch
# started (the claim) before a moment the move was still going on; they are
# done by now.  (Their finish may come after a quick move: not asked.)
$done_during = $node->safe_psql('postgres', qq{
	SELECT count(*) FROM load_log l JOIN webhook_ingest.job_history h ON h.id = l.job_id,
	       webhook_ingest.legacy_migration m
	 WHERE l.kind = 'new' AND l.at > m.upgraded_at AND h.started_at < to_timestamp(@{[ $still_moving // 0 ]})});
cmp_ok($done_during, '>', 0, "claims went on: $done_during jobs enqueued after the update were claimed while the move went on");
sleep(2);
open(my $stop, '>', "$dir/stop") or die;
close($stop);
$load->finish;

is($node->safe_psql('postgres', $check_sql), '0 0', 'after the move: every pre-upgrade job exactly once, unchanged');
is($node->safe_psql('postgres', q{
	SELECT count(*) || ' ' || pg_relation_size('webhook_ingest.jobs_legacy') FROM webhook_ingest.jobs_legacy}),
	'0 0', 'jobs_legacy is empty and has no disk');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT id FROM webhook_ingest.job_history
	                      UNION ALL SELECT unnest(ids) FROM webhook_ingest.job_history_packed) h
	  JOIN before_jobs b USING (id) WHERE b.state = 'done'}),
	$before{done}, 'the done jobs are in the history (job_history, or packed since 0.8.0), each once');
ok($node->poll_query_until('postgres', q{
	SELECT count(*) = 0 FROM before_jobs b JOIN webhook_ingest.jobs j USING (id)
	 WHERE b.state IN ('pending', 'running') AND j.state <> 'done'}),
	'the pending and running pre-upgrade jobs got done by the worker');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM before_jobs b JOIN webhook_ingest.jobs j USING (id) WHERE b.state = 'dead' AND j.state = 'dead'}),
	$before{dead}, 'the dead jobs are still dead');
my $dead_id = $node->safe_psql('postgres', q{SELECT min(id) FROM before_jobs WHERE state = 'dead'});
is($node->safe_psql('postgres', "SELECT webhook_ingest.retry($dead_id)"), 't', 'a dead pre-upgrade job can be retried');
ok($node->poll_query_until('postgres', "SELECT state = 'done' FROM webhook_ingest.jobs WHERE id = $dead_id"),
	'the retried dead job gets done');
is($node->safe_psql('postgres', q{SELECT outcome FROM webhook_ingest.enqueue('src', 'obj-7', NULL, 'pre-ev-7')}),
	'duplicate', 'a pre-upgrade event id redelivered after the upgrade is a duplicate');
is($node->safe_psql('postgres', q{
	SELECT string_agg(DISTINCT outcome, ',') FROM load_log WHERE kind = 'pre'}),
	'duplicate', 'every redelivered pre-upgrade event id under the load was a duplicate (during the move, after)');
cmp_ok($node->safe_psql('postgres', q{SELECT count(*) FROM load_log WHERE kind = 'new' AND outcome = 'queued'}),
	'>', 0, 'new webhooks were queued after the update');
ok($node->poll_query_until('postgres', q{
	SELECT count(*) = 0 FROM load_log l JOIN webhook_ingest.jobs j ON j.id = l.job_id
	 WHERE l.kind = 'new' AND j.state <> 'done'}),
	'every job the load enqueued got done');

# The longest enqueue() call that overlapped the move, from
# pgbench's per-transaction logs (latency in microseconds, end time).
my (@before_lat, @during_lat);
for my $f (glob("$dir/run*"))
{
	open(my $lf, '<', $f) or die;
	while (<$lf>)
	{
		my (undef, undef, $lat_us, undef, $sec, $usec) = split;
		next unless defined $usec;
		my $end = $sec + $usec / 1e6;
		my $start = $end - $lat_us / 1e6;
		if ($end >= $alter_start && $start <= $move_end) { push @during_lat, $lat_us / 1000; }
		elsif ($end < $alter_start) { push @before_lat, $lat_us / 1000; }
	}
	close($lf);
}
my ($max_during) = sort { $b <=> $a } @during_lat;
my ($max_before) = sort { $b <=> $a } @before_lat;
diag(sprintf('enqueue latency: %d calls before the update, max %.1f ms; %d during the move, max %.1f ms',
	scalar(@before_lat), $max_before // -1, scalar(@during_lat), $max_during // -1));
cmp_ok(scalar(@during_lat), '>', 100, 'enqueue calls ran throughout the move');
cmp_ok($max_during // 1e9, '<', $max_stall_ms, "the longest enqueue call during the move is under $max_stall_ms ms");
unlike(slurp_file("$dir/pgbench.out"), qr/run \d+ failed|ERROR|number of failed transactions: [1-9]/,
	'no enqueue call failed');

# retry() of a done 0.5.0 job while the move step that takes it is in
# flight (no worker in database "race": the steps are taken here).  The
# retry waits for the step's lock, then finds the job in the history.
$node->safe_psql('postgres', 'CREATE DATABASE race');
$node->safe_psql('race', q{
	CREATE EXTENSION webhook_ingest VERSION '0.5.0';
	SELECT webhook_ingest.add_source('src', 'http://127.0.0.1:18080/posts/{external_id}');
	INSERT INTO webhook_ingest.jobs (id, source, external_id, state, attempts, created_at, updated_at,
	       next_attempt_at, finished_at, done_lsn)
	SELECT i, 'src', 'obj-' || i, 'done', 1, now() - interval '1 day', now(), now(),
	       now() - interval '1 hour' + i * interval '1 ms', ('0/' || to_hex(16777216 + i * 8192))::pg_lsn
	  FROM generate_series(1, 20000) i;
	INSERT INTO webhook_ingest.jobs (id, source, external_id, state, attempts, created_at, updated_at,
	       next_attempt_at, finished_at, last_error)
	VALUES (20001, 'src', 'obj-c', 'cancelled', 1, now(), now(), now(), now(), 'cancelled by admin');
	SELECT setval(pg_get_serial_sequence('webhook_ingest.jobs', 'id'), 20001);
});
# First: an application transaction that read a job and then enqueues while
# the ALTER waits for it.  The enqueue is refused at once (the schema is
# still 0.5.0's, which the library does not serve), its transaction ends,
# and the ALTER completes.
my ($app_in, $app_out, $app_err) = ('', '', '');
my $app = IPC::Run::start(['psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('race')],
	'<', \$app_in, '>', \$app_out, '2>', \$app_err, IPC::Run::timeout(60));
$app_in .= "BEGIN;\nSELECT state FROM webhook_ingest.jobs WHERE id = 1;\n";
$app->pump until $app_out =~ /done/;
my ($alter_out, $alter_err) = ('', '');
my $alter = IPC::Run::start(['psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('race'),
	'-c', 'ALTER EXTENSION webhook_ingest UPDATE'], '>', \$alter_out, '2>', \$alter_err);
ok($node->poll_query_until('race', q{
	SELECT count(*) > 0 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
	 WHERE NOT l.granted AND a.query LIKE 'ALTER EXTENSION%'}),
	'the ALTER waits for an application transaction that read the jobs table');
$app_in .= "SELECT outcome FROM webhook_ingest.enqueue('src', 'app-obj', NULL, 'app-ev');\nCOMMIT;\n\\q\n";
$app->finish;
my $app_rc = $?;
$alter->finish;
my $alter_rc = $?;
ok($app_rc != 0 && $alter_rc == 0 && $app_out =~ /^done$/ && $app_err =~ /does not serve.*ALTER EXTENSION webhook_ingest UPDATE/s,
	'that enqueue is refused with the hint, then the ALTER completes')
  or diag("app ($app_rc): $app_out / $app_err; alter ($alter_rc): $alter_err");
$node->safe_psql('race', 'SELECT webhook_ingest._move_legacy_jobs(5000)');
my ($step_out, $step_err) = ('', '');
my $step = IPC::Run::start(['psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('race'),
	'-c', 'BEGIN', '-c', 'SELECT webhook_ingest._move_legacy_jobs(20000)', '-c', 'SELECT pg_sleep(3)',
	'-c', 'COMMIT'], '>', \$step_out, '2>', \$step_err);
ok($node->poll_query_until('race', q{
	SELECT count(*) = 1 FROM pg_stat_activity WHERE datname = 'race' AND query = 'SELECT pg_sleep(3)'}),
	'a move step holds its lock (uncommitted)');
my ($rc, $out, $err) = $node->psql('race', 'SELECT webhook_ingest.retry(9000), webhook_ingest.retry(20001)');
$step->finish;
is("$rc $out", '0 t|t', 'retry() of a done and a cancelled 0.5.0 job waits for the move step that takes them, then works')
  or diag($err);
is($node->safe_psql('race', q{SELECT string_agg(id || ':' || state, ',' ORDER BY id) FROM webhook_ingest.jobs
	WHERE id IN (9000, 20001)}), '9000:pending,20001:pending', 'both are pending again, once each');

$node->stop;
done_testing();
