# Issue 28 (audit of the packing fix, test/audit/FINDINGS-0.10.0-packing.md, finding 1): an expired partition of
# job_history that an app role pins (a view naming it by a regclass
# constant: it cannot be dropped) does not make the storage round make its
# packed partition again and again.  Before, each round dropped the expired
# packed partition, made it again for the pinned one ('made': behind), and
# the worker ran rounds back to back (495 rounds in 20 s instead of 38).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('pinned');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.database = 'postgres'
webhook_ingest.enabled = off
webhook_ingest.retention = 90s
});
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION webhook_ingest;
	CREATE ROLE app LOGIN IN ROLE webhook_ingest_enqueue;
	CREATE SCHEMA apps AUTHORIZATION app;
	SELECT webhook_ingest.add_source('s1', 'http://127.0.0.1:9/{external_id}');
	SELECT webhook_ingest._ensure_partitions('webhook_ingest.job_history', now() - interval '10 minutes', now());
});
my $oldest = $node->safe_psql('postgres',
	q{SELECT name FROM webhook_ingest._partitions('webhook_ingest.job_history') ORDER BY lower_bound LIMIT 1});
$node->safe_psql('postgres', qq{CREATE VIEW apps.pin AS SELECT 'webhook_ingest.$oldest'::regclass AS r},
	extra_params => ['-U', 'app']);

my @rounds = map {
	$node->safe_psql('postgres', q{
		SET client_min_messages = error;
		SELECT behind FROM webhook_ingest._maintain_storage();
		SELECT coalesce(string_agg(p.name || '=' || c.oid, ',' ORDER BY p.name), 'none')
		  FROM webhook_ingest._partitions('webhook_ingest.job_history_packed') p JOIN pg_class c ON c.relname = p.name})
} 1 .. 6;
s/\n/ / for @rounds;
ok($node->safe_psql('postgres', qq{SELECT to_regclass('webhook_ingest.$oldest') IS NOT NULL}) eq 't',
	"the pinned partition $oldest stays");
is(scalar(grep { /^t / } @rounds[1 .. 5]), 0, '  and the rounds after the first are not behind')
  or diag(join("\n", @rounds));
is(scalar(keys %{ { map { (split / /)[1] => 1 } @rounds[1 .. 5] } }), 1,
	'  nor make a packed partition again each round (the same packed partitions in rounds 2 to 6)')
  or diag(join("\n", @rounds));
$node->stop;
done_testing();
