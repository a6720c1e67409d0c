# Router audit F5: receive() on the router parsed the body (twice: once to route, once more as PL/Proxy's
# RUN ON function) before any check, as the extension's owner: an unsigned sender's 20 MB body cost the
# router 5.6 s of CPU before the shard refused it in 0.1 s for its size (max_payload_size, checked before
# the signature there precisely to spare that work).  Fixed: the router refuses a body over
# webhook_ingest.max_payload_size (its own setting, default the shards' 1024 kB) with the shard's 54000,
# unparsed.
use strict;
use warnings;
use lib 'test/t';
use AuditRouter;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my ($router, $shard) = AuditRouter::start();
AuditRouter::q_ok($router, 'postgres', 'adm', q{SELECT webhook_ingest.add_source('gh', 'http://127.0.0.1:18080/posts/{external_id}',
	signature_scheme => 'github', signing_secrets => '{gh-secret}', external_id_path => '$.post.id')});
my $big = q{'{"post":{"id":"x"},"pad":[' || repeat('{"a":[1,2,3,"xxxxxxxx"]},', 800000) || '1]}'};
my $call = qq{SELECT * FROM webhook_ingest.receive('gh', '{"X-Hub-Signature-256": "sha256=00"}', $big)};
my $t = time();
my ($rc, $out, $err) = AuditRouter::rq($shard, 's0', 'app', $call);
my $direct = time() - $t;
like($err, qr/ERROR:  54000: body of 20000029 bytes exceeds/, sprintf('a forged 20 MB body on a shard: 54000 in %.2f s', $direct));
$t = time();
($rc, $out, $err) = AuditRouter::rq($router, 'postgres', 'app', $call);
my $routed = time() - $t;
like($err, qr/ERROR:  54000: .*body of 20000029 bytes exceeds webhook_ingest.max_payload_size \(1024 kB\)/, 'through the router: 54000 too');
ok($routed < $direct + 1.0, sprintf('and no dearer than on the shard: %.2f s against %.2f s (no parse before the size check)', $routed, $direct));
# A router set for bigger bodies passes them on (the shard then refuses with its own limit).
($rc, $out, $err) = AuditRouter::rq($router, 'postgres', 'app', "SET webhook_ingest.max_payload_size = '30MB'; $call");
like($err, qr/ERROR:  54000: shard \d: body of 20000029 bytes exceeds/, 'with the router\'s limit raised: the shard\'s own 54000');

$router->stop;
$shard->stop;
done_testing();
