# Audit 15: a fetch can take its URL from one version of its source and its
# client certificate (and tls_ca, proxy) from another.  claim_pass renders the
# URL from the claim's own row of sources, while the TLS settings come from
# read_sources, which reads again only when the worker has seen an
# invalidation (wi_sources_generation): a change committed after the worker
# last processed invalidations, but before the claim's snapshot, gives the
# new url_template with the old certificate, and the other way round.
# Here one source flips between S1 (https://127.0.0.1:P/posts/s1-..., with the
# client certificate) and S2 (https://127.0.0.1:P/posts/s2-..., none; the same
# host, as when a source moves to another API path or account),
# each flip one alter_source call, while 30 000 jobs are fetched; the mTLS
# listener answers 200 with a certificate and 400 without.
# Expected: no request for s2-... presents the certificate (200) and none for
# s1-... lacks it (400).  On the audited code hundreds do (299 and 888 in two runs).
use strict;
use warnings;
use Cwd qw(getcwd);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 'test/t';
use TlsUpstream;

my $top = getcwd();
my $base = $ENV{WI_AUDIT15_TLS_PORT_BASE4} // 18511;
my %port = TlsUpstream::ports($base);
my $tls = PostgreSQL::Test::Utils::tempdir('tls');
my $nginx_up = 0;
sub nginx { return TlsUpstream::nginx($tls, \%port, @_); }
my $flipper;
END
{
	kill 'TERM', $flipper if $flipper;
	nginx('stop') if $nginx_up;
}
nginx('start') or BAIL_OUT('nginx did not start (test/tls/nginx.sh)');
$nginx_up = 1;
my %pem = map { my $s = slurp_file("$tls/$_"); $s =~ s/'/''/g; $_ => "'$s'" } qw(ca.pem client.pem client.key);

my $node = PostgreSQL::Test::Cluster->new('out_of_step');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
});
$node->start;
my $s1 = "https://127.0.0.1:$port{mtls}/posts/s1-{external_id}";
my $s2 = "https://127.0.0.1:$port{mtls}/posts/s2-{external_id}";
$node->safe_psql('postgres', qq{
	CREATE EXTENSION webhook_ingest;
	SELECT webhook_ingest.add_source('flip', '$s1', tls_ca => $pem{'ca.pem'}, max_attempts => 1,
	                                 tls_client_cert => $pem{'client.pem'}, tls_client_key => $pem{'client.key'});
});
$node->poll_query_until('postgres',
	q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'})
  or die 'the worker did not start';
# Flip S1 <-> S2 while the jobs are enqueued and fetched.
my $script = "$tls/flip.sql";
open my $fh, '>', $script or die $!;
print $fh qq{SELECT webhook_ingest.alter_source('flip', url_template => '$s2', reset_tls_client => true);
SELECT pg_sleep(0.01);
SELECT webhook_ingest.alter_source('flip', url_template => '$s1', tls_client_cert => $pem{'client.pem'}, tls_client_key => $pem{'client.key'});
SELECT pg_sleep(0.01);
};
close $fh;
$flipper = fork();
if ($flipper == 0)
{
	open STDOUT, '>', "$tls/pgbench.log"; open STDERR, '>&', \*STDOUT;
	exec('pgbench', '-n', '-f', $script, '-T', '30', '-c', '1', '-h', $node->host, '-p', $node->port, 'postgres')
	  or die "exec pgbench: $!";
}
$node->poll_query_until('postgres', q{SELECT url_template LIKE '%/s2-%' FROM webhook_ingest.sources}, 't')
  or die 'the flips did not start';
for my $chunk (0 .. 9)
{
	$node->safe_psql('postgres', qq{SELECT count(*) FROM generate_series(1, 3000) i,
		webhook_ingest.enqueue('flip', 'j$chunk-' || i)});
}
$node->poll_query_until('postgres', q{SELECT count(*) = 30000 FROM webhook_ingest.jobs WHERE state IN ('done', 'dead')})
  or die 'jobs did not finish';
kill 'TERM', $flipper;
waitpid($flipper, 0);
$flipper = undef;

my %n = map { $_ => 0 } qw(s1_200 s1_400 s2_200 s2_400);
open $fh, '<', "$tls/access.log" or die "access.log: $!";
while (<$fh>)
{
	my @f = split ' ';
	$n{"$1_$f[5]"}++ if $f[6] =~ m{^/posts/(s[12])-};
}
close $fh;
note(join ', ', map { "$_: $n{$_}" } sort keys %n);
cmp_ok(($n{s1_200} + $n{s1_400}) * ($n{s2_200} + $n{s2_400}), '>', 0, 'requests of both versions were made');
# (on the audited code one direction or the other shows, hundreds at a time: a claim's worth)
is($n{s2_200} + $n{s1_400}, 0,
	"no request for S2's URL presented S1's client certificate, none for S1's went without it");
$node->stop;
done_testing();
