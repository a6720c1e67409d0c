# Audit 0.7.0 (second pass), finding T1 (test/audit/FINDINGS-0.7.0-second.md):
# every change of any source (an alter of another source, a pause, a
# resume, a weight) makes the worker read all sources again, and it parsed
# every source's tls_ca again each time, though none had changed.  A
# distribution's bundle (the README's recipe: the system's bundle plus a
# private CA, about 220 kB) takes some 20 ms to parse: with tens of such
# sources, each change of any source stalled the worker, its fetches and
# handlers, for a fraction of a second or more.
# Here: 10 sources hold the bundle (paused: they fetch nothing); 15 alters
# of another, plain http, source, each followed by a job of it.  Expected:
# the worker's CPU time over those 15 rounds stays under 1 s (before the
# fix: 15 x 10 parses, about 3 s here).  And a change of a source's tls_ca
# still counts at once: its next fetch uses the new CAs, then the old ones
# again.
use strict;
use warnings;
use Cwd qw(getcwd);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 'test/t';
use TlsUpstream;

my $bundle = '/etc/ssl/certs/ca-certificates.crt';
plan skip_all => "no $bundle" unless -r $bundle;
my $base = $ENV{WI_AUDIT116_TLS_PORT_BASE} // 18911;
my %port = TlsUpstream::ports($base);
my $tls = PostgreSQL::Test::Utils::tempdir('tls');
my $nginx_up = 0;
sub nginx { return TlsUpstream::nginx($tls, \%port, @_); }
END { nginx('stop') if $nginx_up; }
nginx('start') or BAIL_OUT('nginx did not start (test/tls/nginx.sh)');
$nginx_up = 1;
sub lit { my $s = shift; $s =~ s/'/''/g; return "'$s'"; }
my $test_ca = lit(slurp_file("$tls/ca.pem"));
my $big = lit(slurp_file($bundle) . slurp_file("$tls/ca.pem"));
my $system_only = lit(slurp_file($bundle));

my $node = PostgreSQL::Test::Cluster->new('ca_every_change');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.backoff_base = 50ms
webhook_ingest.backoff_max = 200ms
log_statement = 'none'
});
$node->start;
$node->safe_psql('postgres', q{CREATE EXTENSION webhook_ingest});
$node->safe_psql('postgres', qq{
	SELECT webhook_ingest.add_source('b' || i, 'https://127.0.0.1:$port{good}/b/{external_id}', tls_ca => $big)
	  FROM generate_series(1, 10) i;
	SELECT webhook_ingest.pause_source('b' || i) FROM generate_series(1, 10) i;
	SELECT webhook_ingest.add_source('ping', 'http://127.0.0.1:18080/posts/{external_id}');
	SELECT webhook_ingest.add_source('tls', 'https://127.0.0.1:$port{good}/posts/{external_id}', tls_ca => $test_ca);
});
$node->poll_query_until('postgres',
	q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'})
  or die 'the worker did not start';
my $pid = $node->safe_psql('postgres', q{SELECT pid FROM webhook_ingest.worker_status WHERE role = 'fetcher'});

sub job_done
{
	my ($source, $id) = @_;
	my $job = $node->safe_psql('postgres', qq{SELECT job_id FROM webhook_ingest.enqueue('$source', '$id')});
	return $node->poll_query_until('postgres', qq{SELECT state = 'done' FROM webhook_ingest.jobs WHERE id = $job});
}

# CPU time of the worker, in seconds (utime + stime).
sub cpu
{
	my @f = split ' ', (slurp_file("/proc/$pid/stat") =~ /\)\s+(.*)/)[0];
	return ($f[11] + $f[12]) / 100.0;    # fields 14 and 15, in clock ticks (100 a second on Linux)
}

ok(job_done('ping', 'p0'), 'a first job is done (the sources are read)');
my $before = cpu();
my $all = 1;
for my $i (1 .. 15)
{
	$node->safe_psql('postgres', qq{SELECT webhook_ingest.alter_source('ping', timeout_ms => 5000 + $i)});
	$all &&= job_done('ping', "p$i");
}
my $spent = cpu() - $before;
ok($all, '15 alters of a plain source, each followed by a job of it, done');
note(sprintf('worker CPU time over the 15 rounds: %.2f s', $spent));
cmp_ok($spent, '<', 1.0, 'the worker did not parse the unchanged bundles again at each change (CPU < 1 s)');

# A change of tls_ca still counts.
ok(job_done('tls', 't1'), 'a fetch trusting the test CA is done');
$node->safe_psql('postgres', qq{SELECT webhook_ingest.alter_source('tls', tls_ca => $system_only)});
my $job = $node->safe_psql('postgres', q{SELECT job_id FROM webhook_ingest.enqueue('tls', 't2')});
ok($node->poll_query_until('postgres',
		qq{SELECT last_error LIKE '%certificate%' FROM webhook_ingest.jobs WHERE id = $job}),
	'  with the system bundle alone, the next fetch does not verify');
$node->safe_psql('postgres', qq{SELECT webhook_ingest.alter_source('tls', tls_ca => $test_ca)});
ok($node->poll_query_until('postgres', qq{SELECT state = 'done' FROM webhook_ingest.jobs WHERE id = $job}),
	'  and with the test CA again, it is done');
$node->stop;
done_testing();
