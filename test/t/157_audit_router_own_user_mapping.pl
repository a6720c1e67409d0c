# Router audit F0: every role with USAGE on the server webhook_ingest_shards (README grants it to every
# app, admin and monitor: PL/Proxy requires it) may CREATE USER MAPPING FOR itself, and PL/Proxy takes a
# role's own mapping before the PUBLIC one.  A mapping with OPTIONS (user 'postgres') made every routed
# call of that role run on the shards as postgres (a superuser wherever the shards trust the router's
# host, as README's loopback set-up and the tests do): an app refused by a source's enqueue_roles
# enqueued into it and read every job; an admin set a source's proxy, which only superusers may.
# Fixed: every remote call's RUN ON function (evaluated before PL/Proxy connects) refuses a caller
# whose own mapping names another user (42501).
use strict;
use warnings;
use lib 'test/t';
use AuditRouter;
use PostgreSQL::Test::Utils;
use Test::More;

my ($router, $shard) = AuditRouter::start();
$router->safe_psql('postgres', 'CREATE ROLE outsider LOGIN IN ROLE webhook_ingest_enqueue');
$shard->safe_psql('postgres', 'CREATE ROLE outsider LOGIN');
$shard->safe_psql($_, 'GRANT webhook_ingest_enqueue TO outsider') for qw(s0 s1);
AuditRouter::q_ok($router, 'postgres', 'adm', q{
	SELECT webhook_ingest.add_source('private', 'http://127.0.0.1:18080/posts/{external_id}', enqueue_roles => '{app}');
	SELECT webhook_ingest.pause_source('private');});
my $job = AuditRouter::q_ok($router, 'postgres', 'app', q{SELECT job_id FROM webhook_ingest.enqueue('private', 'p-1')});
my ($rc, $out, $err) = AuditRouter::rq($router, 'postgres', 'outsider', q{SELECT * FROM webhook_ingest.enqueue('private', 'p-2')});
like($err, qr/ERROR:  42501: shard \d: /, "outsider, refused by the source's enqueue_roles: the shard's 42501");

# The app role maps itself to postgres.
AuditRouter::q_ok($router, 'postgres', 'outsider', q{CREATE USER MAPPING FOR outsider SERVER webhook_ingest_shards OPTIONS (user 'postgres')});
($rc, $out, $err) = AuditRouter::rq($router, 'postgres', 'outsider', q{SELECT outcome FROM webhook_ingest.enqueue('private', 'p-2')});
like($err, qr/ERROR:  42501: the user mapping of role outsider on webhook_ingest_shards names user postgres/,
	'with its own user mapping naming postgres: refused on the router (42501)') or diag("accepted: $out");
($rc, $out, $err) = AuditRouter::rq($router, 'postgres', 'outsider', "SELECT count(*) FROM webhook_ingest.job($job)");
like($err, qr/ERROR:  42501: the user mapping/, "job() of another app's job: refused too") or diag("got: $out");
($rc, $out, $err) = AuditRouter::rq($router, 'postgres', 'outsider', q{SELECT * FROM webhook_ingest._enqueue_on('private', 'p-3', NULL, NULL)});
like($err, qr/ERROR:  42501: the user mapping/, 'its PL/Proxy function called directly: refused');
is(AuditRouter::holders($shard, 'private', 'p-2') . AuditRouter::holders($shard, 'private', 'p-3'), '', 'no shard took p-2 or p-3');

# An admin maps itself to postgres: a source's proxy is for superusers only.
AuditRouter::q_ok($router, 'postgres', 'adm', q{CREATE USER MAPPING FOR adm SERVER webhook_ingest_shards OPTIONS (user 'postgres')});
($rc, $out, $err) = AuditRouter::rq($router, 'postgres', 'adm', q{SELECT webhook_ingest.alter_source('private', proxy => '')});
like($err, qr/ERROR:  42501: the user mapping of role adm/, "an admin with its own mapping to postgres: alter_source refused");
is(join(',', map { $shard->safe_psql($_, q{SELECT coalesce(proxy, 'none') FROM webhook_ingest.sources WHERE name = 'private'}) } qw(s0 s1)),
	'none,none', "no shard's source got a proxy");
($rc, $out, $err) = AuditRouter::rq($router, 'postgres', 'adm', q{SELECT * FROM webhook_ingest._pause_source_all('private')});
like($err, qr/ERROR:  42501: the user mapping/, 'a fan-out function called directly: refused');
AuditRouter::q_ok($router, 'postgres', 'adm', q{DROP USER MAPPING FOR adm SERVER webhook_ingest_shards});
is(AuditRouter::q_ok($router, 'postgres', 'adm', q{SELECT count(*) FROM webhook_ingest.check_shards()}), 0, 'its mapping dropped: the admin works as itself again');

$router->stop;
$shard->stop;
done_testing();
