# Router audit F6: the router's whole privilege model is that each role reaches the shards as itself
# (PL/Proxy appends user=current_user), but nothing checked that it does: the PUBLIC user mapping with
# a user option (the postgres_fdw habit), a pN option holding "user=" anywhere, or the server option
# default_user makes every role act on the shards as one role, possibly a superuser, and check_shards
# said all was well.  Fixed: check_shards asks each shard who the caller is and reports a shard that
# sees another role.
use strict;
use warnings;
use lib 'test/t';
use AuditRouter;
use PostgreSQL::Test::Utils;
use Test::More;

my ($router, $shard) = AuditRouter::start();
AuditRouter::q_ok($router, 'postgres', 'adm', q{SELECT webhook_ingest.add_source('blog', 'http://127.0.0.1:18080/posts/{external_id}')});
is(AuditRouter::q_ok($router, 'postgres', 'adm', q{SELECT count(*) FROM webhook_ingest.check_shards()}), 0, 'set up as README says: no rows');
# (A role's own mapping naming another user is refused outright: TAP 157.  This is the operator's PUBLIC one.)
$router->safe_psql('postgres', q{ALTER USER MAPPING FOR PUBLIC SERVER webhook_ingest_shards OPTIONS (ADD user 'postgres')});
is(AuditRouter::q_ok($router, 'postgres', 'adm', q{SELECT string_agg(shard || ': ' || problem, E'\n' ORDER BY shard) FROM webhook_ingest.check_shards()}),
	join("\n", map { "$_: connects as role postgres, not as the calling role adm: a user in its pN option or in the user mapping, or a default_user option (every role then acts on the shard as that one)" } 0, 1),
	'the PUBLIC user mapping with a user option: check_shards names each shard that sees the caller as postgres');
$router->safe_psql('postgres', q{ALTER USER MAPPING FOR PUBLIC SERVER webhook_ingest_shards OPTIONS (DROP user)});
$router->safe_psql('postgres', sprintf(q{ALTER SERVER webhook_ingest_shards OPTIONS (SET p1 'host=%s port=%d dbname=s1 application_name=router_user=1')},
	$shard->host, $shard->port));
like(AuditRouter::q_ok($router, 'postgres', 'adm', q{SELECT shard || ': ' || problem FROM webhook_ingest.check_shards()}),
	qr/^1: connects as role postgres, not as the calling role adm/, 'a p1 option holding "user=": shard 1 named (PL/Proxy appended no user)');

$router->stop;
$shard->stop;
done_testing();
