# A pg_auto_failover formation for TAP tests, from Debian's packages
# (pg_autoctl, the pgautofailover extension): a monitor and data nodes on
# 127.0.0.1, each on a free port, --auth trust --no-ssl, pg_ctl from
# $PG_CONFIG's bindir, every `pg_autoctl run` in the background in a session
# of its own (so one node can be killed whole).  The first data node's
# postgresql.conf gets the test's settings appended after pg_auto_failover's
# include (later lines win: webhook_ingest preloaded, small memory); the
# secondaries are pg_basebackup copies of it, so they get the same.  The
# monitor is tuned to notice a dead primary in a few seconds.  A data node
# is a PostgreSQL::Test::Cluster (psql, poll_query_until, background_psql)
# over TCP; pg_autoctl, not the Cluster, starts and stops its server.
#
# Also what the failover scripts share: the queue under test (a source whose
# upstream is test/upstream.py, a counting handler), the senders
# (test/ha/sender.py) and the checks after a run.
#
#   my $f = AutoFailover->new;
#   my ($n1, $n2) = ($f->add_node('node1'), $f->add_node('node2'));
#   $f->wait_states(node1 => 'primary', node2 => 'secondary');
#   $f->primary; $f->secondary; $f->conninfo;  $f->perform_failover;
#   $f->kill9($node); $f->restart($node); $f->autoctl('set', 'formation', ...)
package AutoFailover;
use strict;
use warnings;
use FindBin;
use HTTP::Tiny;
use IPC::Run;
use JSON::PP;
use POSIX ();
use Time::Local qw(timegm);
use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# pg_auto_failover for this server's major (postgresql-NN-auto-failover, pg-auto-failover-cli): without
# it every script that uses this module is skipped (make test-majors runs majors Debian 12 has none for).
{
	my $pg_config = $ENV{PG_CONFIG} // 'pg_config';
	chomp(my $share = `$pg_config --sharedir`);
	plan skip_all => "pg_auto_failover is not installed for this server ($share)"
	  unless -f "$share/extension/pgautofailover.control";
	plan skip_all => 'no pg_autoctl in PATH' unless grep { -x "$_/pg_autoctl" } split /:/, $ENV{PATH} // '';
}

my @formations;

# Data nodes: after pg_auto_failover's include, so these win.
our $node_settings = q{
# webhook_ingest's failover tests (test/t/AutoFailover.pm)
shared_preload_libraries = 'pg_stat_statements,webhook_ingest'
shared_buffers = '64MB'
work_mem = '4MB'
maintenance_work_mem = '64MB'
effective_cache_size = '1GB'
wal_keep_size = '256MB'
# a process crash, not a machine's: what the kernel has survives
fsync = off
webhook_ingest.poll_interval = 50ms
webhook_ingest.backoff_base = 50ms
webhook_ingest.backoff_max = 200ms
webhook_ingest.database = 'postgres'
};

# The monitor: a primary that stops answering is failed over in seconds.
our $monitor_settings = q{
shared_buffers = '32MB'
fsync = off
pgautofailover.health_check_period = 1000
pgautofailover.health_check_timeout = 1000
pgautofailover.health_check_max_retries = 1
pgautofailover.health_check_retry_delay = 500
pgautofailover.node_considered_unhealthy_timeout = 3000
pgautofailover.primary_demote_timeout = 5000
};

# A monitor, node1 the primary with the queue under test (an upstream answering after DELAY_MS) and
# node2 its synchronous secondary; checked: the secondary preloads webhook_ingest too, replication is
# synchronous, only the primary runs a worker.  (the formation, node1, node2)
sub start_pair
{
	my ($class, $delay_ms) = @_;
	my $f = $class->new;
	my $n1 = $f->add_node('node1');
	$f->wait_states(node1 => 'single') or BAIL_OUT('node1 did not start');
	$f->create_queue($n1, $delay_ms);
	my $n2 = $f->add_node('node2');
	$f->wait_states(node1 => 'primary', node2 => 'secondary') or BAIL_OUT('no secondary');

	is($n2->safe_psql('postgres', 'SHOW shared_preload_libraries') =~ /webhook_ingest/ ? 1 : 0, 1,
		'the secondary (a copy of the primary) preloads webhook_ingest too');
	like($n1->safe_psql('postgres', q{SELECT current_setting('synchronous_standby_names') || ' / ' || current_setting('synchronous_commit')}),
		qr/^ANY 1 \(pgautofailover_standby_\d+\) \/ on$/, 'synchronous replication: ' .
		$n1->safe_psql('postgres', q{SELECT current_setting('synchronous_standby_names') || ', synchronous_commit = ' || current_setting('synchronous_commit')}));
	$n1->poll_query_until('postgres', q{SELECT state = 'running' FROM webhook_ingest.worker_status WHERE role = 'fetcher'})
	  or die 'no worker on the primary';
	is(AutoFailover::workers_on($n1), '1/1', 'the primary runs a worker (pg_stat_activity / worker_status)');
	is(AutoFailover::workers_on($n2), '0/0', 'the secondary runs none');
	return ($f, $n1, $n2);
}

sub bindir
{
	my $pg_config = $ENV{PG_CONFIG} // 'pg_config';
	my $dir = `$pg_config --bindir`;
	chomp $dir;
	return $dir;
}

sub new
{
	my ($class, %args) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir('autofailover');
	# pg_autoctl keeps its configuration and state files there
	$ENV{XDG_CONFIG_HOME} = "$dir/config";
	$ENV{XDG_DATA_HOME} = "$dir/share";
	my $self = bless {
		dir => $dir,
		pgctl => bindir() . '/pg_ctl',
		# pg_autoctl reaches the monitor's server through PGHOST, which
		# PostgreSQL::Test::Cluster set to its socket directory
		sockets => $ENV{PGHOST} // PostgreSQL::Test::Utils::tempdir_short(),
		nodes => [],
		settings => $args{settings} // '',
	}, $class;
	push @formations, $self;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $mon = { name => 'monitor', port => $port, pgdata => "$dir/monitor" };
	$self->{monitor} = $mon;
	# initdb'd here, so that its socket is where PGHOST says before
	# pg_autoctl first starts it
	PostgreSQL::Test::Utils::system_or_bail('initdb', '-D', $mon->{pgdata}, '--auth=trust', '-U', 'postgres', '-N');
	append_to_file("$mon->{pgdata}/postgresql.conf", "unix_socket_directories = '$self->{sockets}'\n");
	$self->autoctl_ok('create', 'monitor', '--pgdata', $mon->{pgdata}, '--pgport', $port,
		'--hostname', '127.0.0.1', '--auth', 'trust', '--no-ssl', '--pgctl', $self->{pgctl});
	append_to_file("$mon->{pgdata}/postgresql.conf", $monitor_settings);
	$self->spawn($mon);
	$self->poll_until(sub { $self->monitor_sql('SELECT 1') eq '1' }, 60)
	  or die 'the monitor did not start: ' . slurp_file("$dir/monitor.log");
	return $self;
}

sub monitor_uri
{
	my ($self) = @_;
	return "postgres://autoctl_node\@127.0.0.1:$self->{monitor}{port}/pg_auto_failover?sslmode=disable";
}

# pg_autoctl ARGS, output logged to the test's log; its output and exit status.
sub autoctl
{
	my ($self, @args) = @_;
	my $out = '';
	my $ok = IPC::Run::run([ 'pg_autoctl', @args ], '>', \$out, '2>&1', IPC::Run::timeout(180));
	note("pg_autoctl @args:\n$out") if $ENV{WI_TAP_VERBOSE};
	return ($ok ? 0 : ($? >> 8 || 1), $out);
}

sub autoctl_ok
{
	my ($self, @args) = @_;
	my ($rc, $out) = $self->autoctl(@args);
	die "pg_autoctl @args failed ($rc):\n$out" if $rc;
	return $out;
}

sub monitor_sql
{
	my ($self, $sql) = @_;
	my $out = '';
	IPC::Run::run([ 'psql', '-XAtq', '-h', '127.0.0.1', '-p', $self->{monitor}{port}, '-d', 'pg_auto_failover',
		'-c', $sql ], '>', \$out, '2>', \my $err, IPC::Run::timeout(30));
	chomp $out;
	return $out;
}

sub poll_until
{
	my ($self, $cond, $secs) = @_;
	my $until = time() + $secs;
	while (time() < $until)
	{
		return 1 if $cond->();
		usleep(100_000);
	}
	return 0;
}

# `pg_autoctl run` for a node (or the monitor), in a session of its own.
sub spawn
{
	my ($self, $n) = @_;
	my $log = "$self->{dir}/$n->{name}.log";
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		POSIX::setsid();
		open STDOUT, '>>', $log or die $!;
		open STDERR, '>&', \*STDOUT or die $!;
		exec('pg_autoctl', 'run', '--pgdata', $n->{pgdata}) or POSIX::_exit(127);
	}
	$n->{session} = $pid;
	$n->{sid} = $pid;
}

# Every process of a node's session (pg_autoctl and the postgres it started).
sub session_pids
{
	my ($sid) = @_;
	my @pids;
	for my $stat (glob '/proc/[0-9]*/stat')
	{
		open my $fh, '<', $stat or next;
		my $line = <$fh> // '';
		close $fh;
		# pid (comm) state ppid pgrp session ...
		push @pids, $1 if $line =~ /^(\d+) \(.*\) \S+ \d+ \d+ (\d+) / && $2 == $sid;
	}
	return @pids;
}

sub comm_of
{
	my ($pid) = @_;
	open my $fh, '<', "/proc/$pid/cmdline" or return '';
	my $c = <$fh> // '';
	close $fh;
	return $c;
}

# A process that is there and no zombie.
sub alive
{
	my ($pid) = @_;
	open my $fh, '<', "/proc/$pid/stat" or return 0;
	my $line = <$fh> // '';
	close $fh;
	return $line !~ /^\d+ \(.*\) Z /;
}

sub reap
{
	my ($n) = @_;
	return 1 unless $n->{session};
	if (waitpid($n->{session}, POSIX::WNOHANG()) != 0)
	{
		delete $n->{session};
		return 1;
	}
	return 0;
}

sub postmaster_pid
{
	my ($pgdata) = @_;
	open my $fh, '<', "$pgdata/postmaster.pid" or return undef;
	my $pid = <$fh>;
	close $fh;
	chomp $pid if defined $pid;
	return $pid;
}

# A data node: pg_autoctl create postgres, then run.  The first one gets
# the settings appended; the others are copies of it.
sub add_node
{
	my ($self, $name, @extra) = @_;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $node = PostgreSQL::Test::Cluster->new($name, port => $port);
	$node->{_host} = '127.0.0.1';
	my $n = { name => $name, port => $port, pgdata => $node->data_dir, node => $node };
	$self->autoctl_ok('create', 'postgres', '--pgdata', $n->{pgdata}, '--pgport', $port,
		'--pghost', '127.0.0.1', '--listen', '127.0.0.1', '--hostname', '127.0.0.1', '--name', $name,
		'--auth', 'trust', '--no-ssl', '--pgctl', $self->{pgctl}, '--monitor', $self->monitor_uri, @extra);
	if (!@{ $self->{nodes} })
	{
		append_to_file("$n->{pgdata}/postgresql.conf",
			$node_settings . "unix_socket_directories = '$self->{sockets}'\n" . $self->{settings});
	}
	push @{ $self->{nodes} }, $n;
	$self->spawn($n);
	return $node;
}

sub entry_of
{
	my ($self, $node) = @_;
	my ($n) = grep { $_->{node} == $node || $_->{name} eq $node } @{ $self->{nodes} };
	die "no node $node" unless $n;
	return $n;
}

# The monitor's view: name => [reported state, assigned state].
sub states
{
	my ($self) = @_;
	my ($rc, $out) = $self->autoctl('show', 'state', '--pgdata', $self->{monitor}{pgdata}, '--json');
	return {} if $rc;
	my $list = eval { decode_json($out) } // [];
	return { map { ($_->{nodename} => [ $_->{current_group_state}, $_->{assigned_group_state} ]) } @$list };
}

sub state_line
{
	my ($self) = @_;
	my $s = $self->states;
	return join(', ', map { "$_ $s->{$_}[0]/$s->{$_}[1]" } sort keys %$s);
}

# Until every named node reports (and is assigned) the state given; a list
# of states means any of them.
sub wait_states
{
	my ($self, %want) = @_;
	my $secs = delete $want{timeout} // 120;
	my $ok = $self->poll_until(sub {
		my $s = $self->states;
		for my $name (keys %want)
		{
			my @any = ref $want{$name} ? @{ $want{$name} } : ($want{$name});
			return 0 unless $s->{$name} && $s->{$name}[0] eq $s->{$name}[1]
			  && grep { $_ eq $s->{$name}[0] } @any;
		}
		# and its server answers (the state comes before that at first)
		for my $name (keys %want)
		{
			my $out = '';
			IPC::Run::run([ 'psql', '-XAtq', '-h', '127.0.0.1', '-p', $self->entry_of($name)->{port},
				'-d', 'postgres', '-c', 'SELECT 1' ], '>', \$out, '2>', \my $err, IPC::Run::timeout(10));
			return 0 unless $out =~ /^1/;
		}
		return 1;
	}, $secs);
	unless ($ok)
	{
		diag('pg_auto_failover states: ' . $self->state_line);
		for my $name (sort keys %want)
		{
			my @lines = split /\n/, slurp_file("$self->{dir}/$name.log");
			diag("${name}'s pg_autoctl, last lines:\n" . join("\n", @lines[ ($#lines > 25 ? $#lines - 25 : 0) .. $#lines ]));
		}
	}
	return $ok;
}

sub node_in_state
{
	my ($self, @states) = @_;
	my $s = $self->states;
	for my $n (@{ $self->{nodes} })
	{
		return $n->{node} if $s->{ $n->{name} } && grep { $_ eq $s->{ $n->{name} }[0] } @states;
	}
	return undef;
}
sub primary { return $_[0]->node_in_state('primary', 'wait_primary', 'single') }
sub secondary { return $_[0]->node_in_state('secondary') }

# A multi-host connection string over every data node: libpq tries them in
# turn and keeps the one that accepts writes.
sub conninfo
{
	my ($self) = @_;
	my @n = @{ $self->{nodes} };
	return sprintf('host=%s port=%s dbname=postgres user=postgres target_session_attrs=read-write connect_timeout=2',
		join(',', map { '127.0.0.1' } @n), join(',', map { $_->{port} } @n));
}

sub perform_failover
{
	my ($self) = @_;
	my $t0 = time();
	my ($rc, $out) = $self->autoctl('perform', 'failover', '--pgdata', $self->{monitor}{pgdata});
	return ($rc, time() - $t0, $out);
}

# The machine is gone: SIGKILL to the node's pg_autoctl processes (so none
# restarts its server), then to its postmaster (its backends see it die).
sub kill9
{
	my ($self, $node) = @_;
	my $n = $self->entry_of($node);
	my $pm = postmaster_pid($n->{pgdata});
	my @autoctl = grep { comm_of($_) =~ /^pg_autoctl/ } session_pids($n->{session});
	kill 'KILL', @autoctl;
	kill 'KILL', $pm if $pm;
	$self->poll_until(sub { reap($n) && !($pm && alive($pm)) }, 10);
	return $pm;
}

# pg_autoctl run again: the node rejoins (an old primary is rewound, or
# copied again, and follows the new one).
sub restart
{
	my ($self, $node) = @_;
	my $n = $self->entry_of($node);
	my $pm = postmaster_pid($n->{pgdata});
	# its old backends go once they notice their postmaster is gone
	$self->poll_until(sub { !alive($pm) && !grep { alive($_) && comm_of($_) =~ /postgres/ } session_pids($n->{sid}) }, 30)
	  if $pm;
	$self->spawn($n);
}

# The server's own log (logging_collector on: PGDATA/log, one file per start).
sub server_log
{
	my ($self, $node) = @_;
	my $n = $self->entry_of($node);
	return join('', map { slurp_file($_) } sort glob("$n->{pgdata}/log/*.log"));
}

# When this node's last promotion finished ("database system is ready to
# accept connections" after "received promote request"), epoch seconds.
sub promoted_at
{
	my ($self, $node) = @_;
	my $log = $self->server_log($node);
	my $at;
	while ($log =~ /received promote request.*?\n(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(\.\d+) UTC \[\d+\] LOG:  database system is ready to accept connections/sg)
	{
		$at = timegm($6, $5, $4, $3, $2 - 1, $1) + $7;
	}
	return $at;
}

sub stop_all
{
	my ($self) = @_;
	for my $n (reverse(@{ $self->{nodes} }), $self->{monitor})
	{
		next unless $n && $n->{session};
		kill 'TERM', $n->{session};
	}
	for my $n (reverse(@{ $self->{nodes} }), $self->{monitor})
	{
		next unless $n && $n->{session};
		my $sid = $n->{session};
		next if $self->poll_until(sub { reap($n) && !session_pids($sid) }, 30);
		kill 'KILL', session_pids($sid);
		reap($n);
	}
	# a server left behind by a killed pg_autoctl
	for my $n (@{ $self->{nodes} }, $self->{monitor})
	{
		my $pm = $n && postmaster_pid($n->{pgdata});
		kill 'KILL', $pm if $pm && kill(0, $pm) && comm_of($pm) =~ /postgres/;
	}
	@formations = grep { $_ != $self } @formations;
}

END
{
	my $rc = $?;
	$_->stop_all for @formations;
	$? = $rc;
}

# ---- the queue under test ----

# The extension on the primary, a source whose upstream answers in
# $delay_ms, and a handler that counts its calls per object.
sub create_queue
{
	my ($self, $primary, $delay_ms) = @_;
	$primary->safe_psql('postgres', qq{
		CREATE EXTENSION webhook_ingest;
		CREATE TABLE effects (external_id text PRIMARY KEY, n int NOT NULL);
		CREATE FUNCTION count_effect(external_id text, details jsonb, payload jsonb) RETURNS void
		LANGUAGE sql AS \$\$
			INSERT INTO effects VALUES (external_id, 1)
			ON CONFLICT (external_id) DO UPDATE SET n = effects.n + 1
		\$\$;
		SELECT webhook_ingest.add_source('ha', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=$delay_ms',
		                                 'count_effect(text,jsonb,jsonb)');
	});
}

sub upstream_fetches
{
	my $r = HTTP::Tiny->new(timeout => 5)->get('http://127.0.0.1:18080/stats');
	die "upstream /stats: $r->{status}" unless $r->{success};
	return decode_json($r->{content})->{posts} // 0;
}

# $n senders over $objects objects (sender i: objects i, i+n, ...), $rate
# webhooks a second in all; each gives up after $deadline s.
sub start_senders
{
	my ($self, $n, $objects, $rate, $deadline) = @_;
	my @s;
	for my $i (0 .. $n - 1)
	{
		my $out = "$self->{dir}/sender$i.out";
		my $h = IPC::Run::start([ 'python3', "$FindBin::Bin/../ha/sender.py", $self->conninfo, 'ha',
			$i + 1, $objects + 1, $n, $rate / $n, $deadline ], '>', $out, '2>', "$out.err");
		push @s, { h => $h, out => $out };
	}
	return \@s;
}

sub accepted_so_far
{
	my ($senders) = @_;
	my $n = 0;
	for my $s (@$senders)
	{
		open my $fh, '<', $s->{out} or next;
		$n += grep { /"outcome": "/ } <$fh>;
		close $fh;
	}
	return $n;
}

# Wait for the senders; every delivery record.
sub finish_senders
{
	my ($senders) = @_;
	my @recs;
	for my $s (@$senders)
	{
		$s->{h}->finish;
		my $err = -s "$s->{out}.err" ? slurp_file("$s->{out}.err") : '';
		diag("sender: $err") if $err;
		push @recs, map { decode_json($_) } grep { /\S/ } split /\n/, slurp_file($s->{out});
	}
	return \@recs;
}

# After a run: wait until the new primary has nothing pending or running,
# then check every accepted webhook was handled exactly once.  Returns the
# counts.
sub check_run
{
	my ($self, $primary, $recs, $fetches_before, $what) = @_;
	my @accepted = grep { defined $_->{outcome} } @$recs;
	my $objects = scalar(@$recs);
	is(scalar(@accepted), $objects, "$what: every sender's enqueue returned in the end ($objects objects)");
	my $quiet = $primary->poll_query_until('postgres', q{
		SELECT count(*) = 0 FROM webhook_ingest.jobs WHERE source = 'ha' AND state IN ('pending', 'running')});
	ok($quiet, "$what: nothing left pending or running on the new primary");
	diag($primary->safe_psql('postgres', q{SELECT state, count(*), max(last_error) FROM webhook_ingest.jobs
		WHERE source = 'ha' GROUP BY 1})) unless $quiet;
	my $ids = join(',', map { "'$_->{obj}'" } @accepted);
	my ($handled, $lost, $twice, $jobs, $dead) = split /\|/, $primary->safe_psql('postgres', qq{
		SELECT (SELECT count(*) FROM effects e WHERE e.external_id IN ($ids)),
		       (SELECT count(*) FROM unnest(ARRAY[$ids]::text[]) a(id)
		         WHERE NOT EXISTS (SELECT 1 FROM effects e WHERE e.external_id = a.id)),
		       (SELECT count(*) FROM effects WHERE n <> 1),
		       (SELECT count(*) FROM webhook_ingest.jobs WHERE source = 'ha' AND state = 'done'),
		       (SELECT count(*) FROM webhook_ingest.jobs WHERE source = 'ha' AND state <> 'done')});
	my $fetched = upstream_fetches() - $fetches_before;
	my $again = $fetched - $handled;
	my @unknown = grep { $_->{unknown} > 0 } @accepted;
	my %after_unknown;
	$after_unknown{ $_->{outcome} }++ for @unknown;
	my %outcomes;
	$outcomes{ $_->{outcome} }++ for @accepted;
	my $retried = grep { $_->{attempts} > 1 || @{ $_->{errors} } } @accepted;
	my @unknown0 = grep { $_->{unknown} > 0 } @accepted;
	my %after0;
	$after0{ $_->{outcome} }++ for @unknown0;
	my $retried0 = grep { @{ $_->{errors} } } @accepted;
	is($lost, 0, "$what: lost = 0 (accepted $objects, handled $handled, fetched again $again; "
		  . "$retried0 sent again after an error, " . scalar(@unknown0) . ' after an attempt of unknown outcome: '
		  . (join(', ', map { "$_ $after0{$_}" } sort keys %after0) || 'none') . ')');
	is($handled, scalar(@accepted), "$what: every accepted webhook was handled on the new primary ($handled)");
	is($twice, 0, "$what: the handler's effect is exactly once per object (count = 1 for all $handled)");
	is("$jobs/$dead", scalar(@accepted) . '/0', "$what: one done job per object, none dead or cancelled");
	# One webhook per object: its enqueue queues a job, or (sent again after an
	# attempt whose commit did happen) finds the event already there.
	my @odd = grep { !($_->{outcome} eq 'queued' || ($_->{outcome} eq 'duplicate' && $_->{unknown} > 0)) } @accepted;
	is(scalar(@odd), 0, "$what: each enqueue that returned said queued, or duplicate after an attempt of unknown outcome ("
		  . join(', ', map { "$_ $outcomes{$_}" } sort keys %outcomes) . ')');
	diag(encode_json($_)) for @odd[0 .. ($#odd < 4 ? $#odd : 4)];
	diag(sprintf('%s: accepted %d, handled %d, fetched again %d, lost %d; %d deliveries retried after an error, '
		  . '%d after an unknown outcome (%s)', $what, scalar(@accepted), $handled, $again, $lost, $retried,
		scalar(@unknown), join(', ', map { "$_ $after_unknown{$_}" } sort keys %after_unknown) || 'none'));
	return { accepted => scalar(@accepted), handled => $handled, again => $again, lost => $lost,
		retried => $retried, unknown => scalar(@unknown), after_unknown => \%after_unknown };
}

# Workers on a node: pg_stat_activity's and worker_status's.
sub workers_on
{
	my ($node) = @_;
	return $node->safe_psql('postgres', q{
		SELECT (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker') || '/'
		       || (SELECT count(*) FROM webhook_ingest.worker_status WHERE role = 'fetcher' AND pid IS NOT NULL)});
}

# Promotion to the new worker's first claim on $node, in ms: its log's
# promotion line, the earliest started_at after it.
sub promotion_to_first_claim
{
	my ($self, $node) = @_;
	my $promoted = $self->promoted_at($node);
	return (undef, undef) unless $promoted;
	my $first = $node->safe_psql('postgres', qq{
		SELECT extract(epoch FROM min(started_at)) FROM webhook_ingest.jobs
		 WHERE source = 'ha' AND started_at >= to_timestamp($promoted)});
	my $worker = $node->safe_psql('postgres', q{SELECT extract(epoch FROM started_at) FROM webhook_ingest.worker_status WHERE role = 'fetcher'});
	# pg_auto_failover keeps a promoted server read-only until it knows the old primary stopped
	my $writable;
	my $log = $self->server_log($node);
	while ($log =~ /(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(\.\d+) UTC \[\d+\] LOG:  parameter "default_transaction_read_only" changed to "off"/g)
	{
		my $at = timegm($6, $5, $4, $3, $2 - 1, $1) + $7;
		$writable = $at if $at >= $promoted && !defined $writable;
	}
	return (($first - $promoted) * 1000, ($worker - $promoted) * 1000,
		defined $writable ? ($writable - $promoted) * 1000 : 0);
}

1;
