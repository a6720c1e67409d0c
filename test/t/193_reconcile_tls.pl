# Reconciliation over TLS (issue 30: the worker pages the sender's list
# endpoint within the source's TLS settings): the test upstream's Stripe
# lists (test/upstream_lists.py on 127.0.0.1:18080) behind an nginx that
# terminates TLS with the throwaway PKI of test/tls/make_certs.sh (port
# 18461, WI_RECONCILE_TLS_PORT overrides) and proxies to it; the GitHub and
# Shopify shapes write their next page's Link as http://, so the Stripe
# shape (next_url with the cursor) is the one that stays on the https origin:
#  1. a source with tls_ca => the test CA: its sweeps page the list over
#     TLS (nginx logs each page), find the 12 changes since the last (the one
#     no webhook announced fetched as a job with events 0) and complete;
#  2. a source with tls_ca => another CA: the first page fails with the
#     certificate error in recent_failures (no job id, the page's URL,
#     retried), the list server is never reached, the sweep stays at page 1
#     and retries it (nothing skipped); with the right CA the same sweep
#     completes and lists every object.
use strict;
use warnings;
use Cwd qw(getcwd);
use PostgreSQL::Test::Utils;
use Test::More;
use lib 'test/t';
use ReconcileWorld;

my $top = getcwd();
my $port = $ENV{WI_RECONCILE_TLS_PORT} // 18461;
my $dir = PostgreSQL::Test::Utils::tempdir('reconcile_tls');
system("$top/test/tls/make_certs.sh", $dir) == 0 or die 'test/tls/make_certs.sh failed';
mkdir "$dir/tmp";
open my $conf, '>', "$dir/nginx.conf" or die $!;
print $conf <<CONF;
daemon on;
master_process on;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 256; }
http {
	client_body_temp_path $dir/tmp/client_body;
	proxy_temp_path $dir/tmp/proxy;
	fastcgi_temp_path $dir/tmp/fastcgi;
	uwsgi_temp_path $dir/tmp/uwsgi;
	scgi_temp_path $dir/tmp/scgi;
	log_format wi '\$ssl_protocol \$status \$request_uri';
	access_log $dir/access.log wi;
	server {
		listen 127.0.0.1:$port ssl;
		ssl_certificate $dir/server.pem;
		ssl_certificate_key $dir/server.key;
		location / {
			proxy_pass http://127.0.0.1:18080;
			proxy_set_header Host \$host:\$server_port;
		}
	}
}
CONF
close $conf;
my $nginx = $ENV{NGINX} // (-x '/usr/sbin/nginx' ? '/usr/sbin/nginx' : 'nginx');
system($nginx, '-p', $dir, '-c', "$dir/nginx.conf", '-e', "$dir/error.log") == 0
  or die 'nginx did not start: ' . slurp_file("$dir/error.log");
END
{
	if (open my $fh, '<', "$dir/nginx.pid") { my $pid = <$fh>; chomp $pid; kill 'QUIT', $pid if $pid; }
}

my $node = ReconcileWorld::start_node('reconcile_tls', q{
webhook_ingest.backoff_base = 50ms
webhook_ingest.backoff_max = 200ms
});
sub q1 { return $node->safe_psql('postgres', shift); }
my %pem = map { $_ => slurp_file("$dir/$_") } qw(ca.pem other_ca.pem);

my $run = 'r193' . int(rand(1e9));
my %world = map { $_ => ReconcileWorld->new(key => "$run$_", style => 'stripe', objects => 30) } qw(good wrong);

# The doc's Stripe example, its hosts the https origin of nginx.
sub add_source_sql
{
	my ($name, $ca, %o) = @_;
	my $sql = $world{$name}->add_source_sql("tls_$name", %o,
		more => "tls_ca => " . ReconcileWorld::lit($pem{$ca}) . ', max_attempts => 100');
	$sql =~ s{http://127\.0\.0\.1:18080/}{https://127.0.0.1:$port/}g;
	return $sql;
}

sub stats
{
	my ($name, $cols) = @_;
	return q1("SELECT $cols FROM webhook_ingest.reconcile_stats WHERE source = 'tls_$name'");
}

sub wait_sweeps
{
	my ($name, $n) = @_;
	$node->poll_query_until('postgres', qq{
		SELECT sweeps >= $n AND state = 'idle' FROM webhook_ingest.reconcile_stats WHERE source = 'tls_$name'
		   AND NOT EXISTS (SELECT FROM webhook_ingest.queue q WHERE q.source = 'tls_$name')})
	  or diag(q1("SELECT source, state, page, attempts, last_error FROM webhook_ingest.reconcile_stats"));
}

sub tls_pages
{
	my $key = shift;
	open my $fh, '<', "$dir/access.log" or return ();
	my @r = grep { m{/stripe/v1/events\?key=$key&} } <$fh>;
	close $fh;
	return @r;
}

# 1. The right CA.
q1(add_source_sql('good', 'ca.pem'));
unlike(add_source_sql('good', 'ca.pem'), qr{http://}, 'every URL of the source is https');
wait_sweeps('good', 1);
my $changes = $world{good}->change(12);
my $missed = join ' ', sort map { $_->{id} } grep { !$_->{webhook} } @$changes;
q1($world{good}->deliver_sql('tls_good', $changes));
$node->poll_query_until('postgres', q{SELECT count(*) = 11 FROM webhook_ingest.jobs WHERE source = 'tls_good' AND state = 'done'})
  or diag(q1(q{SELECT state, count(*) FROM webhook_ingest.jobs WHERE source = 'tls_good' GROUP BY 1}));
q1(q{UPDATE webhook_ingest.reconcile_sweeps SET next_attempt_at = now()
      WHERE source_id = (SELECT id FROM webhook_ingest.sources WHERE name = 'tls_good')});
wait_sweeps('good', 2);
is(stats('good', q{sweeps || ' ' || sweeps_failed || ' ' || last_changed || ' ' || last_missed}), '2 0 12 1',
	'over TLS with the test CA: two sweeps, the second found the 12 changes, 1 no webhook announced');
is(q1(q{SELECT string_agg(external_id, ' ') FROM webhook_ingest.jobs WHERE source = 'tls_good' AND events = 0}),
	$missed, 'that one was enqueued and fetched (events 0)');
my $asked = $world{good}->requests;
my $pages = 0;
$pages += $_ for values %{ $asked->{pages} };
my @logged = tls_pages("$run" . 'good');
is(scalar(@logged), $pages, "nginx saw each of the $pages page requests the list server answered");
is(scalar(grep { !/^TLSv1\.[23] 200 / } @logged), 0, 'all of them over TLS, answered 200');

# 2. Another CA: the page fails, is retried, never skipped.
q1(add_source_sql('wrong', 'other_ca.pem', since => 0));
$node->poll_query_until('postgres', q{
	SELECT count(*) >= 2 FROM webhook_ingest.recent_failures WHERE source = 'tls_wrong'})
  or diag(q1(q{SELECT source, state, page, attempts, last_error FROM webhook_ingest.reconcile_stats}));
my @failures = split /\n/, q1(qq{SELECT coalesce(job_id::text, 'none') || '|' || outcome || '|'
	  || (external_id LIKE 'https://127.0.0.1:$port/stripe/v1/events?key=${run}wrong&%') || '|' || error
	  FROM webhook_ingest.recent_failures WHERE source = 'tls_wrong' ORDER BY attempt LIMIT 2});
for my $f (@failures)
{
	my ($job, $outcome, $url, $error) = split /\|/, $f, 4;
	is("$job $outcome $url", 'none retry true', 'a failed page: no job id, the page\'s URL, retried');
	like($error, qr/^page 1: .*SSL certificate problem: unable to get local issuer certificate/,
		"the error is the certificate's: $error");
}
is(stats('wrong', q{sweeps || ' ' || sweeps_failed || ' ' || page || ' ' || (attempts >= 2)}), '0 0 1 true',
	'the sweep stays at page 1, retrying it');
is(scalar(keys %{ $world{wrong}->requests->{pages} }) . ' ' . scalar(tls_pages("$run" . 'wrong')), '0 0',
	'the list server was never reached (the handshake failed)');
q1("SELECT webhook_ingest.alter_source('tls_wrong', tls_ca => " . ReconcileWorld::lit($pem{'ca.pem'}) . ')');
wait_sweeps('wrong', 1);
$asked = $world{wrong}->requests;
is(stats('wrong', q{sweeps || ' ' || sweeps_failed || ' ' || last_listed || ' ' || last_pages}), '1 0 30 3',
	'with the right CA the same sweep completed: every object listed, 3 pages');
is(join(' ', map { $asked->{pages}{$_} // 0 } 1 .. 4) . ' ' . scalar(keys %{ $asked->{fetches} }), '1 1 1 0 30',
	'each page asked for once, every object fetched: nothing skipped');

$node->stop;
note(sprintf('%s took %d s', $0, time() - $^T));
done_testing();
