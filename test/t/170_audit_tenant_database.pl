# Audit 0.10.0, third pass (test/audit/FINDINGS-0.10.0-third.md): what one
# database (its owner, its traffic) can do to the cluster's others.
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
max_worker_processes = 16
});
$node->start;

sub q1 { my ($db, $sql) = @_; return $node->safe_psql($db, $sql); }

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

# and CREATE EXTENSION still gets the database its worker within a second or so
q1('own1', 'CREATE EXTENSION webhook_ingest');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
	WHERE backend_type = 'webhook_ingest worker' AND datname = 'own1'}),
	'CREATE EXTENSION in own1 then starts its worker');
q1('postgres', q{ALTER SYSTEM RESET log_min_messages; SELECT pg_reload_conf()});

$node->stop;
done_testing();
