# Router audit F3: the router looked for the object id with jsonb_path_query_first(body, path), which
# raises on a structural error of a strict path, and routed any error to partition 0; the shard looks
# with silent => true, which returns what was found before the error.  A signed body with one item of
# the wrong shape (strict $.items[*].id over [{"id": X}, 5]) was routed to shard 0 and queued there,
# whatever X's partition: the object on the wrong shard (and on its own one by enqueue or the next
# webhook).  Fixed: the router's lookup is the shard's (silent).
use strict;
use warnings;
use lib 'test/t';
use AuditRouter;
use PostgreSQL::Test::Utils;
use Test::More;

my ($router, $shard) = AuditRouter::start();
AuditRouter::q_ok($router, 'postgres', 'adm', q{SELECT webhook_ingest.add_source('gh', 'http://127.0.0.1:18080/posts/{external_id}',
	signature_scheme => 'github', signing_secrets => '{gh-secret}', external_id_path => 'strict $.items[*].id');
	SELECT webhook_ingest.pause_source('gh');});
my $id = AuditRouter::id_on($router, 'gh', 1);
my ($rc, $out, $err) = AuditRouter::receive_github($router, 'gh', 'gh-secret', 'd-1', qq{{"items":[{"id":"$id"},5]}});
like($out, qr/^\d+ queued$/, 'a signed body whose strict path errs after the first id: queued') or diag($err);
is(int(((split / /, $out)[0] // 0) / 2**48), 1, "on partition 1, the partition of $id");
is(AuditRouter::holders($shard, 'gh', $id), 's1', 'and only there');
($rc, $out, $err) = AuditRouter::receive_github($router, 'gh', 'gh-secret', 'd-2', qq{{"items":[{"id":"$id"}]}});
like($out, qr/^\d+ coalesced$/, 'the next webhook of the object coalesces into that job');

$router->stop;
$shard->stop;
done_testing();
