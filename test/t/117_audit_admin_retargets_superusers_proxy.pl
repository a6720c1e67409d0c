# Audit 0.7.0 (second pass), finding P1 (test/audit/FINDINGS-0.7.0-second.md):
# only a superuser may give a source its own proxy (or '' for none: direct),
# because it goes around webhook_ingest.proxy, the superuser's egress
# barrier.  But a webhook_ingest_admin could still change the url_template
# of a source a superuser had given one (an internal API fetched directly,
# proxy => ''), and so send fetches to any host the direct path reaches.
# Expected: that alter is refused (42501) for a non-superuser; clearing the
# proxy in the same call, other changes of that source, a new url_template
# for a source without its own proxy, and a superuser's change still work.
#
# The fix is SQL, in the 0.7.0 -> 0.8.0 update script (_guard_source).
# No traffic: the worker is off.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('admin_proxy');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.enabled = off
webhook_ingest.proxy = 'http://127.0.0.1:9'
});
$node->start;
$node->safe_psql('postgres', q{CREATE EXTENSION webhook_ingest});
$node->safe_psql('postgres', q{
CREATE ROLE ops NOLOGIN;
GRANT webhook_ingest_admin TO ops;
SELECT webhook_ingest.add_source('internal', 'http://127.0.0.1:18080/posts/{external_id}', proxy => '');
SELECT webhook_ingest.add_source('own', 'http://127.0.0.1:18080/posts/{external_id}', proxy => 'http://127.0.0.1:8');
SELECT webhook_ingest.add_source('plain', 'http://127.0.0.1:18080/posts/{external_id}');
});

sub as_ops
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "SET ROLE ops; $sql", on_error_stop => 1);
	return ($ret, $err);
}

my ($ret, $err) = as_ops(q{SELECT webhook_ingest.alter_source('internal', url_template => 'http://10.9.8.7/admin/{external_id}')});
isnt($ret, 0, 'an admin cannot point a source a superuser made direct (proxy \'\') at another URL');
like($err, qr/permission denied to change the url_template of source "internal"/, '  with a message that says so');
($ret, $err) = as_ops(q{UPDATE webhook_ingest.sources SET url_template = 'http://10.9.8.7/x/{external_id}' WHERE name = 'own'});
isnt($ret, 0, '  nor, by a direct UPDATE, one a superuser gave its own proxy');
is($node->safe_psql('postgres', q{SELECT string_agg(url_template, ' ' ORDER BY name) FROM webhook_ingest.sources WHERE name IN ('internal', 'own')}),
	'http://127.0.0.1:18080/posts/{external_id} http://127.0.0.1:18080/posts/{external_id}', '  both still point where they did');

($ret, $err) = as_ops(q{SELECT webhook_ingest.alter_source('internal', timeout_ms => 2000)});
is($ret, 0, 'the admin still changes the other settings of such a source') or diag($err);
($ret, $err) = as_ops(q{SELECT webhook_ingest.alter_source('own', url_template => 'http://127.0.0.2:18080/posts/{external_id}', reset_proxy => true)});
is($ret, 0, '  and its url_template together with clearing its proxy (then webhook_ingest.proxy applies)') or diag($err);
is($node->safe_psql('postgres', q{SELECT coalesce(proxy, 'NULL') FROM webhook_ingest.sources WHERE name = 'own'}), 'NULL',
	'  (its proxy is cleared)');
($ret, $err) = as_ops(q{SELECT webhook_ingest.alter_source('plain', url_template => 'http://127.0.0.2:18080/posts/{external_id}')});
is($ret, 0, 'the admin changes the url_template of a source without a proxy of its own') or diag($err);
$node->safe_psql('postgres', q{SELECT webhook_ingest.alter_source('internal', url_template => 'http://127.0.0.2:18080/posts/{external_id}')});
pass('a superuser changes the url_template of a direct source');

$node->stop;
done_testing();
