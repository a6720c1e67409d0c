# A throwaway pgbouncer (Debian's package, /usr/sbin/pgbouncer) for TAP
# tests: an ini generated in the test's temp dir, listening on 127.0.0.1 on
# a free port (and its unix socket in the temp dir), trust authentication
# for the listed users, started in the foreground by the test and stopped
# by it (or at exit).  Sessions and pgbench go through it.
#
#   my $b = PgBouncer->new('bouncer', users => [...], databases => {
#       alias => "host=... port=... dbname=postgres [pool_size=1] [pool_mode=session]" },
#       settings => { default_pool_size => 2, ... });
#   $b->start;  $b->session($alias, $user);  $b->psql($alias, $sql, $user);
#   $b->admin('SHOW POOLS');  $b->pgbench($alias, $user, @args);  $b->stop;
#
# The package claims PostgreSQL::Test::Cluster as its parent only so that
# it may build a PostgreSQL::Test::BackgroundPsql (whose constructor admits
# callers from Cluster and its subclasses); it inherits nothing else.
package PgBouncer;
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::BackgroundPsql;
use PostgreSQL::Test::Utils;
use Test::More;

our @ISA = ('PostgreSQL::Test::Cluster');

our $binary = $ENV{PGBOUNCER} // '/usr/sbin/pgbouncer';
my @running;

sub new
{
	my ($class, $name, %args) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir("pgbouncer_$name");
	my $self = bless {
		name => $name,
		dir => $dir,
		port => PostgreSQL::Test::Cluster::get_free_port(),
		users => $args{users} // ['postgres'],
		databases => $args{databases},
		settings => $args{settings} // {},
	}, $class;
	return $self;
}

sub port { return $_[0]->{port} }

# The binary's version as [major, minor] (Debian 12: 1.18; Debian 13: 1.24).
sub version
{
	my ($major, $minor) = `$binary --version` =~ /PgBouncer (\d+)\.(\d+)/;
	return [ $major // 0, $minor // 0 ];
}
sub log_file { return "$_[0]->{dir}/pgbouncer.log" }
sub log_contents { return PostgreSQL::Test::Utils::slurp_file($_[0]->log_file) }

sub write_config
{
	my $self = shift;
	my $d = $self->{dir};
	my %s = (
		listen_addr => '127.0.0.1',
		listen_port => $self->{port},
		unix_socket_dir => $d,
		auth_type => 'trust',
		auth_file => "$d/userlist.txt",
		admin_users => 'postgres',
		logfile => $self->log_file,
		pidfile => "$d/pgbouncer.pid",
		pool_mode => 'transaction',
		default_pool_size => 2,
		max_client_conn => 200,
		ignore_startup_parameters => 'extra_float_digits',
		%{ $self->{settings} });
	open my $u, '>', "$d/userlist.txt" or die $!;
	print $u qq{"$_" ""\n} for @{ $self->{users} };
	close $u;
	open my $f, '>', "$d/pgbouncer.ini" or die $!;
	print $f "[databases]\n";
	print $f "$_ = $self->{databases}{$_}\n" for sort keys %{ $self->{databases} };
	print $f "\n[pgbouncer]\n";
	print $f "$_ = $s{$_}\n" for sort keys %s;
	close $f;
	return "$d/pgbouncer.ini";
}

sub start
{
	my $self = shift;
	die "$binary is missing: test/lib.sh (WI_PACKAGES) installs Debian's pgbouncer\n" unless -x $binary;
	my $ini = $self->write_config;
	my ($out, $err) = ('', '');
	$self->{run} = IPC::Run::start([ $binary, $ini ], '<', \undef, '>', \$out, '2>', \$err);
	push @running, $self;
	for (1 .. 100)
	{
		my ($rc) = $self->psql_raw('pgbouncer', 'SHOW VERSION', 'postgres');
		return $self if $rc == 0;
		die "pgbouncer exited: $err" unless $self->{run}->pumpable;
		select(undef, undef, undef, 0.1);
	}
	die "pgbouncer did not answer on 127.0.0.1:$self->{port}: $err";
}

sub stop
{
	my $self = shift;
	return unless $self->{run};
	# SIGTERM: an immediate shutdown (SIGINT would wait for every client,
	# and a test that died leaves its sessions open).
	$self->{run}->kill_kill(grace => 5);
	delete $self->{run};
	@running = grep { $_ != $self } @running;
}

# local $?: finish() would overwrite the exit status of a test that died.
END { local $?; $_->stop for @running; }

sub connect_args
{
	my ($self, $db, $user) = @_;
	return ('-X', '-h', '127.0.0.1', '-p', $self->{port}, '-U', $user // 'postgres', '-d', $db);
}

# psql_raw(db, sql, user): (exit code, stdout, stderr) of one psql -c run.
sub psql_raw
{
	my ($self, $db, $sql, $user) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'psql', $self->connect_args($db, $user), '-Atq', '-v', 'ON_ERROR_STOP=1', '-c', $sql ],
		'<', \undef, '>', \$out, '2>', \$err);
	chomp $out;
	return ($? >> 8, $out, $err);
}

# psql(db, sql, user): its output; dies on an error.
sub psql
{
	my ($self, $db, $sql, $user) = @_;
	my ($rc, $out, $err) = $self->psql_raw($db, $sql, $user);
	die "psql through pgbouncer ($db) failed: $sql\n$err" if $rc != 0;
	return $out;
}

# The admin console (SHOW POOLS, SHOW SERVERS, ...): rows as hashes.
sub admin
{
	my ($self, $cmd) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'psql', $self->connect_args('pgbouncer', 'postgres'), '-A', '-F', "\t", '-P', 'footer=off', '-c', $cmd ],
		'<', \undef, '>', \$out, '2>', \$err) or die "pgbouncer admin $cmd: $err";
	my ($head, @lines) = split /\n/, $out;
	my @cols = split /\t/, $head;
	return map { my @v = split /\t/, $_, -1; my %r; @r{@cols} = @v; \%r } @lines;
}

# A persistent psql session through pgbouncer (PostgreSQL::Test::BackgroundPsql).
sub session
{
	my ($self, $db, $user, %params) = @_;
	my @p = ('psql', $self->connect_args($db, $user), '-Atq', '-f', '-');
	push @p, '-v', 'ON_ERROR_STOP=1' if $params{on_error_stop};
	return PostgreSQL::Test::BackgroundPsql->new(0, \@p, $params{timeout}, 1);
}

# pgbench through pgbouncer: (exit code, stdout, stderr).
sub pgbench
{
	my ($self, $db, $user, @args) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'pgbench', '-h', '127.0.0.1', '-p', $self->{port}, '-U', $user, @args, $db ],
		'<', \undef, '>', \$out, '2>', \$err);
	return ($? >> 8, $out, $err);
}

1;
