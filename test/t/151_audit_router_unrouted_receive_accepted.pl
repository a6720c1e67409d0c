# Router audit F2: receive() for a webhook whose object id the router cannot find with its copy of the
# source sent it to partition 0 "for the shard's error", but shard 0 ACCEPTED it whenever the shards'
# definition finds an id: whenever the router's copy is behind the shards.  That happens in the normal
# course of source administration: the copy is written last, in the admin's transaction, after every
# shard committed (an add_source or alter_source fan-out that failed midway leaves it unwritten; one
# that succeeded leaves it uncommitted until the admin commits).  Meanwhile every signed webhook of the
# source went to shard 0, whatever its object's partition; once the copy caught up, the same objects
# went to their own shard: one object pending on two shards (two fetches at once, a delivery accepted
# twice: dedup, coalescing and the no-concurrent-fetch guarantee gone).  Fixed: a webhook the router
# cannot route still goes to partition 0 for the shard's own checks (signature first, then body and
# id), but a shard that would take it has its statement fail and the router refuses it (57P03, which apps answer with 503: the sender retries).
use strict;
use warnings;
use lib 'test/t';
use AuditRouter;
use PostgreSQL::Test::Utils;
use Test::More;

my ($router, $shard) = AuditRouter::start();
my $up = 'http://127.0.0.1:18080/posts/{external_id}';

# (a) The source on the shards but not in the router's copy: what add_source leaves when its
# fan-out failed after the shards committed (check_shards: "missing from the router's copy").
$shard->safe_psql($_, qq{SELECT webhook_ingest.add_source('gh', '$up', signature_scheme => 'github',
	signing_secrets => '{gh-secret}', external_id_path => '\$.id')}) for qw(s0 s1);
my $id = AuditRouter::id_on($router, 'gh', 1);
like(AuditRouter::q_ok($router, 'postgres', 'adm', q{SELECT source || ': ' || problem FROM webhook_ingest.check_shards()}),
	qr/^gh: missing from the router's copy$/m, 'check_shards: gh missing from the router\'s copy');
my ($rc, $out, $err) = AuditRouter::receive_github($router, 'gh', 'gh-secret', 'd-1', qq{{"id":"$id"}});
like($err, qr/ERROR:  57P03: the router cannot route this webhook of source "gh"/, "a signed webhook of a source missing from the router's copy: refused (57P03: 503, the sender retries)")
  or diag("accepted: $out");
is(AuditRouter::holders($shard, 'gh', $id), '', "no shard took it (its partition is 1: shard 0 must not)");
($rc, $out, $err) = AuditRouter::receive_github($router, 'gh', 'wrong', 'd-2', qq{{"id":"$id"}});
like($err, qr/ERROR:  28000: shard 0: webhook signature verification failed/, 'a forged one: still the shard\'s 28000');
($rc, $out, $err) = AuditRouter::receive_github($router, 'gh', 'gh-secret', 'd-3', 'not json');
like($err, qr/ERROR:  22P02: shard 0: webhook body is not valid JSON/, 'a signed body that is not JSON: still the shard\'s 22P02');

# (b) alter_source giving a source its first external_id_path, the admin's transaction still open.
AuditRouter::q_ok($router, 'postgres', 'adm', qq{SELECT webhook_ingest.add_source('hub', '$up',
	signature_scheme => 'github', signing_secrets => '{hub-secret}')});
my $hid = AuditRouter::id_on($router, 'hub', 1);
my $admin = $router->background_psql('postgres', extra_params => [ '-U', 'adm' ]);
$admin->query_safe(q{BEGIN; SELECT webhook_ingest.alter_source('hub', external_id_path => '$.id')});
($rc, $out, $err) = AuditRouter::receive_github($router, 'hub', 'hub-secret', 'h-1', qq{{"id":"$hid"}});
like($err, qr/ERROR:  57P03: /, 'a webhook while the admin\'s alter_source is uncommitted: refused (57P03)')
  or diag("accepted: $out");
$admin->query_safe('COMMIT');
$admin->quit;
($rc, $out, $err) = AuditRouter::receive_github($router, 'hub', 'hub-secret', 'h-1', qq{{"id":"$hid"}});
like($out, qr/^\d+ queued$/, 'the same delivery once the copy is committed: queued');
is(int((split / /, $out)[0] / 2**48), 1, 'on partition 1, its object\'s');
is(AuditRouter::holders($shard, 'hub', $hid), 's1', "the object is on its own shard only (two shards: two fetches at once)");
is($shard->safe_psql('s1', q{SELECT count(*) FROM webhook_ingest.events WHERE source = 'hub' AND event_id = 'h-1'})
	 + $shard->safe_psql('s0', q{SELECT count(*) FROM webhook_ingest.events WHERE source = 'hub' AND event_id = 'h-1'}),
	1, 'the delivery accepted once over the shards');

$router->stop;
$shard->stop;
done_testing();
