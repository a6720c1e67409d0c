# Router audit F7: close_intake (while a partition moves, README Adding a shard) was checked only by the
# wrappers enqueue and receive; an app role holds EXECUTE on the PL/Proxy functions they call
# (_enqueue_on, _receive_on: it must, PL/Proxy connects as current_user), and calling those directly
# took webhooks on the shards with the intake closed: a job left behind on the old shard of a moving
# object, the object on two shards after the move.  Fixed: the switch is checked in those functions'
# RUN ON functions, which PL/Proxy evaluates for every call.
use strict;
use warnings;
use lib 'test/t';
use AuditRouter;
use PostgreSQL::Test::Utils;
use Test::More;

my ($router, $shard) = AuditRouter::start();
AuditRouter::q_ok($router, 'postgres', 'adm', q{
	SELECT webhook_ingest.add_source('blog', 'http://127.0.0.1:18080/posts/{external_id}');
	SELECT webhook_ingest.add_source('gh', 'http://127.0.0.1:18080/posts/{external_id}', signature_scheme => 'github',
		signing_secrets => '{gh-secret}', external_id_path => '$.id');
	SELECT webhook_ingest.pause_source('blog');
	SELECT webhook_ingest.close_intake('moving partition 1');});
my ($rc, $out, $err) = AuditRouter::rq($router, 'postgres', 'app', q{SELECT * FROM webhook_ingest.enqueue('blog', 'o1')});
like($err, qr/ERROR:  57P03: the router's intake is closed/, 'enqueue with the intake closed: 57P03');
($rc, $out, $err) = AuditRouter::rq($router, 'postgres', 'app', q{SELECT outcome FROM webhook_ingest._enqueue_on('blog', 'o1', NULL, NULL)});
like($err, qr/ERROR:  57P03: the router's intake is closed/, 'its PL/Proxy function called directly: 57P03 too') or diag("accepted: $out");
($rc, $out, $err) = AuditRouter::receive_github($router, 'gh', 'gh-secret', 'd-1', '{"id":"o2"}', '_receive_on');
like($err, qr/ERROR:  57P03: the router's intake is closed/, '_receive_on called directly: 57P03') or diag("accepted: $out");
($rc, $out, $err) = AuditRouter::rq($router, 'postgres', 'app', q{SELECT outcome FROM webhook_ingest._receive_unrouted_on('gh', '{}', 'x')});
like($err, qr/ERROR:  57P03: the router's intake is closed/, '_receive_unrouted_on called directly: 57P03');
is(AuditRouter::holders($shard, 'blog', 'o1') . '|' . AuditRouter::holders($shard, 'gh', 'o2'), '|', 'no shard took anything');
AuditRouter::q_ok($router, 'postgres', 'adm', q{SELECT webhook_ingest.open_intake()});
is(AuditRouter::q_ok($router, 'postgres', 'app', q{SELECT outcome FROM webhook_ingest._enqueue_on('blog', 'o1', NULL, NULL)}),
	'queued', 'open again: taken');

$router->stop;
$shard->stop;
done_testing();
