# webhook_ingest_router (issue 16): four shard clusters, each running webhook_ingest, and a router
# cluster with PL/Proxy and webhook_ingest_router in front of them (router/).  Through the router:
#   1. routing: each job is on the shard shard_of names, and its router id decodes to it;
#   2. dedup and coalescing as on one shard; receive with a GitHub-signed body (the HMAC computed
#      here), a forged one refused with the shard's 28000, a bad id with its 22023;
#   3. source administration fanned out to every shard; check_shards empty, then naming a shard changed
#      behind the router's back, then empty again after alter_source;
#   4. least privilege: each role reaches the shards as itself (pg_stat_activity there), an app role that
#      a source's enqueue_roles refuses is refused through the router with the shard's 42501;
#   5. the aggregated views (queue_stats summed per source, worker_status per shard, latency,
#      recent_failures) against the shards' own; the intake switch (57P03);
#   6. THE STORM through the router: bench/peers/storm_send.py (16 senders, 1500 events about 200
#      objects, ~3 deliveries each) against bench/peers/upstream.py, one shard stopped mid-run: the other
#      shards' webhooks still accepted, the stopped shard's refused with 08006 naming it; after it restarts
#      the senders' retries (the failed deliveries sent again) get everything handled: each event
#      accepted once, no stale object, no lost object, no overlapping fetch.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# The router needs PL/Proxy (postgresql-NN-plproxy).
{
	my $pg_config = $ENV{PG_CONFIG} // 'pg_config';
	chomp(my $share = `$pg_config --sharedir`);
	plan skip_all => "PL/Proxy is not installed in $share" unless -f "$share/extension/plproxy.control";
}
use Digest::SHA qw(hmac_sha256_hex);
use IPC::Run;
use Time::HiRes qw(time usleep);

my $py = '/usr/bin/python3';    # Debian's, with python3-psycopg2
my $peers = 'bench/peers';
my $nshards = 4;

# --- the storm's upstream (bench/peers/upstream.py) on a free port of its own.
my $up_port = PostgreSQL::Test::Cluster::get_free_port();
my $up_log = "$PostgreSQL::Test::Utils::tmp_check/upstream_fetches.log";
my ($up_out, $up_err) = ('', '');
my $upstream = IPC::Run::start([ $py, "$peers/upstream.py", $up_port, 20, 60, $up_log ],
	'>', \$up_out, '2>', \$up_err);
my $t_up = time();
while ($up_out !~ /^ready/m && time() - $t_up < 30)
{
	$upstream->pump_nb;
	usleep(50_000);
}
like($up_out, qr/^ready/m, "bench/peers/upstream.py answers on 127.0.0.1:$up_port");

sub upstream_stats
{
	my $s = `$py -c 'import json, urllib.request; s = json.load(urllib.request.urlopen("http://127.0.0.1:$up_port/stats")); print(s["fetches"], s["overlaps"], s["objects_overlapped"], s["max_in_flight_per_object"])'`;
	chomp $s;
	return split / /, $s;
}

# --- four shards.
my $schema = slurp_file("$peers/schema.sql");
my @shards;
for my $i (0 .. $nshards - 1)
{
	my $n = PostgreSQL::Test::Cluster->new("shard$i");
	$n->init;
	$n->append_conf('postgresql.conf', qq{
max_connections = 80
log_connections = on
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.backoff_base = 50ms
webhook_ingest.backoff_max = 200ms
});
	$n->start;
	$n->safe_psql('postgres', qq{
		CREATE EXTENSION webhook_ingest;
		CREATE ROLE app LOGIN IN ROLE webhook_ingest_enqueue;
		CREATE ROLE outsider LOGIN IN ROLE webhook_ingest_enqueue;
		CREATE ROLE adm LOGIN IN ROLE webhook_ingest_admin;
		CREATE ROLE mon LOGIN IN ROLE webhook_ingest_monitor;
		$schema
		GRANT ALL ON posts, post_tags, runs, runs_id_seq TO adm;
		CREATE FUNCTION store(external_id text, details jsonb, payload jsonb) RETURNS void LANGUAGE sql
			AS \$\$ SELECT store_post(details) \$\$;
		ALTER FUNCTION store(text, jsonb, jsonb) OWNER TO adm;
	});
	push @shards, $n;
}

# --- the router.
my $router = PostgreSQL::Test::Cluster->new('router');
$router->init;
# log_statement off (the test harness sets all): what reaches the log of a failed statement is
# log_min_error_statement's business, as on a production router.
$router->append_conf('postgresql.conf', "max_connections = 60\nlog_statement = none\n");
$router->start;
my $parts = join ', ', map { sprintf "p%d 'host=%s port=%d dbname=postgres'", $_, $shards[$_]->host, $shards[$_]->port }
  0 .. $nshards - 1;
$router->safe_psql('postgres', qq{
	CREATE EXTENSION webhook_ingest_router CASCADE;
	CREATE ROLE app LOGIN IN ROLE webhook_ingest_enqueue;
	CREATE ROLE outsider LOGIN IN ROLE webhook_ingest_enqueue;
	CREATE ROLE adm LOGIN IN ROLE webhook_ingest_admin;
	CREATE ROLE mon LOGIN IN ROLE webhook_ingest_monitor;
	CREATE SERVER webhook_ingest_shards FOREIGN DATA WRAPPER plproxy OPTIONS (connection_lifetime '1800', $parts);
	-- No user option: PL/Proxy connects as the calling role (user=current_user).
	CREATE USER MAPPING FOR PUBLIC SERVER webhook_ingest_shards;
	GRANT USAGE ON FOREIGN SERVER webhook_ingest_shards TO webhook_ingest_enqueue, webhook_ingest_admin, webhook_ingest_monitor;
	$schema
	GRANT INSERT ON sent TO app;
});
is($router->safe_psql('postgres', 'SELECT webhook_ingest.shard_count()'), $nshards, "the router sees $nshards partitions");

# psql on the router as ROLE: (rc, stdout, stderr), errors verbose (SQLSTATE shown).
sub rq
{
	my ($role, $sql) = @_;
	my ($out, $err) = ('', '');
	my $rc = $router->psql('postgres', "\\set VERBOSITY verbose\n$sql", stdout => \$out, stderr => \$err,
		extra_params => [ '-U', $role ]);
	return ($rc, $out, $err);
}
sub rq_ok
{
	my ($role, $sql) = @_;
	my ($rc, $out, $err) = rq($role, $sql);
	die "as $role: $sql: $err" if $rc;
	return $out;
}
sub on_shards
{
	my ($sql) = @_;
	return map { $_->safe_psql('postgres', $sql) } @shards;
}

# --- 3 first: source administration fanned out (the rest needs the sources).
rq_ok('adm', qq{
	SELECT webhook_ingest.add_source('blog', 'http://127.0.0.1:$up_port/posts/{external_id}', 'store(text,jsonb,jsonb)');
	SELECT webhook_ingest.add_source('held', 'http://127.0.0.1:$up_port/posts/{external_id}');
	SELECT webhook_ingest.pause_source('held');
	SELECT webhook_ingest.add_source('gh', 'http://127.0.0.1:$up_port/posts/{external_id}',
		signature_scheme => 'github', signing_secrets => '{gh-secret}', external_id_path => '\$.post.id');
	SELECT webhook_ingest.add_source('private', 'http://127.0.0.1:$up_port/posts/{external_id}', enqueue_roles => '{app}');
	SELECT webhook_ingest.pause_source('private');
	SELECT webhook_ingest.add_source('bench', 'http://127.0.0.1:$up_port/posts/{external_id}', 'store(text,jsonb,jsonb)',
		timeout_ms => 30000);
	-- Nothing listens on port 1: its fetches fail (recent_failures).
	SELECT webhook_ingest.add_source('broken', 'http://127.0.0.1:1/posts/{external_id}', max_attempts => 3);
});
is_deeply([ on_shards(q{SELECT string_agg(name || ':' || paused, ' ' ORDER BY name) FROM webhook_ingest.sources}) ],
	[ ('bench:false blog:false broken:false gh:false held:true private:true') x $nshards ],
	'add_source and pause_source reached every shard');
is(rq_ok('adm', q{SELECT count(*) FROM webhook_ingest.check_shards()}), 0, 'check_shards: all shards agree');
is(rq_ok('adm', q{SELECT name || ' ' || coalesce(external_id_path::text, '-') FROM webhook_ingest.sources WHERE name IN ('gh', 'blog') ORDER BY 1}),
	"blog -\ngh \$.\"post\".\"id\"", "the router's copy holds each source's external_id_path");
my ($rc, $out, $err) = rq('adm', q{SELECT webhook_ingest.add_source('blog', 'http://127.0.0.1:1/{external_id}')});
like($err, qr/ERROR:  42710: source "blog" already exists/, 'add_source of an existing source: 42710');

$shards[2]->safe_psql('postgres', q{UPDATE webhook_ingest.sources SET timeout_ms = 1234 WHERE name = 'gh'});
is(rq_ok('adm', q{SELECT shard || '|' || source || '|' || problem FROM webhook_ingest.check_shards()}),
	"2|gh|definition differs from the other shards'", 'check_shards names the shard changed behind the router');
$shards[1]->safe_psql('postgres', q{SELECT webhook_ingest.drop_source('held', force => true)});
like(rq_ok('adm', q{SELECT shard || '|' || source || '|' || problem FROM webhook_ingest.check_shards()}),
	qr/^1\|held\|missing on this shard$/m, 'check_shards names a shard missing a source');
rq_ok('adm', q{SELECT webhook_ingest.alter_source('gh', timeout_ms => 10000)});
$shards[1]->safe_psql('postgres', q{SELECT webhook_ingest.add_source('held', 'http://127.0.0.1:1/posts/{external_id}')});
like(rq_ok('adm', q{SELECT shard || '|' || source || '|' || problem FROM webhook_ingest.check_shards()}),
	qr/^1\|held\|definition differs/m, 'a source re-added by hand with another template still differs');
rq_ok('adm', qq{SELECT webhook_ingest.alter_source('held', url_template => 'http://127.0.0.1:$up_port/posts/{external_id}');
	SELECT webhook_ingest.pause_source('held')});
is(rq_ok('adm', q{SELECT count(*) FROM webhook_ingest.check_shards()}), 0, 'alter_source and pause_source through the router: all agree again');

# A fan-out one shard refuses midway (its handler is missing there): the others keep the change.
for my $i (0 .. $nshards - 2)
{
	$shards[$i]->safe_psql('postgres', q{CREATE FUNCTION partial_h(text, jsonb, jsonb) RETURNS void LANGUAGE sql AS 'SELECT';
		ALTER FUNCTION partial_h(text, jsonb, jsonb) OWNER TO adm});
}
my $last = $nshards - 1;
($rc, $out, $err) = rq('adm', qq{SELECT webhook_ingest.add_source('partial', 'http://127.0.0.1:$up_port/posts/{external_id}', 'partial_h(text,jsonb,jsonb)')});
like($err, qr/ERROR:  42883: function "partial_h\(text,jsonb,jsonb\)" does not exist/, "add_source whose handler is missing on shard $last: that shard's 42883");
like($err, qr/DETAIL:  PL\/Proxy ran it on every shard in its own transaction/, '  with a DETAIL saying some shards may have taken it');
usleep(300_000);
my @has_partial = on_shards(q{SELECT count(*) FROM webhook_ingest.sources WHERE name = 'partial'});
my @expect_partial = grep { defined } ((grep { $_ } @has_partial) ? ("router|missing from the router's copy",
	map { $has_partial[$_] ? undef : "$_|missing on this shard" } 0 .. $nshards - 1) : ());
is(rq_ok('adm', q{SELECT string_agg(coalesce(shard::text, 'router') || '|' || problem, ' / ' ORDER BY shard NULLS FIRST)
	FROM webhook_ingest.check_shards() WHERE source = 'partial'}), join(' / ', @expect_partial),
	'check_shards shows what it left: ' . (join(' / ', @expect_partial) || 'nothing') . ' (shards holding it: ' . join(' ', @has_partial) . ')');
$shards[$last]->safe_psql('postgres', q{CREATE FUNCTION partial_h(text, jsonb, jsonb) RETURNS void LANGUAGE sql AS 'SELECT';
	ALTER FUNCTION partial_h(text, jsonb, jsonb) OWNER TO adm});
rq_ok('adm', qq{SELECT webhook_ingest.add_source('partial', 'http://127.0.0.1:$up_port/posts/{external_id}', 'partial_h(text,jsonb,jsonb)')});
is(rq_ok('adm', q{SELECT count(*) FROM webhook_ingest.check_shards()}) . ' ' . join(' ', on_shards(q{SELECT count(*) FROM webhook_ingest.sources WHERE name = 'partial'})),
	'0 ' . join(' ', (1) x $nshards), 'once the handler exists there, the same add_source again completes it: every shard has it once, check_shards empty');

# A source every shard has but the router's copy lacks: alter_source through the router adds the copy,
# with the external_id_path the shards have.
on_shards(qq{SELECT webhook_ingest.add_source('gh2', 'http://127.0.0.1:$up_port/posts/{external_id}',
	signature_scheme => 'github', signing_secrets => '{gh-secret}', external_id_path => '\$.post.id')});
like(rq_ok('adm', q{SELECT problem FROM webhook_ingest.check_shards() WHERE source = 'gh2'}), qr/^missing from the router's copy$/,
	'a source added on every shard behind the router: missing from its copy');
rq_ok('adm', q{SELECT webhook_ingest.alter_source('gh2', timeout_ms => 5000)});
is(rq_ok('adm', q{SELECT external_id_path || ' ' || (SELECT count(*) FROM webhook_ingest.check_shards()) FROM webhook_ingest.sources WHERE name = 'gh2'}),
	'$."post"."id" 0', "alter_source through the router writes its copy with the shards' external_id_path; check_shards empty");

# --- 1. routing and router job ids.
my %placed;
my $routing_ok = 1;
for my $k (1 .. 40)
{
	my ($id, $outcome, $part) = split /\|/, rq_ok('app',
		qq{SELECT e.job_id, e.outcome, webhook_ingest.shard_of('held', 'obj-$k') FROM webhook_ingest.enqueue('held', 'obj-$k', NULL, 'ev-$k') e});
	my $shard_of_id = int($id / 2**48);
	my $local = $id % 2**48;
	my @where = map { $shards[$_]->safe_psql('postgres',
		"SELECT count(*) FROM webhook_ingest.jobs WHERE id = $local AND source = 'held' AND external_id = 'obj-$k'") } 0 .. $nshards - 1;
	$placed{$part}++;
	$routing_ok = 0 unless $outcome eq 'queued' && $shard_of_id == $part && $where[$part] == 1
	  && (grep { $_ == 1 } @where) == 1;
}
ok($routing_ok, 'each of 40 objects: queued on the shard shard_of names, nowhere else, and its router id >> 48 is that shard');
is(scalar(keys %placed), $nshards, 'the 40 objects spread over all shards: '
	  . join(' ', map { "shard $_: " . ($placed{$_} // 0) } sort keys %placed));
is(rq_ok('app', q{SELECT webhook_ingest.shard_hash('blog', 'post-42')}), '-1502981861', "shard_hash is md5's first 4 bytes, fixed: md5('blog\\npost-42') = a66a511b...")
  or diag('shard_hash changed: every object would move');

# --- 2. dedup and coalescing.
my $first = rq_ok('app', q{SELECT job_id || ' ' || outcome FROM webhook_ingest.enqueue('held', 'obj-1', NULL, 'ev-1')});
like($first, qr/^\d+ duplicate$/, 'the same event id again through the router: duplicate');
my $coal = rq_ok('app', q{SELECT job_id || ' ' || outcome FROM webhook_ingest.enqueue('held', 'obj-1', NULL, 'ev-1b')});
like($coal, qr/^\d+ coalesced$/, 'a new event for a pending object: coalesced');
is((split / /, $coal)[0], (split / /, $first)[0], 'into the same router job id');
my ($jid) = split / /, $coal;
is(rq_ok('app', "SELECT shard || ' ' || state || ' ' || shard_job_id FROM webhook_ingest.job($jid)"),
	int($jid / 2**48) . ' pending ' . ($jid % 2**48), 'job(router id): its shard, state and shard job id');
($rc, $out, $err) = rq('app', q{SELECT * FROM webhook_ingest.wait_for_job((4::bigint << 48) | 1, '1 s')});
like($err, qr/ERROR:  P0002: job \d+ does not exist/, 'a router id whose shard number is past the last partition: P0002');

# receive: GitHub's HMAC over the body, computed here.
my $body = '{"post":{"id":"gh-7"},"action":"edited"}';
my $sig = 'sha256=' . hmac_sha256_hex($body, 'gh-secret');
my $recv = sub {
	my ($role, $s, $delivery, $b) = @_;
	return rq($role, qq{SELECT coalesce(job_id::text, '-') || ' ' || outcome FROM webhook_ingest.receive('gh',
		jsonb_build_object('X-Hub-Signature-256', '$s', 'X-GitHub-Delivery', '$delivery'), '$b')});
};
($rc, $out) = $recv->('app', $sig, 'd-1', $body);
my ($rjob, $routcome) = split / /, $out;
is($routcome, 'queued', 'receive with a GitHub-signed body through the router: queued');
my $gh_part = rq_ok('app', q{SELECT webhook_ingest.shard_of('gh', 'gh-7')});
is(int($rjob / 2**48), $gh_part, 'on the shard of the id the router found with external_id_path');
is($shards[$gh_part]->safe_psql('postgres', "SELECT external_id FROM webhook_ingest.jobs WHERE id = " . ($rjob % 2**48)),
	'gh-7', 'and that shard holds the job');
($rc, $out) = $recv->('app', $sig, 'd-1', $body);
like($out, qr/ duplicate$/, 'the same delivery again: duplicate');
($rc, $out, $err) = $recv->('app', 'sha256=' . hmac_sha256_hex($body, 'wrong'), 'd-2', $body);
like($err, qr/ERROR:  28000: shard $gh_part: webhook signature verification failed/, "a forged signature: the shard's 28000, unchanged");
($rc, $out, $err) = $recv->('app', 'sha256=00', 'd-5', '{"post":{"id":"forged-marker-5"}}');
like($err, qr/ERROR:  28000: /, 'another forged delivery: 28000');
unlike(slurp_file($router->logfile), qr/forged-marker-5/, "the router's log has its error but not its statement (body and headers)")
  or diag(join("\n", grep { /forged-marker-5/ } split /\n/, slurp_file($router->logfile)));
my $bad = '{"post":{"id":{"x":1}}}';
($rc, $out, $err) = $recv->('app', 'sha256=' . hmac_sha256_hex($bad, 'gh-secret'), 'd-3', $bad);
like($err, qr/ERROR:  22023: /, 'a signed body whose id is an object: 22023 from the shard (the router routes it to shard 0)');
($rc, $out, $err) = $recv->('app', 'sha256=00', 'd-4', 'not json');
like($err, qr/ERROR:  28000: /, 'a forged body that is not JSON: 28000 (the signature is checked first, as on a shard)');
($rc, $out, $err) = rq('app', q{SELECT * FROM webhook_ingest.receive('nosuch', '{}', '{}')});
like($err, qr/ERROR:  42704: shard 0: source "nosuch" does not exist/, "receive into a source the router's copy lacks: shard 0's 42704 (unrouted: never kept there)");
($rc, $out, $err) = rq('app', q{SELECT * FROM webhook_ingest.receive('blog', '{}', '{"id": "x"}')});
like($err, qr/ERROR:  55000: shard 0: source "blog" /, "receive into a source without external_id_path: shard 0's 55000");
my $big = q{SELECT * FROM webhook_ingest.receive('gh', '{}', '{"post":{"id":"gh-big"},"pad":"' || repeat('x', 1100 * 1024) || '"}')};
($rc, $out, $err) = rq('app', $big);
like($err, qr/ERROR:  54000: body of \d+ bytes exceeds webhook_ingest.max_payload_size \(1024 kB\)/,
	'a body over max_payload_size: 54000 from the router, before it parses it');
($rc, $out, $err) = rq('app', "SET webhook_ingest.max_payload_size = '2MB'; $big");
like($err, qr/ERROR:  54000: shard \d: /, "with the router's setting raised, the shard's own 54000");

# --- 4. least privilege.
rq_ok('app', q{SELECT * FROM webhook_ingest.enqueue('private', 'p-1')});
($rc, $out, $err) = rq('outsider', q{SELECT * FROM webhook_ingest.enqueue('private', 'p-1')});
like($err, qr/ERROR:  42501: shard \d: /, "an app role the source's enqueue_roles refuses: the shard's 42501 through the router");
my $private_part = rq_ok('app', q{SELECT webhook_ingest.shard_of('private', 'p-1')});
my $shard_log = slurp_file($shards[$private_part]->logfile);
my %as = map { $_ => scalar(() = $shard_log =~ /connection authorized: user=$_ database=postgres/g) } qw(app outsider adm);
ok($as{app} > 0 && $as{outsider} > 0 && $as{adm} > 0,
	"the router connects to shard $private_part as each calling role (connections authorized there: "
	  . join(', ', map { "$_ $as{$_}" } sort keys %as) . ')');
($rc, $out, $err) = rq('mon', q{SELECT * FROM webhook_ingest.enqueue('blog', 'x')});
like($err, qr/ERROR:  42501: permission denied for function enqueue/, 'a monitor role may not enqueue on the router (42501)');
($rc, $out, $err) = rq('app', q{SELECT webhook_ingest.pause_source('blog')});
like($err, qr/ERROR:  42501: /, 'an app role may not administer sources (42501)');

# --- 5. aggregated views and the intake switch.
my $broken_job = rq_ok('app', q{SELECT job_id FROM webhook_ingest.enqueue('broken', 'b-1')});
my $held_direct = 0;
$held_direct += $_ for on_shards(q{SELECT pending FROM webhook_ingest.queue_stats WHERE source = 'held'});
is(rq_ok('mon', q{SELECT pending || ' ' || shards FROM webhook_ingest.queue_stats WHERE source = 'held'}), "$held_direct $nshards",
	"queue_stats on the router: the shards' pending summed ($held_direct) over $nshards shards");
is(rq_ok('mon', q{SELECT string_agg(shard || ':' || state, ' ' ORDER BY shard) FROM webhook_ingest.worker_status}),
	join(' ', map { "$_:running" } 0 .. $nshards - 1), 'worker_status: one row per shard, each running');
rq_ok('adm', q{SELECT webhook_ingest.close_intake('adding a shard')});
($rc, $out, $err) = rq('app', q{SELECT * FROM webhook_ingest.enqueue('held', 'obj-1')});
like($err, qr/ERROR:  57P03: the router's intake is closed: adding a shard/, 'the intake switch: enqueue raises 57P03');
rq_ok('adm', q{SELECT webhook_ingest.open_intake()});
($rc, $out, $err) = rq('app', q{SELECT outcome FROM webhook_ingest.enqueue('held', 'obj-1')});
is($out, 'coalesced', 'and once open again it takes webhooks');

# --- 6. the storm through the router, one shard stopped mid-run.
my $events = 1500;
my $plan_file = "$PostgreSQL::Test::Utils::tmp_check/plan.csv";
system("$py $peers/storm_send.py plan $events 200 42 > $plan_file") == 0 or die 'storm_send.py plan failed';
my @plan = split /\n/, slurp_file($plan_file);
my $dsn = sprintf('host=%s port=%d dbname=postgres user=app', $router->host, $router->port);
my $victim = 2;
my ($s_out, $s_err) = ('', '');
my $t0 = time();
my $storm = IPC::Run::start([ $py, "$peers/storm_send.py", 'send', 'wi', $dsn, $plan_file, 16, 300, $up_port ],
	'>', \$s_out, '2>', \$s_err);
sleep 4;
my $sent_before = $router->safe_psql('postgres', 'SELECT count(*) FROM sent');
$shards[$victim]->stop('fast');
my $t_stop = time();
# While it is down: an object of the stopped shard and one of another, through the router.
my ($obj_down, $obj_up) = split /\|/, rq_ok('app', qq{SELECT
	(SELECT min('o-' || k) FROM generate_series(0, 199) k WHERE webhook_ingest.shard_of('bench', 'o-' || k) = $victim),
	(SELECT min('o-' || k) FROM generate_series(0, 199) k WHERE webhook_ingest.shard_of('bench', 'o-' || k) <> $victim)});
($rc, $out, $err) = rq('app', "SELECT * FROM webhook_ingest.enqueue('bench', '$obj_down', NULL, 'probe-down')");
like($err, qr/ERROR:  08006: shard $victim of webhook_ingest_shards is unreachable/, "an object of the stopped shard: 08006 naming shard $victim");
unlike($err, qr/password|host=|port=\d/, 'the error shows no connection string');
($rc, $out, $err) = rq('app', "SELECT outcome FROM webhook_ingest.enqueue('bench', '$obj_up', NULL, 'probe-up')");
ok($out eq 'queued' || $out eq 'coalesced' || $out eq 'requeued', "an object of another shard meanwhile: accepted ($out)");
like(rq_ok('mon', 'SELECT state FROM webhook_ingest.worker_status WHERE shard = ' . $victim), qr/^unreachable$/,
	'worker_status shows the stopped shard as unreachable');
like(rq_ok('adm', 'SELECT shard || ' . "'|'" . ' || problem FROM webhook_ingest.check_shards()'), qr/^$victim\|unreachable: /,
	'check_shards lists the stopped shard as unreachable');
($rc, $out, $err) = rq('mon', q{SELECT count(*) FROM webhook_ingest.queue_stats});
like($err, qr/WARNING:  01000: shard $victim of webhook_ingest_shards is unreachable: its rows are missing/,
	'queue_stats without it: a WARNING naming the shard');
# A fan-out while it is down: the shards that ran it keep the change, the router's copy does not.
($rc, $out, $err) = rq('adm', qq{SELECT webhook_ingest.add_source('late', 'http://127.0.0.1:$up_port/posts/{external_id}')});
like($err, qr/ERROR:  08006: a shard of webhook_ingest_shards is unreachable/, 'add_source with a shard down: 08006');
is(rq_ok('adm', q{SELECT count(*) FROM webhook_ingest.sources WHERE name = 'late'}), 0, "and the router's copy is not written");
sleep 2;
my $sent_down = $router->safe_psql('postgres', 'SELECT count(*) FROM sent') - $sent_before;
$shards[$victim]->start;
my $down_s = time() - $t_stop;
$storm->finish;
my $storm_s = time() - $t0;

# The senders' retries: every failed delivery sent again, now that the shard is back.  A retry is a
# redelivery of the same event: the object changed once, when the event was first sent (storm_send.py
# bumped its version then), so a retry does not bump it again (first = f).
my %failed = map { $_ => 1 } ($s_err =~ /^delivery (\d+) failed: /mg);
my @fail_msgs = ($s_err =~ /^delivery \d+ failed: (.*)$/mg);
my $failed_n = scalar(keys %failed);
ok($failed_n > 0, "deliveries refused while shard $victim was down: $failed_n");
is(scalar(grep { !/shard $victim of webhook_ingest_shards is unreachable/ } @fail_msgs), 0,
	"every refusal names shard $victim as unreachable") or diag(join("\n", (grep { !/shard $victim/ } @fail_msgs)[0 .. 4]));
my %seq_obj = map { my @f = split /,/; ($f[0] => $f[2]) } @plan;
my $failed_objs = join(',', map { "'$seq_obj{$_}'" } keys %failed) || "'none'";
my $wrong_shard = rq_ok('app', "SELECT count(*) FROM unnest(ARRAY[$failed_objs]) o WHERE webhook_ingest.shard_of('bench', o) <> $victim");
is($wrong_shard, 0, "only objects of shard $victim were refused");
ok($sent_down > 0, "other shards' webhooks accepted while shard $victim was down: $sent_down in ~3 s");
my $retry_file = "$PostgreSQL::Test::Utils::tmp_check/retry.csv";
open my $rf, '>', $retry_file or die;
print $rf join("\n", map { s/,t$/,f/r } grep { $failed{ (split /,/)[0] } } @plan), "\n";
close $rf;
my ($r_out, $r_err) = ('', '');
IPC::Run::run([ $py, "$peers/storm_send.py", 'send', 'wi', $dsn, $retry_file, 16, 0, $up_port ], '>', \$r_out, '2>', \$r_err);
like($r_out, qr/^sent $failed_n in .* 0 failed/m, "the senders' retries after the restart: all $failed_n accepted") or diag($r_err);

# The fan-out that failed, put right by running it again.  Which shards ran it before PL/Proxy gave up is
# PL/Proxy's business; check_shards must say exactly that.
my @has_late = on_shards(q{SELECT count(*) FROM webhook_ingest.sources WHERE name = 'late'});
my @expect_late = grep { defined } ((grep { $_ } @has_late) ? ('router|missing from the router\'s copy',
	map { $has_late[$_] ? undef : "$_|missing on this shard" } 0 .. $nshards - 1) : ());
is(rq_ok('adm', q{SELECT string_agg(coalesce(shard::text, 'router') || '|' || problem, ' / ' ORDER BY shard NULLS FIRST)
	FROM webhook_ingest.check_shards() WHERE source = 'late'}), join(' / ', @expect_late),
	'after the restart check_shards shows what the failed add_source left (shards that had it: ' . join(' ', @has_late) . ')');
rq_ok('adm', qq{SELECT webhook_ingest.add_source('late', 'http://127.0.0.1:$up_port/posts/{external_id}')});
is(rq_ok('adm', q{SELECT count(*) FROM webhook_ingest.check_shards()}), 0, 'the same add_source again completes it: check_shards empty');
is(join(' ', on_shards(q{SELECT count(*) FROM webhook_ingest.sources WHERE name = 'late'})), join(' ', (1) x $nshards),
	'and every shard has the source once');

# Handled: nothing pending or running for the storm's source on any shard.
my $idle = 0;
for (1 .. 600)
{
	$idle = 1, last if 0 == eval {
		my $n = 0;
		$n += $_ for on_shards(q{SELECT count(*) FROM webhook_ingest.queue WHERE source = 'bench' AND state IN ('pending', 'running')});
		$n;
	};
	usleep(200_000);
}
ok($idle, 'every storm job handled on every shard');
sleep 1;
my $deliveries = $router->safe_psql('postgres', 'SELECT count(*) FROM sent');
is($deliveries, scalar(@plan), "every delivery of the plan accepted in the end ($deliveries)");
my %plan_events = map { ((split /,/)[1] => 1) } @plan;
my (%ev_count, $ev_wrong);
for my $i (0 .. $nshards - 1)
{
	for my $line (split /\n/, $shards[$i]->safe_psql('postgres', q{SELECT event_id FROM webhook_ingest.events WHERE source = 'bench'}))
	{
		next if $line =~ /^probe-/;
		$ev_count{$line}++;
	}
}
my $ev_multi = grep { $_ > 1 } values %ev_count;
my $ev_missing = grep { !$ev_count{$_} } keys %plan_events;
is("$ev_multi $ev_missing", '0 0', sprintf('each of %d events accepted once over the shards (accepted twice: %d, never: %d)',
	scalar(keys %plan_events), $ev_multi, $ev_missing));
my %maxv;
for my $row (split /\n/, $router->safe_psql('postgres', 'SELECT object_id, max(version) FROM sent WHERE version IS NOT NULL GROUP BY 1'))
{
	my ($o, $v) = split /\|/, $row;
	$maxv{$o} = $v;
}
my (%post, $dup_tags, $runs) = ((), 0, 0);
for my $n (@shards)
{
	for my $row (split /\n/, $n->safe_psql('postgres', 'SELECT id, version FROM posts'))
	{
		my ($o, $v) = split /\|/, $row;
		$post{$o} = $v;
	}
	$dup_tags += $n->safe_psql('postgres', 'SELECT count(*) - count(DISTINCT (post_id, tag)) FROM post_tags');
	$runs += $n->safe_psql('postgres', 'SELECT count(*) FROM runs');
}
# Each event's first delivery bumped its object's version once (retries did not): an object's final
# version upstream is the number of first deliveries about it in the plan, and its post must hold it.
my %final;
$final{ (split /,/)[2] }++ for grep { /,t$/ } @plan;
my $stale = grep { defined $post{$_} && $post{$_} != $final{$_} } keys %final;
my $stale_sent = grep { defined $post{$_} && $post{$_} < $maxv{$_} } keys %maxv;
my $lost = grep { !defined $post{$_} } keys %final;
my ($fetches, $overlaps, $obj_ovl, $max_if) = upstream_stats();
is("$stale $stale_sent $lost", '0 0 0', sprintf("no stale object, none lost (%d objects: stale %d against the upstream's final versions, %d against the versions sent, lost %d)",
	scalar(keys %final), $stale, $stale_sent, $lost));
is($overlaps, 0, "no overlapping fetch ($fetches fetches, max in flight per object $max_if)");
is($dup_tags, 0, 'no duplicate tag rows (no two handler runs of one object at once)');
my $lat = rq_ok('mon', q{SELECT jobs || ' ' || shards || ' ' || round(done_p99_ms) FROM webhook_ingest.latency WHERE source = 'bench'});
my $lat_direct = 0;
$lat_direct += $_ for on_shards(q{SELECT coalesce((SELECT jobs FROM webhook_ingest.latency WHERE source = 'bench'), 0)});
is((split / /, $lat)[0], $lat_direct, "latency on the router: jobs summed over the shards ($lat_direct)");
my $lat_max = rq_ok('mon', q{SELECT round(max(done_p99_ms)) FROM webhook_ingest.latency_by_shard WHERE source = 'bench' AND jobs > 0});
is((split / /, $lat)[2], $lat_max, "and each percentile the highest shard's (done p99 $lat_max ms)");
my $fail_rows = rq_ok('mon', qq{SELECT count(*) || ' ' || bool_and(shard = $broken_job >> 48) FROM webhook_ingest.recent_failures
	WHERE source = 'broken' AND job_id = $broken_job});
like($fail_rows, qr/^[1-9]\d* true$/, "recent_failures on the router: the failing source's attempts under its router job id $broken_job ($fail_rows)");
diag(sprintf('storm through the router: %d deliveries (%d events, 200 objects, 16 senders at 300/s) in %.1f s; shard %d down %.1f s: '
	  . '%d refused with 08006 and re-sent, %d accepted by the other shards meanwhile; %d handler runs, %d fetches, %d overlapping, '
	  . '%d stale, %d lost; latency on the router: %s (jobs, shards, done p99 ms)',
	scalar(@plan), scalar(keys %plan_events), $storm_s, $victim, $down_s, $failed_n, $sent_down, $runs, $fetches, $overlaps,
	$stale, $lost, $lat));

# Adding a shard, step 1 (README): double the partitions with the same connection strings; nothing moves.
my $old = rq_ok('app', q{SELECT e.job_id FROM webhook_ingest.enqueue('held', 'obj-7', NULL, 'before-doubling') e});
$router->safe_psql('postgres', 'ALTER SERVER webhook_ingest_shards OPTIONS (' . join(', ',
	map { sprintf "ADD p%d 'host=%s port=%d dbname=postgres'", $_ + $nshards, $shards[$_]->host, $shards[$_]->port } 0 .. $nshards - 1) . ')');
is(rq_ok('app', 'SELECT webhook_ingest.shard_count()'), 2 * $nshards, 'partitions doubled to ' . 2 * $nshards);
my $same = 1;
for my $k (1 .. 40)
{
	my ($id, $outcome) = split /\|/, rq_ok('app', qq{SELECT job_id, outcome FROM webhook_ingest.enqueue('held', 'obj-$k', NULL, 'after-doubling-$k')});
	my $local = $id % 2**48;
	my $db = int($id / 2**48) % $nshards;
	$same = 0 unless $outcome eq 'coalesced'
	  && $shards[$db]->safe_psql('postgres', "SELECT count(*) FROM webhook_ingest.queue WHERE id = $local AND external_id = 'obj-$k'") == 1;
}
ok($same, "after doubling, each of the 40 pending objects coalesces into its job on the same database (nothing moved)");
is(rq_ok('app', "SELECT state FROM webhook_ingest.job($old)"), 'pending', 'and a router id from before the doubling still resolves');

# The update from router 0.1.0 (frozen: an upgrade source) gives the catalog of a fresh install, and the
# updated router routes: a database with the landed 0.1.0, updated, beside a fresh one.
my $router_version = `sed -n 's/^ROUTER_VERSION *= *//p' Makefile`;
chomp $router_version;
my $router_catalog = join "\n---\n", map { $_ } (
	q{SELECT pg_describe_object(classid, objid, objsubid) FROM pg_depend
	   WHERE deptype = 'e' AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'webhook_ingest_router')
	   ORDER BY 1},
	q{SELECT p.oid::regprocedure::text, p.prorettype::regtype, p.proretset, p.prosecdef, p.provolatile, p.proconfig,
	         l.lanname, md5(p.prosrc), (SELECT array_agg(a::text ORDER BY a::text) FROM unnest(p.proacl) a)
	    FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
	   WHERE p.pronamespace = 'webhook_ingest'::regnamespace ORDER BY 1},
	q{SELECT c.relname, c.relkind, pg_get_viewdef(c.oid), (SELECT array_agg(a::text ORDER BY a::text) FROM unnest(c.relacl) a)
	    FROM pg_class c WHERE c.relnamespace = 'webhook_ingest'::regnamespace ORDER BY 1},
	q{SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull
	    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
	   WHERE c.relnamespace = 'webhook_ingest'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped ORDER BY 1, 2},
	q{SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest_router'});
$router->safe_psql('postgres', 'CREATE DATABASE router_fresh');
$router->safe_psql('postgres', 'CREATE DATABASE router_updated');
$router->safe_psql('router_fresh', 'CREATE EXTENSION webhook_ingest_router CASCADE');
$router->safe_psql('router_updated', q{CREATE EXTENSION plproxy; CREATE EXTENSION webhook_ingest_router VERSION '0.1.0'});
is($router->safe_psql('router_updated', q{SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest_router'}),
	'0.1.0', 'the landed router 0.1.0 still installs as it was');
$router->safe_psql('router_updated', 'ALTER EXTENSION webhook_ingest_router UPDATE');
my @fresh_cat = map { $router->safe_psql('router_fresh', $_) } split /\n---\n/, $router_catalog;
my @updated_cat = map { $router->safe_psql('router_updated', $_) } split /\n---\n/, $router_catalog;
is($fresh_cat[-1], $router_version, "a fresh router install is ROUTER_VERSION ($router_version)");
for my $i (0 .. $#fresh_cat)
{
	is($updated_cat[$i], $fresh_cat[$i], "router 0.1.0 updated to $router_version: catalog query " . ($i + 1) . ' as a fresh install');
}
$router->safe_psql('router_updated', qq{
	CREATE SERVER webhook_ingest_shards FOREIGN DATA WRAPPER plproxy OPTIONS (connection_lifetime '1800', $parts);
	CREATE USER MAPPING FOR PUBLIC SERVER webhook_ingest_shards;
	GRANT USAGE ON FOREIGN SERVER webhook_ingest_shards TO webhook_ingest_enqueue, webhook_ingest_admin, webhook_ingest_monitor;
});
my ($urc, $uout, $uerr) = ('', '', '');
$urc = $router->psql('router_updated', q{SELECT outcome FROM webhook_ingest.enqueue('held', 'obj-updated', NULL, 'updated-router')},
	stdout => \$uout, stderr => \$uerr, extra_params => [ '-U', 'app' ]);
is($uout, 'queued', "the updated router routes an enqueue ($uerr)");
is($router->safe_psql('router_updated', q{SELECT count(*) FROM webhook_ingest.worker_status WHERE state = 'running'}),
	$nshards, 'and its worker_status shows every shard');

$upstream->signal('TERM');
$upstream->finish;
$_->stop for @shards;
$router->stop;
done_testing();
