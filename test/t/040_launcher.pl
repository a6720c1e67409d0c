# The launcher: one worker per database where the extension is installed,
# against the loopback upstream (test/upstream.py on 127.0.0.1:18080, started
# by test/run).  Three databases drain their own queues; DROP EXTENSION stops
# a worker; a plain DROP DATABASE with 50 transfers in flight is prompt;
# templates get no worker and CREATE DATABASE ... TEMPLATE works; workers
# come back after a restart and after a kill -9 of the launcher; the
# test-runner pattern (create, use, drop, 20 times) leaks nothing; more
# databases than webhook_ingest.max_databases: a log line and a row.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('launcher');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.max_databases = 4
max_worker_processes = 16
restart_after_crash = on
});
$node->start;

sub q1 { my ($db, $sql) = @_; return $node->safe_psql($db, $sql); }

# Databases whose worker is connected, as pg_stat_activity sees them.
sub worker_dbs
{
	return q1('postgres', q{SELECT coalesce(string_agg(datname, ',' ORDER BY datname), '')
	                          FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'});
}

sub wait_workers
{
	my ($want, $what) = @_;
	my $got;
	for (1 .. 300)
	{
		$got = worker_dbs();
		last if $got eq $want;
		usleep(50_000);
	}
	is($got, $want, $what);
}

sub install
{
	my ($db) = @_;
	q1($db, q{
		CREATE EXTENSION webhook_ingest;
		SELECT webhook_ingest.add_source('blog', 'http://127.0.0.1:18080/posts/{external_id}');
		SELECT webhook_ingest.add_source('stuck', 'http://127.0.0.1:18080/slow/{external_id}');
	});
}

sub wait_done
{
	my ($db, $n) = @_;
	return $node->poll_query_until($db,
		qq{SELECT count(*) = $n FROM webhook_ingest.jobs WHERE state = 'done'});
}

my $log_start = -s $node->logfile;
like(q1('postgres', q{SELECT backend_type FROM pg_stat_activity WHERE backend_type = 'webhook_ingest launcher'}),
	qr/launcher/, 'the launcher runs, with no database');

# --- CREATE EXTENSION starts the database's worker at once -------------------
q1('postgres', 'CREATE DATABASE db1');
q1('postgres', 'CREATE DATABASE db2');
q1('postgres', 'CREATE DATABASE db3');
my $t = q1('db1', q{
	CREATE EXTENSION webhook_ingest;
	SELECT webhook_ingest.add_source('blog', 'http://127.0.0.1:18080/posts/{external_id}');
	SELECT webhook_ingest.add_source('stuck', 'http://127.0.0.1:18080/slow/{external_id}');
	SELECT webhook_ingest.enqueue('blog', 'first');
	SELECT 'committed at ' || extract(epoch FROM clock_timestamp());
});
my ($committed) = $t =~ /committed at ([0-9.]+)/;
my $first_ms;
for (1 .. 400)
{
	$first_ms = q1('db1', qq{SELECT (extract(epoch FROM finished_at) - $committed) * 1000
	                           FROM webhook_ingest.jobs WHERE external_id = 'first' AND state = 'done'});
	last if $first_ms ne '';
	usleep(10_000);
}
cmp_ok($first_ms, '<', 1000, sprintf('CREATE EXTENSION, then the first job done %.0f ms after the commit', $first_ms));
diag(sprintf('measured: CREATE EXTENSION -> first job done: %.0f ms', $first_ms));

# --- three databases, three workers, each draining its own queue -------------
install('db2');
install('db3');
wait_workers('db1,db2,db3', 'three databases with the extension: three workers');
for my $db (qw(db1 db2 db3))
{
	q1($db, qq{SELECT count(*) FROM generate_series(1, 20) i, webhook_ingest.enqueue('blog', '$db-' || i) e});
}
ok(wait_done('db1', 21) && wait_done('db2', 20) && wait_done('db3', 20), 'each worker drained its own queue');
is(q1('db2', q{SELECT string_agg(database || ':' || (pid IS NOT NULL) || ':' || (succeeded >= 20), ',' ORDER BY database)
                 FROM webhook_ingest.worker_status WHERE role = 'fetcher'}),
	'db1:true:true,db2:true:true,db3:true:true', 'worker_status, from any database, shows every database\'s worker');

is(q1('db1', q{SELECT jobs FROM webhook_ingest.latency WHERE source = 'blog'}), '21',
	'latency counts this database\'s source only, though db2 and db3 have one of the same name');

# --- a worker an administrator terminates is restarted by the launcher at once -
# (no crash loop's back-off: issue 27)
my $w3 = q1('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker' AND datname = 'db3'});
q1('postgres', "SELECT pg_terminate_backend($w3)");
ok($node->poll_query_until('postgres',
		qq{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker' AND datname = 'db3' AND pid <> $w3}),
	'a terminated worker is restarted');
ok($node->log_contains('the worker of database "db3" was terminated, restarting it now', $log_start),
	'at once, without the back-off of a crash loop');

# --- DROP EXTENSION stops that database's worker ------------------------------
q1('db3', 'DROP EXTENSION webhook_ingest');
wait_workers('db1,db2', 'DROP EXTENSION: that database\'s worker exited');
is(q1('db1', q{SELECT count(*) FROM webhook_ingest.worker_status WHERE role = 'fetcher' AND database = 'db3'}), '0', 'and its slot is free');

# --- a plain DROP DATABASE with 50 transfers in flight -------------------------
q1('db2', q{SELECT count(*) FROM generate_series(1, 50) i, webhook_ingest.enqueue('stuck', 's-' || i) e});
$node->poll_query_until('db2', q{SELECT count(*) = 50 FROM webhook_ingest.jobs WHERE state = 'running'})
  or die 'transfers did not start';
my $t0 = time();
q1('postgres', 'DROP DATABASE db2');
my $drop_ms = (time() - $t0) * 1000;
cmp_ok($drop_ms, '<', 2000, sprintf('plain DROP DATABASE with 50 transfers in flight took %.0f ms', $drop_ms));
diag(sprintf('measured: plain DROP DATABASE with 50 transfers in flight: %.0f ms', $drop_ms));
wait_workers('db1', 'its worker is gone');

# --- ALTER DATABASE ... RENAME and CREATE DATABASE ... TEMPLATE of a database with a worker
q1('postgres', 'ALTER DATABASE db1 RENAME TO db1r');
wait_workers('db1r', 'ALTER DATABASE RENAME of a database with a worker works, and the worker comes back');
q1('postgres', 'CREATE DATABASE copy1 TEMPLATE db1r');
wait_workers('copy1,db1r', 'CREATE DATABASE TEMPLATE of a database with a worker works; both have one');

# --- templates get no worker; a database made from one gets its own -----------
q1('postgres', 'CREATE DATABASE tmpl');
install('tmpl');
wait_workers('copy1,db1r,tmpl', 'a database with the extension gets a worker');
q1('postgres', 'ALTER DATABASE tmpl IS_TEMPLATE true');
wait_workers('copy1,db1r', 'once it is a template its worker stops');
q1('postgres', 'CREATE DATABASE fromtmpl TEMPLATE tmpl');
wait_workers('copy1,db1r,fromtmpl', 'CREATE DATABASE TEMPLATE works, and the new database gets a worker');
q1('postgres', 'ALTER DATABASE tmpl IS_TEMPLATE false');
q1('postgres', 'ALTER DATABASE tmpl ALLOW_CONNECTIONS false');
sleep 1;
is(worker_dbs(), 'copy1,db1r,fromtmpl', 'a database that allows no connections gets no worker');

# --- the test-runner pattern: create, use, drop, 20 times ----------------------
my $cycle_start = -s $node->logfile;
my $max_drop = 0;
for my $i (1 .. 20)
{
	q1('postgres', 'CREATE DATABASE test_app');
	install('test_app');
	q1('test_app', q{SELECT webhook_ingest.enqueue('blog', 'x-1'); SELECT webhook_ingest.enqueue('stuck', 'x-2')});
	my $t1 = time();
	q1('postgres', 'DROP DATABASE test_app');
	my $ms = (time() - $t1) * 1000;
	$max_drop = $ms if $ms > $max_drop;
}
cmp_ok($max_drop, '<', 2000, sprintf('20 create/install/drop cycles: the slowest DROP DATABASE took %.0f ms', $max_drop));
diag(sprintf('measured: slowest of 20 plain DROP DATABASE of a test database: %.0f ms', $max_drop));
wait_workers('copy1,db1r,fromtmpl', 'no worker leaked');
is(q1('postgres', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker' AND datname IS NULL}),
	'0', 'no worker without a database');
is(q1('db1r', q{SELECT string_agg(database, ',' ORDER BY database) FROM webhook_ingest.worker_status WHERE role = 'fetcher'}),
	'copy1,db1r,fromtmpl', 'no slot leaked');
my $cycle_log = slurp_file($node->logfile, $cycle_start);
unlike($cycle_log, qr/FATAL|PANIC|ERROR/, 'and no FATAL or ERROR in the log');

# --- a restart: the workers come back ------------------------------------------
$node->restart;
wait_workers('copy1,db1r,fromtmpl', 'after a restart the workers come back');

# --- kill -9 of the launcher ---------------------------------------------------
my $lpid = q1('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'webhook_ingest launcher'});
kill 'KILL', $lpid;
ok($node->poll_query_until('postgres',
		qq{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest launcher' AND pid <> $lpid}),
	'a launcher killed with SIGKILL comes back');
wait_workers('copy1,db1r,fromtmpl', 'and so do the workers');
q1('db1r', q{SELECT webhook_ingest.enqueue('blog', 'after-kill')});
ok(wait_done('db1r', 22), 'and they work');

# --- more databases than webhook_ingest.max_databases (4) ----------------------
q1('postgres', 'CREATE DATABASE cap1');
install('cap1');
wait_workers('cap1,copy1,db1r,fromtmpl', 'a fourth database gets the last worker');
q1('postgres', 'CREATE DATABASE cap2');
install('cap2');
ok($node->poll_query_until('db1r',
		q{SELECT state = 'no worker: webhook_ingest.max_databases (4) reached' AND pid IS NULL
		    FROM webhook_ingest.worker_status WHERE role = 'fetcher' AND database = 'cap2'}),
	'a fifth: a row in worker_status says why it has no worker');
ok($node->log_contains('no worker for database "cap2": webhook_ingest.max_databases \(4\) reached', $log_start),
	'and the log says so');
q1('cap1', 'DROP EXTENSION webhook_ingest');
wait_workers('cap2,copy1,db1r,fromtmpl', 'once a worker stops, the waiting database gets one');

unlike(slurp_file($node->logfile, $log_start), qr/FATAL:  database .* does not exist/, 'never a FATAL for a missing database');
$node->stop;
done_testing();
