# Backup and restore: pg_dump | psql into a new database of the same cluster,
# and pg_dump -Fc | pg_restore into another.  Sources (with their headers,
# handler, enqueue_roles, TLS settings and client key, proxy), the jobs that are not done, the job id sequence,
# the event ids, the documents and reconciliation (settings, a sweep's cursor, the versions fetched) travel; a job that was running comes back
# pending; a redelivered event id is still a duplicate; new job ids follow
# the restored ones; and the restored database's worker drains its queue
# from the loopback upstream (test/upstream.py on 127.0.0.1:18080, started by
# test/run) - also when it was running before the data arrived.  A
# non-superuser's restore loads none of the extension's rows.
#
# In this version the worker serves webhook_ingest.database only, and CREATE
# EXTENSION is refused elsewhere: the source database is served (with the
# worker disabled, so the queue stays as it was set up) while it is dumped,
# and each restore target is served after a restart that names it.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my %tls = map { $_ => slurp_file("test/data/tls/client.$_") } qw(key);
$tls{ca} = slurp_file('test/data/tls/ca.pem');
$tls{cert} = slurp_file('test/data/tls/client.pem');

my $node = PostgreSQL::Test::Cluster->new('dump');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.backoff_base = 50ms
webhook_ingest.backoff_max = 200ms
webhook_ingest.database = 'postgres'
webhook_ingest.enabled = off
});

# Serve $db, with the worker on or off; a restart, as webhook_ingest.database needs.
sub serve
{
	my ($db, $enabled) = @_;
	# (appended: the last line wins)
	$node->append_conf('postgresql.conf', "webhook_ingest.database = '$db'\nwebhook_ingest.enabled = $enabled");
	$node->restart;
}

sub enable_worker
{
	$node->append_conf('postgresql.conf', 'webhook_ingest.enabled = on');
	$node->reload;
}

# A query's output, or '' if it fails: an assertion about it fails, the test goes on.
sub query
{
	my ($db, $sql) = @_;
	my ($out, $err) = ('', '');
	$node->psql($db, $sql, stdout => \$out, stderr => \$err, on_error_stop => 1);
	diag("$db: $err") if $err ne '';
	return $out;
}

$node->start;
$node->safe_psql('postgres', q{
	CREATE ROLE handler_owner NOLOGIN;
	CREATE DATABASE src;
	CREATE DATABASE plain_copy;
	CREATE DATABASE custom_copy;
	CREATE DATABASE live_copy;
	CREATE ROLE restorer LOGIN;
	CREATE DATABASE user_copy OWNER restorer;
});
serve('src', 'off');

# The source database: two sources, one with a handler owned by another role
# (sources_guard checks it again on restore), a secret header and
# enqueue_roles; jobs in every state; event ids; a document.
$node->safe_psql('src', q{
	CREATE EXTENSION webhook_ingest;
	CREATE ROLE app LOGIN IN ROLE webhook_ingest_enqueue;
	GRANT webhook_ingest_admin TO restorer;
	CREATE TABLE public.effects (external_id text, title text);
	GRANT INSERT ON public.effects TO handler_owner;
	CREATE FUNCTION public.record(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE sql AS $$ INSERT INTO public.effects VALUES (external_id, details->>'title') $$;
	ALTER FUNCTION public.record(text, jsonb, jsonb) OWNER TO handler_owner;
	SELECT webhook_ingest.add_source('blog', 'http://127.0.0.1:18080/posts/{external_id}',
	                                 'public.record(text,jsonb,jsonb)',
	                                 headers => '{"Authorization": "Bearer s3cret-token"}',
	                                 timeout_ms => 5000, max_attempts => 7, enqueue_roles => '{app}');
	SELECT webhook_ingest.add_source('docs', 'http://127.0.0.1:18080/posts/{external_id}');
	SELECT count(*) FROM generate_series(1, 5) i,
	       webhook_ingest.enqueue('blog', 'p-' || i, jsonb_build_object('n', i), 'ev-p-' || i) e;
	SELECT count(*) FROM generate_series(1, 3) i,
	       webhook_ingest.enqueue('docs', 'q-' || i, NULL, 'ev-q-' || i) e;
	SELECT webhook_ingest.enqueue('blog', 'p-1', NULL, 'ev-p-1-again');  -- coalesced: events = 2
	SELECT webhook_ingest.enqueue('blog', 'run-1', NULL, 'ev-run-1');
	SELECT webhook_ingest.enqueue('blog', 'dead-1', NULL, 'ev-dead-1');
	SELECT webhook_ingest.enqueue('blog', 'gone-1', NULL, 'ev-gone-1');
	SELECT webhook_ingest.enqueue('blog', 'done-1', NULL, 'ev-done-1');
	-- a claim as a worker makes it, with this session's pid and a lease of an hour
	UPDATE webhook_ingest.jobs SET state = 'running', attempts = 3, lease_until = now() + interval '1 hour',
	       worker_pid = pg_backend_pid(), started_at = now(), refetch = true
	 WHERE external_id = 'run-1';
	UPDATE webhook_ingest.jobs SET state = 'dead', attempts = 7, finished_at = now(), last_status = 500,
	       last_error = 'HTTP 500'
	 WHERE external_id = 'dead-1';
	SELECT webhook_ingest.cancel(id) FROM webhook_ingest.jobs WHERE external_id = 'gone-1';
	UPDATE webhook_ingest.jobs SET state = 'done', attempts = 1, finished_at = now(),
	       done_lsn = pg_current_wal_lsn()
	 WHERE external_id = 'done-1';
	INSERT INTO webhook_ingest.documents VALUES ('docs', 'old-1', '{"title": "kept"}', now() - interval '1 day');
	-- where purge_events() would resume: a page of this copy of events, it must not travel
	UPDATE webhook_ingest.purge_position SET next_page = 5;
});
# A source with its CA, client certificate and key, and a proxy (no jobs).
$node->safe_psql('src', qq{
	SELECT webhook_ingest.add_source('secure', 'https://127.0.0.1:18443/posts/{external_id}',
	                                 tls_ca => '$tls{ca}', tls_client_cert => '$tls{cert}',
	                                 tls_client_key => '$tls{key}', proxy => 'http://127.0.0.1:18480')});

# A reconciling source (issue 30) in the middle of a sweep, with a version fetched and one listed.
$node->safe_psql('src', q{
	SELECT webhook_ingest.add_source('swept', 'http://127.0.0.1:18080/github/repos/o/r/issues/{external_id}',
	       reconcile => '{"url": "http://127.0.0.1:18080/github/repos/o/r/issues?since={since}",
	                      "id": "$.number", "every": "2 hours", "since": "2024-01-01T00:00:00Z"}');
	UPDATE webhook_ingest.reconcile_sweeps
	   SET page_url = 'http://127.0.0.1:18080/github/repos/o/r/issues?page=3', pages = 2, started_at = now(),
	       total_missed = 4;
	INSERT INTO webhook_ingest.reconcile_objects (source_id, external_id, version, listed)
	SELECT s.id, '7', 1704067200000000, 1704067300000000 FROM webhook_ingest.sources s WHERE s.name = 'swept';
});

my $state_counts = q{SELECT string_agg(state || '=' || n, ',' ORDER BY state) FROM
	(SELECT state::text, count(*) n FROM webhook_ingest.jobs GROUP BY state) s};
is($node->safe_psql('src', $state_counts), 'cancelled=1,dead=1,done=1,pending=8,running=1',
	'the source database holds jobs in every state');

# What must travel, as the source database has it.
my %query = (
	sources => q{SELECT name, url_template, handler::text, headers::text, timeout_ms, max_attempts,
	                    created_at, updated_at, paused, enqueue_roles::text
	               FROM webhook_ingest.sources ORDER BY name},
	# every job but the running one (it comes back pending) and the done one (it stays behind)
	jobs => q{SELECT id, source, external_id, state, payload::text, events, refetch, attempts, last_error,
	                 last_status, created_at, updated_at, next_attempt_at, lease_until, worker_pid,
	                 finished_at, started_at, done_lsn
	            FROM webhook_ingest.jobs WHERE external_id NOT IN ('run-1', 'done-1') ORDER BY id},
	events => q{SELECT source, event_id, received_at FROM webhook_ingest.events ORDER BY 1, 2},
	# the TLS settings, the key (superusers only) with them
	tls => q{SELECT s.name, md5(s.tls_ca), md5(s.tls_client_cert), md5(k.tls_client_key), s.proxy
	           FROM webhook_ingest.sources s LEFT JOIN webhook_ingest.source_tls_keys k ON k.source = s.name
	          ORDER BY 1},
	documents => q{SELECT source, external_id, details::text, fetched_at FROM webhook_ingest.documents ORDER BY 1, 2},
	reconcile => q{SELECT s.name, to_jsonb(r) - 'source_id', w.page_url, w.pages, w.started_at, w.watermark,
	                      w.total_missed, o.external_id, o.version, o.listed
	                 FROM webhook_ingest.reconcile_settings r JOIN webhook_ingest.sources s ON s.id = r.source_id
	                 JOIN webhook_ingest.reconcile_sweeps w ON w.source_id = r.source_id
	                 LEFT JOIN webhook_ingest.reconcile_objects o ON o.source_id = r.source_id ORDER BY 1},
	running_job => q{SELECT id, source, external_id, payload::text, events, created_at
	                   FROM webhook_ingest.jobs WHERE external_id = 'run-1'},
);
my %expected = map { $_ => $node->safe_psql('src', $query{$_}) } keys %query;
my $max_id = $node->safe_psql('src', q{SELECT max(id) FROM webhook_ingest.jobs});

my $tmp = PostgreSQL::Test::Utils::tempdir;
$node->command_ok([ 'pg_dump', '-d', 'src', '-f', "$tmp/src.sql" ], 'pg_dump (plain) of the source database');
$node->command_ok([ 'pg_dump', '-Fc', '-d', 'src', '-f', "$tmp/src.dump" ], 'pg_dump -Fc of the source database');

sub check_restored
{
	my ($db, $how) = @_;

	for my $what (qw(sources tls jobs events documents reconcile))
	{
		is(query($db, $query{$what}), $expected{$what}, "$how: $what equal to the source database's");
	}
	like($expected{tls}, qr/^secure\|[0-9a-f]{32}\|[0-9a-f]{32}\|[0-9a-f]{32}\|http/m,
		"$how: (the TLS source has a CA, a certificate and a key to compare)");
	like(query($db, q{SELECT headers->>'Authorization' FROM webhook_ingest.sources WHERE name = 'blog'}),
		qr/^Bearer s3cret-token$/, "$how: the source's secret header is in the dump and restored");
	is(query($db, $state_counts), 'cancelled=1,dead=1,pending=9',
		"$how: pending, dead and cancelled jobs restored, the done job not");
	is(query($db, $query{running_job}), $expected{running_job},
		"$how: the running job restored (same id, payload, events)");
	is(query($db, q{SELECT state || ' ' || attempts || ' ' || (lease_until IS NULL) || ' '
	                               || (worker_pid IS NULL) || ' ' || (next_attempt_at <= now()) || ' ' || last_error
	                             FROM webhook_ingest.jobs WHERE external_id = 'run-1'}),
		'pending 2 true true true reclaimed: restored while it was running',
		"$how: the running job is pending and due, its lease and pid dropped, the attempt not counted");
	is(query($db, q{SELECT next_page FROM webhook_ingest.purge_position}), '0',
		"$how: the purge walk starts at the first page (the source's position stayed behind)");

	# the dedup memory: redeliveries are duplicates, as the app sends them
	is(query($db, q{SET ROLE app; SELECT string_agg(outcome, ',' ORDER BY e)
	                            FROM unnest('{ev-p-1,ev-p-1-again,ev-run-1,ev-done-1}'::text[]) e,
	                                 webhook_ingest.enqueue('blog', 'p-1', NULL, e)}),
		'duplicate,duplicate,duplicate,duplicate', "$how: redelivered event ids are still duplicates");
	is(query($db, q{SELECT outcome FROM webhook_ingest.enqueue('docs', 'q-1', NULL, 'ev-q-1')}),
		'duplicate', "$how: also for a source without a handler");

	# new job ids follow the restored ones (and the done job's, which did not travel)
	my $new_id = query($db, q{SELECT job_id FROM webhook_ingest.enqueue('blog', 'new-1', NULL, 'ev-new-1')});
	my $same_id = $new_id eq '' ? 0 : query($db, qq{SELECT count(*) FROM webhook_ingest.jobs WHERE id = $new_id});
	ok($new_id ne '' && $new_id > $max_id && $same_id == 1,
		"$how: a new job's id ($new_id) is past every restored one and the done job's (max $max_id), and unique");
}

sub check_drained
{
	my ($db, $how) = @_;

	enable_worker();
	# 5 + 1 (running) + 1 (new) jobs of blog, 3 of docs
	$node->poll_query_until($db, q{
		SELECT count(*) = 0 FROM webhook_ingest.jobs WHERE state IN ('pending', 'running')})
	  or diag(query($db, q{SELECT state, count(*), max(last_error) FROM webhook_ingest.jobs GROUP BY state}));
	is(query($db, $state_counts), 'cancelled=1,dead=1,done=10',
		"$how: the restored database's worker drained every pending job");
	is(query($db, q{SELECT count(DISTINCT external_id) || '/' || count(*) FROM public.effects}),
		'7/7', "$how: the handler ran once for each of blog's jobs");
	is(query($db, q{SELECT count(*) FROM webhook_ingest.documents WHERE details IS NOT NULL}),
		'4', "$how: the documents of docs fetched beside the restored one");
	is(query($db, q{SELECT database FROM webhook_ingest.worker_status WHERE role = 'fetcher'}), $db,
		"$how: it was this database's worker");
}

# 1. pg_dump | psql into a new database of the same cluster
serve('plain_copy', 'off');
$node->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', 'plain_copy', '-f', "$tmp/src.sql" ],
	'plain dump restored with psql (ON_ERROR_STOP)');
check_restored('plain_copy', 'psql');
check_drained('plain_copy', 'psql');

# 2. pg_dump -Fc | pg_restore into another
serve('custom_copy', 'off');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'custom_copy', "$tmp/src.dump" ],
	'custom dump restored with pg_restore (--exit-on-error)');
check_restored('custom_copy', 'pg_restore');
check_drained('custom_copy', 'pg_restore');

# 3. into a database whose worker is already running (and has taken back what
# was left running when it started): the schema first, then, once the worker
# is past its start, the data.  The running job comes back due all the same,
# not after its lease (an hour) nor never (its pid could be this worker's).
serve('live_copy', 'on');
$node->command_ok([ 'pg_restore', '--exit-on-error', '--section=pre-data', '-d', 'live_copy', "$tmp/src.dump" ],
	'live worker: schema restored');
$node->poll_query_until('live_copy', q{SELECT state = 'running' FROM webhook_ingest.worker_status WHERE role = 'fetcher'})
  or diag('the worker did not start');
sleep 1;    # past its reclaim of running jobs at start
$node->command_ok([ 'pg_restore', '--exit-on-error', '--section=data', '--section=post-data', '-d', 'live_copy',
	"$tmp/src.dump" ], 'live worker: data restored');
$node->poll_query_until('live_copy', q{
	SELECT count(*) = 0 FROM webhook_ingest.jobs WHERE state IN ('pending', 'running')})
  or diag(query('live_copy', q{SELECT state, count(*), max(last_error) FROM webhook_ingest.jobs GROUP BY state}));
is(query('live_copy', $state_counts), 'cancelled=1,dead=1,done=9',
	'live worker: every pending job done, the one restored as running too');
is(query('live_copy', q{SELECT count(DISTINCT external_id) || '/' || count(*) FROM public.effects}),
	'6/6', 'live worker: the handler ran once for each of blog\'s jobs');

# 4. a non-superuser (the database's owner, a webhook_ingest_admin) restores
# into a database where a superuser created the extension: the extension's
# rows are refused (no INSERT on its tables), the rest of the database is restored.
serve('user_copy', 'off');
$node->safe_psql('user_copy', 'CREATE EXTENSION webhook_ingest');
my ($stdout, $stderr);
my $ok = IPC::Run::run([ 'pg_restore', '--no-owner', '-U', 'restorer', '-d', $node->connstr('user_copy'),
	"$tmp/src.dump" ], '>', \$stdout, '2>', \$stderr);
note("pg_restore as a non-superuser:\n$stderr");
ok(!$ok, 'pg_restore as a non-superuser reports errors');
like($stderr, qr/permission denied for table sources/, 'the COPY of sources is refused');
like($stderr, qr/permission denied for table jobs/, 'the COPY of jobs is refused');
is(query('user_copy', q{SELECT (SELECT count(*) FROM webhook_ingest.sources) + (SELECT count(*) FROM webhook_ingest.jobs)
                         + (SELECT count(*) FROM webhook_ingest.events)
                         + (SELECT count(*) FROM webhook_ingest.reconcile_settings)}),
	'0', 'and none of the extension\'s rows is restored');
is(query('user_copy', q{SELECT count(*) FROM pg_proc WHERE oid = 'public.record(text,jsonb,jsonb)'::regprocedure}), '1',
	'the rest of the database is (the handler function)');

ok(!$node->log_contains('PANIC|TRAP|terminated by signal'), 'no crash in the log');

$node->stop;
done_testing();
