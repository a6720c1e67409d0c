# Through pgbouncer (Debian's package) in transaction pooling, pool of 2:
# a primary with the worker (fetching from test/upstream.py, which test/run
# starts on 127.0.0.1:18080; WI_UPSTREAM_PORT overrides the port) and a
# streaming standby that applies WAL 300 ms late, each behind a pgbouncer
# database.  The application role connects only through pgbouncer:
#   1. 8 concurrent psql sessions enqueue over 2 server connections: every
#      outcome right (queued, coalesced, duplicate), no error;
#   2. a source change counts at once on every pooled server connection;
#   3. pgbench -M extended (the extended protocol, unnamed statements):
#      counts right; -M prepared (named protocol-level prepared statements)
#      breaks, as it does for any client under pgbouncer 1.18's transaction
#      pooling;
#   4. wait_for_job, then wait_replayed(done_lsn) through the standby's
#      pgbouncer database, then a read there sees the handler's rows;
#   5. a waiter holds a server connection while it waits: waiters in the
#      intake's pool stall enqueue, waiters in a pool of their own do not;
#   6. LISTEN webhook_ingest_done needs a session connection: under
#      transaction pooling the listener gets nothing (pgbouncer drops the
#      notification) and the LISTEN stays on a server connection that other
#      clients get; under session pooling it is delivered, and the server
#      connection's next client (after DISCARD ALL) inherits no LISTEN;
#   7. receive(source, headers, body) through pgbouncer: GitHub-signed
#      deliveries from 4 sessions, a forged one refused (28000).
use strict;
use warnings;
use lib 'test/t';
use PgBouncer;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Digest::SHA qw(hmac_sha256_hex);
use Time::HiRes qw(time usleep);

unless ($ENV{WI_TAP_VERBOSE})
{
	no warnings 'redefine';
	*PostgreSQL::Test::BackgroundPsql::note = sub { };
}

my $port = $ENV{WI_UPSTREAM_PORT} // 18080;
my $apply_delay_ms = 300;

my $primary = PostgreSQL::Test::Cluster->new('pgb_primary');
$primary->init(allows_streaming => 1);
# pgbouncer keeps each pool's server connections open (server_idle_timeout):
# 7 for the pools below, plus the test's own and the worker's.
$primary->append_conf('postgresql.conf', qq{
max_connections = 40
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.backoff_base = 50ms
webhook_ingest.backoff_max = 200ms
});
$primary->start;
$primary->safe_psql('postgres', qq{
	CREATE EXTENSION webhook_ingest;
	CREATE ROLE app LOGIN;
	GRANT webhook_ingest_enqueue TO app;
	CREATE ROLE nobody NOLOGIN;
	CREATE TABLE posts (id text PRIMARY KEY, title text);
	CREATE TABLE post_tags (post_id text, tag text);
	GRANT SELECT ON posts, post_tags TO app;
	CREATE FUNCTION store_post(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE sql AS \$\$
		INSERT INTO posts VALUES (external_id, details->>'title')
		  ON CONFLICT (id) DO UPDATE SET title = EXCLUDED.title;
		DELETE FROM post_tags WHERE post_id = external_id;
		INSERT INTO post_tags SELECT external_id, jsonb_array_elements_text(details->'tags');
	\$\$;
	SELECT webhook_ingest.add_source('blog', 'http://127.0.0.1:$port/posts/{external_id}',
	                                 'store_post(text,jsonb,jsonb)');
	SELECT webhook_ingest.add_source('stuck', 'http://127.0.0.1:$port/slow/{external_id}');
	-- Paused: nothing is claimed, so every outcome is known in advance.
	SELECT webhook_ingest.add_source('held', 'http://127.0.0.1:$port/posts/{external_id}');
	SELECT webhook_ingest.pause_source('held');
	SELECT webhook_ingest.add_source('bench', 'http://127.0.0.1:$port/posts/{external_id}');
	SELECT webhook_ingest.pause_source('bench');
	CREATE TABLE bench_outcomes (mode text, client int, external_id text, event_id text,
	                             job_id bigint, outcome text);
	GRANT INSERT ON bench_outcomes TO app;
});
$primary->poll_query_until('postgres',
	q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'})
  or die 'the worker did not start';
$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('pgb_standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->append_conf('postgresql.conf', "recovery_min_apply_delay = '${apply_delay_ms}ms'");
$standby->start;
$primary->wait_for_catchup($standby);

my $to_primary = sprintf('host=%s port=%d dbname=postgres', $primary->host, $primary->port);
my $to_standby = sprintf('host=%s port=%d dbname=postgres', $standby->host, $standby->port);
my $bouncer = PgBouncer->new('pool',
	users => [ 'postgres', 'app' ],
	settings => { pool_mode => 'transaction', default_pool_size => 2 },
	databases => {
		primary => $to_primary,                  # the intake
		standby => $to_standby,                  # the replica reader
		primary_wait => $to_primary,             # waiters: a pool of their own
		primary_prepared => $to_primary,         # pgbench -M prepared, kept apart
		listen_tx => "$to_primary pool_size=1",
		listen_session => "$to_primary pool_mode=session pool_size=1",
	})->start;
my $pg_version = (split /\n/, $bouncer->psql('pgbouncer', 'SHOW VERSION'))[0];
note("$pg_version on 127.0.0.1:" . $bouncer->port);
is((grep { $_->{key} eq 'pool_mode' } $bouncer->admin('SHOW CONFIG'))[0]{value}, 'transaction',
	"pgbouncer ($pg_version) pools transactions");

my $server_pids_sql = q{SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity
	WHERE usename = 'app' AND backend_type = 'client backend'};

# Send each session its script at once and read until every one is through.
sub run_concurrently
{
	my ($sessions, $scripts) = @_;
	my $n = 0;
	for my $s (@$sessions)
	{
		$s->{stdout} = '';
		$s->{stderr} = '';
		$s->{stdin} .= $scripts->[ $n++ ] . "\\echo __through__\n";
	}
	my $t0 = time();
	while (grep { $_->{stdout} !~ /__through__/ } @$sessions)
	{
		$_->{run}->pump_nb for @$sessions;
		die 'sessions did not finish within 60 s' if time() - $t0 > 60;
		usleep(2000);
	}
	my @out = map { my $o = $_->{stdout}; $o =~ s/__through__\n?//; $o } @$sessions;
	my @err = map { $_->{stderr} } @$sessions;
	$_->{stdout} = $_->{stderr} = '' for @$sessions;
	return (\@out, \@err, (time() - $t0) * 1000);
}

sub q_ok
{
	my ($session, $sql) = @_;
	my ($out, $err) = $session->query($sql);
	die "query failed: $sql\n$session->{stderr}" if $err;
	return $out;
}

sub tally
{
	my %c;
	$c{$_}++ for @_;
	return join(' ', map { "$_ $c{$_}" } sort keys %c);
}

# 1. 8 clients, 2 server connections.  Each session sends, for each of 10
# objects, its own event and the event all sessions share, each statement
# its own transaction (autocommit): per object 1 queued, 8 coalesced (the
# 8 own events and the shared one accepted once, 9 events on one job) and
# 7 duplicates.
my $n_sessions = 8;
my $n_objects = 10;
my @sessions = map { $bouncer->session('primary', 'app') } 1 .. $n_sessions;
my @scripts;
for my $s (1 .. $n_sessions)
{
	my $sql = '';
	for my $o (1 .. $n_objects)
	{
		for my $ev ("ev-$s-$o", "shared-$o")
		{
			$sql .= "SELECT format('%s|%s|%s|%s', 'obj-$o', e.job_id, e.outcome, pg_backend_pid())"
			  . " FROM webhook_ingest.enqueue('held', 'obj-$o', '{\"session\": $s}', '$ev') e;\n";
		}
	}
	push @scripts, $sql;
}
my ($outs, $errs, $ms) = run_concurrently(\@sessions, \@scripts);
my @rows = map { [ split /\|/, $_, -1 ] } map { split /\n/ } @$outs;
my %pids = map { $_->[3] => 1 } @rows;
my %job_of;
$job_of{ $_->[0] }{ $_->[1] }++ for @rows;
my @errors = grep { $_ ne '' } @$errs;
is(scalar(@errors), 0, "$n_sessions sessions through pgbouncer: no error") or diag(join "\n", @errors);
is(scalar(@rows), $n_sessions * $n_objects * 2,
	sprintf('  %d enqueue calls answered (%.0f ms)', $n_sessions * $n_objects * 2, $ms));
is(tally(map { $_->[2] } @rows),
	sprintf('coalesced %d duplicate %d queued %d', 8 * $n_objects, 7 * $n_objects, $n_objects),
	'  outcomes: one queued per object, every other event coalesced, 7 duplicates of each shared event');
is(scalar(grep { keys %{ $job_of{$_} } == 1 } keys %job_of), $n_objects,
	'  every answer for an object names the same job');
cmp_ok(scalar(keys %pids), '<=', 2,
	sprintf('  %d clients shared %d server connections (backends %s)', $n_sessions, scalar(keys %pids),
		join(',', sort keys %pids)));
is($primary->safe_psql('postgres', q{SELECT count(*) || ' ' || min(events) || ' ' || max(events)
	FROM webhook_ingest.jobs WHERE source = 'held' AND state = 'pending'}),
	"$n_objects 9 9", "  $n_objects pending jobs, each serving 9 events");

# 2. A source change counts at once on every pooled server connection: one
# session holds one server connection in a transaction, so the other's
# statement runs on the other one; both served enqueue above, so both had
# the source in their per-backend cache.
my ($holder, $other) = @sessions[ 0, 1 ];
$primary->safe_psql('postgres', q{SELECT webhook_ingest.alter_source('held', enqueue_roles => ARRAY['nobody'::regrole])});
q_ok($holder, 'BEGIN');
my $pid_a = q_ok($holder, 'SELECT pg_backend_pid()');
my ($out, $err) = $other->query(q{SELECT pg_backend_pid() FROM webhook_ingest.enqueue('held', 'obj-1')});
my $refused_other = $other->{stderr} =~ /permission denied|42501|may not enqueue/;
$other->{stderr} = '';
($out, $err) = $holder->query(q{SELECT 1 FROM webhook_ingest.enqueue('held', 'obj-1')});
my $refused_holder = $holder->{stderr} =~ /permission denied|42501|may not enqueue/;
$holder->{stderr} = '';
$holder->query('ROLLBACK');
$holder->{stderr} = '';
ok($refused_other && $refused_holder,
	"after enqueue_roles excluded app, enqueue is refused on both server connections (held one: $pid_a)");
$primary->safe_psql('postgres', q{SELECT webhook_ingest.alter_source('held', reset_enqueue_roles => true)});
is(q_ok($other, q{SELECT outcome FROM webhook_ingest.enqueue('held', 'obj-1', NULL, 'shared-1')}), 'duplicate',
	'  and accepted again (duplicate of a remembered event) once reset');
$_->quit for @sessions;

# 3. pgbench through pgbouncer, 8 clients over the pool of 2, each
# transaction one enqueue of a random object with a random event id from a
# range the clients share; the outcomes go to a table.
my $script = "$bouncer->{dir}/enqueue.sql";
open my $fh, '>', $script or die $!;
print $fh q{\set obj random(1, 20)
\set ev random(1, 300)
INSERT INTO bench_outcomes
SELECT :mode, :client_id, 'obj-' || :obj::text, 'ev-' || :ev::text, e.job_id, e.outcome
  FROM webhook_ingest.enqueue('bench', 'obj-' || :obj::text, NULL, 'ev-' || :ev::text) e;
};
close $fh;
my $per_client = 50;
my ($rc, $bout, $berr) = $bouncer->pgbench('primary', 'app', '-n', '-M', 'extended', '-c', 8, '-j', 4,
	'-t', $per_client, '-D', 'mode=extended', '-f', $script);
my ($tps) = $bout =~ /tps = ([\d.]+)/;
is($rc, 0, sprintf('pgbench -M extended -c 8 through pgbouncer: exit 0 (%s tps)', $tps // '?'))
  or diag("$bout\n$berr");
like($bout, qr/number of transactions actually processed: ${\(8 * $per_client)}\//,
	'  every transaction processed') or diag($bout);
is($primary->safe_psql('postgres', q{
	SELECT concat_ws(' ', count(*) = 400,
		count(*) FILTER (WHERE outcome = 'queued') = count(DISTINCT external_id),
		count(*) FILTER (WHERE outcome IN ('queued', 'coalesced')) = count(DISTINCT event_id),
		count(*) FILTER (WHERE outcome = 'duplicate') = count(*) - count(DISTINCT event_id),
		count(*) FILTER (WHERE outcome NOT IN ('queued', 'coalesced', 'duplicate')) = 0)
	  FROM bench_outcomes WHERE mode = 'extended'}), 't t t t t',
	'  400 outcomes: one queued per object, one queued or coalesced per event id, the rest duplicate');
is($primary->safe_psql('postgres', q{
	SELECT (SELECT count(*) || ' ' || sum(events) FROM webhook_ingest.jobs WHERE source = 'bench')
	     = (SELECT count(DISTINCT external_id) || ' ' || count(DISTINCT event_id) FROM bench_outcomes)}),
	't', '  the jobs: one per object, their events the distinct event ids');

# Protocol-level named prepared statements (pgbench -M prepared; psycopg 3
# after prepare_threshold executions; JDBC's prepareThreshold; node-pg's
# named queries) live on a server connection, and pgbouncer 1.18 does not
# track them: 8 clients preparing one name on 2 server connections clash
# (at most 2 can succeed).  pgbench goes on executing the name, which works
# here only because every client prepared the same text under it.
($rc, $bout, $berr) = $bouncer->pgbench('primary_prepared', 'app', '-n', '-M', 'prepared', '-c', 8, '-j', 4,
	'-t', 5, '-D', 'mode=prepared', '-f', $script);
my $clashes = () = $berr =~ /prepared statement "P\d*_\d+" (?:already exists|does not exist)/g;
my ($bmajor, $bminor) = @{ PgBouncer::version() };
if ($bmajor > 1 || $bminor >= 24)
{
	# 1.24 (Debian 13) tracks them by default (max_prepared_statements 200).
	is($clashes, 0,
		"pgbench -M prepared through transaction pooling: pgbouncer $bmajor.$bminor tracks the PREPAREs, none failed (8 clients, 2 server connections)")
	  or diag("$bout\n$berr");
}
else
{
	cmp_ok($clashes, '>=', 6,
		"pgbench -M prepared through transaction pooling: $clashes PREPAREs failed with 'prepared statement ... already exists' (8 clients, 2 server connections)")
	  or diag("$bout\n$berr");
}

# 4. wait_for_job through pgbouncer, then wait_replayed(done_lsn) through the
# standby's pgbouncer database, then read there.  Each statement may run on
# another server connection; replay is the standby's, not the connection's.
my $app = $bouncer->session('primary', 'app');
my $waiter = $bouncer->session('primary_wait', 'app');
my $reader = $bouncer->session('standby', 'app');
my $n_jobs = 10;
my ($done_true, $unwaited_missed, $seen_after_wait) = (0, 0, 0);
my (@wait_ms, @problems);
for my $i (1 .. $n_jobs)
{
	my $id = "pgb-$i";
	my $job = q_ok($app, "SELECT job_id FROM webhook_ingest.enqueue('blog', '$id', NULL, 'ev-$id')");
	my $t0 = time();
	$done_true++ if q_ok($waiter, "SELECT webhook_ingest.wait_for_job($job, '30s')") eq 't';
	push @wait_ms, (time() - $t0) * 1000;
	my $lsn = q_ok($waiter, "SELECT done_lsn FROM webhook_ingest.jobs WHERE id = $job");
	my $seen_sql = "SELECT (SELECT count(*) FROM posts WHERE id = '$id') || '/'"
	  . " || (SELECT count(*) FROM post_tags WHERE post_id = '$id')";
	$unwaited_missed++ if q_ok($reader, $seen_sql) ne '1/2';
	q_ok($reader, "CALL webhook_ingest.wait_replayed('$lsn', '30s')");
	my $seen = q_ok($reader, $seen_sql);
	if ($seen eq '1/2') { $seen_after_wait++ } else { push @problems, "$id (job $job, $lsn): saw $seen" }
}
is($done_true, $n_jobs, sprintf('wait_for_job through pgbouncer returned true for %d/%d jobs (max %.0f ms)',
	$done_true, $n_jobs, (sort { $b <=> $a } @wait_ms)[0]));
cmp_ok($unwaited_missed, '>=', 1,
	"  reading the standby through pgbouncer without waiting missed the rows $unwaited_missed/$n_jobs times");
is($seen_after_wait, $n_jobs, "  after wait_replayed(done_lsn) through pgbouncer the read saw them $seen_after_wait/$n_jobs times")
  or diag(join("\n", @problems));

# 5. A waiter holds its server connection until it returns.  Two waiters in
# the intake's pool of 2 leave no connection for enqueue: it waits in
# pgbouncer's queue until one returns.  In a pool of their own they do not.
my $stuck = q_ok($app, q{SELECT job_id FROM webhook_ingest.enqueue('stuck', 'stuck-1')});
$primary->poll_query_until('postgres', "SELECT state = 'running' FROM webhook_ingest.jobs WHERE id = $stuck")
  or die 'the stuck job did not start';
sub enqueue_ms_while_waiting
{
	my ($pool, $id) = @_;
	my @w = map { $bouncer->session($pool, 'app') } 1 .. 2;
	$_->query_until(qr/started/, "\\echo started\nSELECT webhook_ingest.wait_for_job($stuck, '2s');\n\\echo returned\n")
	  for @w;
	$primary->poll_query_until('postgres', q{SELECT count(*) = 2 FROM pg_stat_activity
		WHERE state = 'active' AND query LIKE 'SELECT webhook_ingest.wait_for_job%'})
	  or die 'the waiters did not start';
	my $t0 = time();
	$bouncer->psql('primary', "SELECT outcome FROM webhook_ingest.enqueue('held', '$id')", 'app');
	my $ms = (time() - $t0) * 1000;
	for my $s (@w)
	{
		$s->{run}->pump until $s->{stdout} =~ /returned/;
		$s->quit;
	}
	return $ms;
}
my $blocked_ms = enqueue_ms_while_waiting('primary', 'w-1');
cmp_ok($blocked_ms, '>', 800,
	sprintf('two wait_for_job calls in the intake pool (2 connections) held up an enqueue for %.0f ms', $blocked_ms));
my $free_ms = enqueue_ms_while_waiting('primary_wait', 'w-2');
cmp_ok($free_ms, '<', 500,
	sprintf('  with the waiters in a pool of their own the enqueue took %.0f ms', $free_ms));
$primary->safe_psql('postgres', "SELECT webhook_ingest.cancel($stuck)");

# 6. LISTEN webhook_ingest_done.  listen_tx: transaction pooling, one server
# connection; listen_session: session pooling.  A job done after each LISTEN.
sub finish_one_job
{
	my ($id) = @_;
	my $job = $primary->safe_psql('postgres', "SELECT job_id FROM webhook_ingest.enqueue('blog', '$id')");
	$primary->poll_query_until('postgres', "SELECT webhook_ingest.wait_for_job($job, '10s')")
	  or die "job $job did not finish";
	return $job;
}
my $log_before = length($bouncer->log_contents);
my $tx_listener = $bouncer->session('listen_tx', 'app');
q_ok($tx_listener, 'LISTEN webhook_ingest_done');
my $tx_job = finish_one_job('listen-tx');
my $t0 = time();
usleep(50_000) until substr($bouncer->log_contents, $log_before) =~ /got packet 'A' from server when not linked/
  || time() - $t0 > 10;
my $tx_heard = q_ok($tx_listener, 'SELECT 1') . $tx_listener->{stdout};
unlike($tx_heard, qr/Asynchronous notification/,
	"transaction pooling: a client that ran LISTEN webhook_ingest_done hears nothing of job $tx_job");
like(substr($bouncer->log_contents, $log_before), qr/got packet 'A' from server when not linked/,
	"  pgbouncer dropped the notification (its log: got packet 'A' from server when not linked)");
my $bystander = $bouncer->session('listen_tx', 'app');
is(q_ok($bystander, 'SELECT pg_listening_channels()'), 'webhook_ingest_done',
	'  and another client, which never ran LISTEN, is served by the listening server connection');
$bystander->quit;
$tx_listener->quit;

my $session_listener = $bouncer->session('listen_session', 'app');
q_ok($session_listener, 'LISTEN webhook_ingest_done');
my $s_job = finish_one_job('listen-session');
$t0 = time();
my $heard = '';
until ($heard =~ /"job_id": ?$s_job\b/ || time() - $t0 > 10)
{
	$heard .= q_ok($session_listener, 'SELECT 1') . "\n";
	usleep(50_000);
}
like($heard, qr/Asynchronous notification "webhook_ingest_done" with payload "\{"job_id": ?$s_job\b/,
	"session pooling: the listener hears job $s_job done");
my $listen_pid = q_ok($session_listener, 'SELECT pg_backend_pid()');
q_ok($session_listener, q{SELECT outcome FROM webhook_ingest.enqueue('held', 'session-1')});
$session_listener->quit;
# The next client gets the same server connection after pgbouncer's
# server_reset_query (DISCARD ALL): no LISTEN left, and enqueue's kept plans
# still serve.
my $next_client = $bouncer->session('listen_session', 'app');
is(q_ok($next_client, q{SELECT pg_backend_pid() || ' ' || (SELECT count(*) FROM pg_listening_channels())}), "$listen_pid 0",
	'  the next client of that server connection inherits no LISTEN (DISCARD ALL)');
is(q_ok($next_client, q{SELECT outcome FROM webhook_ingest.enqueue('held', 'session-1')}), 'coalesced',
	'  and enqueue works on it after DISCARD ALL');
$next_client->quit;

# 7. receive(source, headers, body) through pgbouncer: GitHub's signature
# scheme, event id from X-GitHub-Delivery, external id from the body.
{
	my $secret = q{It's a Secret to Everybody};
	$primary->safe_psql('postgres', qq{
		SELECT webhook_ingest.add_source('gh', 'http://127.0.0.1:$port/posts/{external_id}',
			'store_post(text,jsonb,jsonb)', signature_scheme => 'github',
			signing_secrets => ARRAY[\$s\$$secret\$s\$], external_id_path => '\$.post.id');
		SELECT webhook_ingest.pause_source('gh');});
	my $receive_sql = sub {
		my ($delivery, $body, $sign_with) = @_;
		my $sig = 'sha256=' . hmac_sha256_hex($body, $sign_with // $secret);
		return "SELECT format('%s|%s', r.job_id, r.outcome) FROM webhook_ingest.receive('gh', "
		  . "jsonb_build_object('X-Hub-Signature-256', '$sig', 'X-GitHub-Delivery', '$delivery', "
		  . "'X-GitHub-Event', 'post'), \$b\$$body\$b\$) r;\n";
	};
	# 4 sessions, 3 posts: each session delivers its own event per post
	# and redelivers the one every session shares.
	my @rs = map { $bouncer->session('primary', 'app') } 1 .. 4;
	my @rscripts = map {
		my $s = $_;
		join('', map { ($receive_sql->("d-$s-$_", qq({"action": "edited", "post": {"id": "gh-$_"}, "n": $s})),
			$receive_sql->("d-shared-$_", qq({"action": "edited", "post": {"id": "gh-$_"}}))) } 1 .. 3)
	} 1 .. 4;
	my ($routs, $rerrs) = run_concurrently(\@rs, \@rscripts);
	my @rrows = map { [ split /\|/, $_, -1 ] } map { split /\n/ } @$routs;
	is(join('', @$rerrs), '', 'receive() from 4 sessions through pgbouncer: no error');
	is(tally(map { $_->[1] } @rrows), 'coalesced 12 duplicate 9 queued 3',
		'  24 deliveries: 3 queued, 12 coalesced, 9 redeliveries duplicate');
	my ($o, $e) = $rs[0]->query("\\set VERBOSITY verbose\n"
		. $receive_sql->('d-forged', '{"post": {"id": "gh-9"}}', 'not the secret'));
	like($rs[0]->{stderr}, qr/ERROR:\s+28000:/,
		'  a delivery signed with another secret is refused with 28000: ' . (($rs[0]->{stderr} =~ /(ERROR:.*)/)[0] // "(no error)"));
	$rs[0]->{stderr} = '';
	$_->quit for @rs;
	is($primary->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.jobs WHERE source = 'gh'
		AND external_id = 'gh-9'}), '0', '  and wrote nothing');
	$primary->safe_psql('postgres', q{SELECT webhook_ingest.resume_source('gh')});
	my @gh_jobs = split /\n/, $primary->safe_psql('postgres',
		q{SELECT id FROM webhook_ingest.jobs WHERE source = 'gh' ORDER BY id});
	is(join(',', map { q_ok($app, "SELECT webhook_ingest.wait_for_job($_, '30s')") } @gh_jobs), 't,t,t',
		'  wait_for_job through pgbouncer: the 3 jobs done');
	is($primary->safe_psql('postgres', q{SELECT string_agg(id, ',' ORDER BY id) FROM posts WHERE id LIKE 'gh-%'}),
		'gh-1,gh-2,gh-3', '  and the handler wrote the 3 posts');
}

is((grep { $_->{database} eq 'primary' } $bouncer->admin('SHOW POOLS'))[0]{sv_active} // '', '0',
	'no server connection of the intake pool is left active');
$app->quit;
$waiter->quit;
$reader->quit;
$bouncer->stop;
$standby->stop;
$primary->stop;
done_testing();
