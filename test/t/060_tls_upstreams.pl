# Upstreams over TLS (issue 15), against nginx (test/tls/nginx.sh) with a
# throwaway PKI (test/tls/make_certs.sh) in this test's own directory, on
# ports 18451-18456 (WI_TLS_TAP_PORT_BASE overrides 18451), clear of
# test/upstream.py's and of a bench's nginx on the defaults:
#   1. certificate checks: the system bundle does not know the test CA (a
#      certificate error); tls_ca => the CA: done; another CA, an expired
#      certificate, a host name the certificate does not name: each fails;
#   2. client certificates: the mTLS port answers 400 without one and with
#      one of another CA, and serves the source that presents client.pem;
#   3. a burst of 500 jobs over HTTP/1.1 (the port without h2) with
#      max_host_connections = 64: at most 64 connections, each reused, all
#      done; a burst of 500 on the h2 port: HTTP/2, a few connections with
#      many streams each; worker_status.connections_opened and
#      tls_connections_opened count the connections the server saw opened
#      (and a plain-HTTP burst adds none over TLS);
#   4. a PEM that does not parse: 22023, and the message does not quote the
#      key; tls_client_key is readable by no role but a superuser (42501 for
#      the admin, monitor and app roles), and never reaches the server log.
use strict;
use warnings;
use Cwd qw(getcwd);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 'test/t';
use TlsUpstream;

my $top = getcwd();
my $base = $ENV{WI_TLS_TAP_PORT_BASE} // 18451;
my %port = TlsUpstream::ports($base);
my $tls = PostgreSQL::Test::Utils::tempdir('tls');
my $nginx_up = 0;

sub nginx { return TlsUpstream::nginx($tls, \%port, @_); }

END
{
	nginx('stop') if $nginx_up;
}

# 50 ms per answer: a burst's fetches overlap, so a connection limit shows.
nginx('start', '--delay-ms', '50') or die('nginx did not start (test/tls/nginx.sh)');
$nginx_up = 1;

my %pem = map { $_ => slurp_file("$tls/$_") }
  qw(ca.pem other_ca.pem client.pem client.key stranger.pem stranger.key);
sub lit { my $s = shift; $s =~ s/'/''/g; return "'$s'"; }

# The access log: [connection, requests on it, port, protocol, ssl protocol, status, uri]
sub requests { return TlsUpstream::requests($tls, @_); }

my $node = PostgreSQL::Test::Cluster->new('tls');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.backoff_base = 50ms
webhook_ingest.backoff_max = 200ms
webhook_ingest.connect_timeout = 5s
webhook_ingest.max_host_connections = 64
});
$node->start;
my $u = sub { my ($p, $path) = @_; "https://127.0.0.1:$port{$p}/posts/" . ($path // '{external_id}') };
$node->safe_psql('postgres', qq{
	CREATE EXTENSION webhook_ingest;
	CREATE TABLE posts (id text PRIMARY KEY, title text);
	CREATE FUNCTION store_post(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE sql AS \$\$
		INSERT INTO posts VALUES (external_id, details->>'title')
		  ON CONFLICT (id) DO UPDATE SET title = EXCLUDED.title;
	\$\$;
	SELECT webhook_ingest.add_source('no_ca', '@{[ $u->('good') ]}', 'store_post(text,jsonb,jsonb)', max_attempts => 1);
	SELECT webhook_ingest.add_source('our_ca', '@{[ $u->('good') ]}', 'store_post(text,jsonb,jsonb)', max_attempts => 1,
	                                 tls_ca => @{[ lit($pem{'ca.pem'}) ]});
	SELECT webhook_ingest.add_source('other_ca', '@{[ $u->('good') ]}', max_attempts => 1,
	                                 tls_ca => @{[ lit($pem{'other_ca.pem'}) ]});
	SELECT webhook_ingest.add_source('expired', '@{[ $u->('expired') ]}', max_attempts => 1,
	                                 tls_ca => @{[ lit($pem{'ca.pem'}) ]});
	SELECT webhook_ingest.add_source('wrong_host', '@{[ $u->('wrong') ]}', max_attempts => 1,
	                                 tls_ca => @{[ lit($pem{'ca.pem'}) ]});
	SELECT webhook_ingest.add_source('mtls_none', '@{[ $u->('mtls') ]}', max_attempts => 1,
	                                 tls_ca => @{[ lit($pem{'ca.pem'}) ]});
	SELECT webhook_ingest.add_source('mtls_client', '@{[ $u->('mtls') ]}', 'store_post(text,jsonb,jsonb)',
	                                 max_attempts => 1, tls_ca => @{[ lit($pem{'ca.pem'}) ]},
	                                 tls_client_cert => @{[ lit($pem{'client.pem'}) ]},
	                                 tls_client_key => @{[ lit($pem{'client.key'}) ]});
	SELECT webhook_ingest.add_source('mtls_stranger', '@{[ $u->('mtls') ]}', max_attempts => 1,
	                                 tls_ca => @{[ lit($pem{'ca.pem'}) ]},
	                                 tls_client_cert => @{[ lit($pem{'stranger.pem'}) ]},
	                                 tls_client_key => @{[ lit($pem{'stranger.key'}) ]});
	SELECT webhook_ingest.add_source('h1', '@{[ $u->('h1') ]}', max_attempts => 3,
	                                 tls_ca => @{[ lit($pem{'ca.pem'}) ]});
	SELECT webhook_ingest.add_source('h2', '@{[ $u->('good') ]}', max_attempts => 3,
	                                 tls_ca => @{[ lit($pem{'ca.pem'}) ]});
	SELECT webhook_ingest.add_source('plain', 'http://127.0.0.1:$port{plain}/posts/{external_id}', max_attempts => 3);
});
$node->poll_query_until('postgres',
	q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'})
  or die 'the worker did not start';

# Enqueue n jobs of source (external ids PREFIX-1..n) and wait until none is pending or running.
sub run_jobs
{
	my ($source, $prefix, $n) = @_;
	$node->safe_psql('postgres', qq{
		SELECT count(*) FROM generate_series(1, $n) i, webhook_ingest.enqueue('$source', '$prefix-' || i) e});
	$node->poll_query_until('postgres', qq{
		SELECT count(*) = $n FROM webhook_ingest.jobs
		 WHERE source = '$source' AND external_id LIKE '$prefix-%' AND state IN ('done', 'dead', 'cancelled')})
	  or diag("$source: jobs not finished: "
		  . $node->safe_psql('postgres', qq{SELECT state, count(*), max(last_error) FROM webhook_ingest.jobs
			WHERE source = '$source' GROUP BY state}));
	return $node->safe_psql('postgres', qq{
		SELECT string_agg(state || ' ' || n, ', ' ORDER BY state) FROM
		  (SELECT state::text, count(*) n FROM webhook_ingest.jobs
		    WHERE source = '$source' AND external_id LIKE '$prefix-%' GROUP BY state) s});
}

sub last_error
{
	my ($source) = @_;
	return $node->safe_psql('postgres', qq{SELECT last_error FROM webhook_ingest.jobs WHERE source = '$source'
		ORDER BY id DESC LIMIT 1});
}

# ---- 1. which certificates are trusted ----

is(run_jobs('no_ca', 'noca', 1), 'dead 1', 'without tls_ca (the system bundle) the test CA is not trusted');
like(last_error('no_ca'), qr/SSL certificate problem: unable to get local issuer certificate/,
	'last_error: a certificate error');
is(run_jobs('our_ca', 'ours', 1), 'done 1', 'with tls_ca => the test CA: done');
is($node->safe_psql('postgres', q{SELECT title FROM posts WHERE id = 'ours-1'}), 'Post ours-1',
	'the handler got the post the TLS upstream served');
is(scalar(grep { $_->{port} == $port{good} && $_->{status} == 200 } requests(qr{^/posts/ours-1$})), 1,
	'nginx served it on the TLS port');
is(run_jobs('other_ca', 'other', 1), 'dead 1', 'tls_ca => an unrelated CA: refused');
like(last_error('other_ca'), qr/SSL certificate problem: unable to get local issuer certificate/,
	'last_error: the issuer is unknown');
is(run_jobs('expired', 'exp', 1), 'dead 1', 'an expired certificate: refused');
like(last_error('expired'), qr/SSL certificate problem: certificate has expired/, 'last_error: expired');
is(run_jobs('wrong_host', 'wh', 1), 'dead 1', 'a certificate for another host: refused');
like(last_error('wrong_host'), qr/no alternative certificate subject name matches target (?:host name|ipv4 address) '127\.0\.0\.1'/,
	'last_error: the host name does not match');    # libcurl 8: "target ipv4 address"
is(scalar(requests(qr{^/posts/(noca|other|exp|wh)-})), 0, 'none of the refused fetches sent a request');

# ---- 2. client certificates ----

is(run_jobs('mtls_none', 'mnone', 1), 'dead 1', 'the mTLS port without a client certificate: refused');
like(last_error('mtls_none'), qr/HTTP 400/, 'last_error: HTTP 400 (nginx: no required SSL certificate was sent)');
is(run_jobs('mtls_client', 'mok', 1), 'done 1', 'with client.pem and its key: done');
is($node->safe_psql('postgres', q{SELECT title FROM posts WHERE id = 'mok-1'}), 'Post mok-1',
	'the handler got the post from the mTLS port');
is(run_jobs('mtls_stranger', 'mstr', 1), 'dead 1', 'with a client certificate of another CA: refused');
like(last_error('mtls_stranger'), qr/HTTP 400/, 'last_error: HTTP 400 (nginx: the SSL certificate error)');
is(join(',', map { $_->{status} } sort { $a->{uri} cmp $b->{uri} } requests(qr{^/posts/m(none|ok|str)-1$})),
	'400,200,400', 'nginx: 400 without a certificate (mnone-1) and with the stranger (mstr-1), 200 with client.pem (mok-1)');

# ---- 3. connections: HTTP/1.1 reuse under max_host_connections, HTTP/2 multiplexing ----

sub opened
{
	return split /\|/, $node->safe_psql('postgres',
		q{SELECT connections_opened, tls_connections_opened FROM webhook_ingest.worker_status WHERE role = 'fetcher'});
}

# A burst; returns (jobs' states, the server's log lines of it, connections and TLS connections opened).
sub burst
{
	my ($source, $prefix, $n) = @_;
	my ($c0, $t0) = opened();
	my $states = run_jobs($source, $prefix, $n);
	my @r = requests(qr{^/posts/$prefix-\d+$});
	# the server's new connections: those whose first request was one of the burst's
	my $new = grep { $_->{nreq} == 1 } @r;
	# worker_status is refreshed by the worker's loop: wait for it to catch up
	$node->poll_query_until('postgres',
		"SELECT connections_opened - $c0 >= $new FROM webhook_ingest.worker_status WHERE role = 'fetcher'");
	my ($c1, $t1) = opened();
	return ($states, \@r, $c1 - $c0, $t1 - $t0, $new);
}

sub distinct { my %s; $s{$_}++ for @_; return scalar keys %s; }
sub max { my $m = 0; for (@_) { $m = $_ if $_ > $m } return $m; }

my ($states, $r, $conns, $tls_conns, $new) = burst('h1', 'one', 500);
is($states, 'done 500', 'HTTP/1.1 burst: 500 jobs done');
is(scalar(@$r), 500, 'nginx got 500 requests');
is(join(',', sort { $a cmp $b } keys %{ { map { ("$_->{port} $_->{proto}" => 1) } @$r } }),
	"$port{h1} HTTP/1.1", 'all on the HTTP/1.1-only port, over HTTP/1.1');
my $h1_conns = distinct(map { $_->{conn} } @$r);
cmp_ok($h1_conns, '<=', 64, "at most max_host_connections (64) connections: $h1_conns");
cmp_ok($h1_conns, '>', 1, 'more than one: the fetches ran in parallel');
cmp_ok(max(map { $_->{nreq} } @$r), '>', 1, 'connections were reused (keep-alive)');
is($conns, $new, "worker_status.connections_opened rose by the connections the server saw opened ($new)");
is($tls_conns, $new, 'and tls_connections_opened as much');
diag("HTTP/1.1 burst: $h1_conns connections, at most " . max(map { $_->{nreq} } @$r) . ' requests on one');

($states, $r, $conns, $tls_conns, $new) = burst('h2', 'two', 500);
is($states, 'done 500', 'HTTP/2 burst: 500 jobs done');
is(scalar(@$r), 500, 'nginx got 500 requests');
is(join(',', sort { $a cmp $b } keys %{ { map { ("$_->{port} $_->{proto}" => 1) } @$r } }),
	"$port{good} HTTP/2.0", 'all on the h2 port, over HTTP/2');
my $h2_conns = distinct(map { $_->{conn} } @$r);
cmp_ok($h2_conns, '<=', 10, "a few connections: $h2_conns");
cmp_ok(max(map { $_->{nreq} } @$r), '>=', 50, 'many streams on one connection');
is($conns, $new, "worker_status.connections_opened rose by the connections the server saw opened ($new)");
is($tls_conns, $new, 'and tls_connections_opened as much');
diag("HTTP/2 burst: $h2_conns connections, at most " . max(map { $_->{nreq} } @$r) . ' requests on one');

($states, $r, $conns, $tls_conns, $new) = burst('plain', 'pl', 100);
is($states, 'done 100', 'plain HTTP burst: 100 jobs done');
cmp_ok($new, '>=', 1, 'over new connections');
is($conns, $new, "connections_opened rose by the server's count ($new)");
is($tls_conns, 0, 'tls_connections_opened did not move');

# ---- 4. PEMs that do not parse; who reads the key ----

my @key_lines = grep { !/-----/ && length > 20 } split /\n/, $pem{'client.key'};
die 'no key lines' unless @key_lines;
my $broken_key = $pem{'client.key'};
$broken_key =~ s/\n([A-Za-z0-9+\/=]{8})/\n$1!!/;    # a base64 line that no longer decodes
my @attempts = (
	[ 'a private key as tls_ca', "tls_ca => @{[ lit($pem{'client.key'}) ]}" ],
	[ 'a key that does not decode', "tls_client_cert => @{[ lit($pem{'client.pem'}) ]}, tls_client_key => @{[ lit($broken_key) ]}" ],
	[ 'the key of another certificate', "tls_client_cert => @{[ lit($pem{'client.pem'}) ]}, tls_client_key => @{[ lit($pem{'stranger.key'}) ]}" ],
	[ 'a key given as the certificate', "tls_client_cert => @{[ lit($pem{'client.key'}) ]}, tls_client_key => @{[ lit($pem{'client.key'}) ]}" ]);
for my $t (@attempts)
{
	my ($what, $args) = @$t;
	my ($rc, $out, $err) = $node->psql('postgres', qq{\\set VERBOSITY verbose
		SELECT webhook_ingest.add_source('bad_pem', '@{[ $u->('good') ]}', $args)});
	like($err, qr/ERROR:  22023: /, "$what: 22023");
	my @quoted = grep { my $l = $_; index($err, $l) >= 0 || index($err, substr($l, 0, 16)) >= 0 } @key_lines;
	is(scalar(@quoted), 0, "$what: the error does not quote the key");
}
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.sources WHERE name = 'bad_pem'}), '0',
	'none of them was added');

$node->safe_psql('postgres', q{
	CREATE ROLE tls_admin IN ROLE webhook_ingest_admin;
	CREATE ROLE tls_monitor IN ROLE webhook_ingest_monitor;
	CREATE ROLE tls_app IN ROLE webhook_ingest_enqueue;
});
is($node->safe_psql('postgres', qq{SELECT tls_client_key = @{[ lit($pem{'client.key'}) ]}
	FROM webhook_ingest.source_tls_keys WHERE source = 'mtls_client'}), 't', 'a superuser reads the key');
for my $role (qw(tls_admin tls_monitor tls_app))
{
	my ($rc, $out, $err) = $node->psql('postgres', qq{\\set VERBOSITY verbose
		SET ROLE $role; SELECT tls_client_key FROM webhook_ingest.source_tls_keys});
	like($err, qr/ERROR:  42501: permission denied for table source_tls_keys/, "$role may not read source_tls_keys");
	unlike($out, qr/\Q$key_lines[0]\E/, "$role got no key");
}
# nowhere else in what the admin reads
my $admin_sees = $node->safe_psql('postgres', q{SET ROLE tls_admin;
	SELECT string_agg(s::text, ' ') FROM webhook_ingest.sources s});
like($admin_sees, qr/BEGIN CERTIFICATE/, 'the admin reads the sources (and their certificates)');
is(scalar(grep { index($admin_sees, $_) >= 0 } @key_lines), 0, 'but no line of the key');

# the key never reached the server log (the worker loaded it, the bad PEMs were refused)
my $log = slurp_file($node->logfile);
is(scalar(grep { index($log, $_) >= 0 } @key_lines), 0, 'the server log holds no line of the key');

$node->stop;
nginx('stop') or diag('nginx.sh stop failed');
$nginx_up = 0;
done_testing();
