# CREATE EXTENSION in any database (the fresh install script
# webhook_ingest--0.10.0.sql, a copy of the hand-kept sql/webhook_ingest.sql),
# and a fresh 0.10.0 install the same, catalog for catalog, as 0.1.0 updated
# step by step to 0.10.0, and as the landed 0.3.0, 0.4.0, 0.5.0, 0.6.0, 0.7.0,
# 0.8.0 and 0.9.0 installs (webhook_ingest--0.3.0.sql ... --0.9.0.sql, still
# generated from their chains) updated to 0.10.0.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('install');
$node->init;
# 0.1.0 refuses any database but webhook_ingest.database: 'upgraded' for it.
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.database = 'upgraded'
webhook_ingest.enabled = off
});
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('postgres', 'CREATE DATABASE upgraded');
$node->safe_psql('postgres', 'CREATE DATABASE from_030');
$node->safe_psql('postgres', 'CREATE DATABASE from_040');
$node->safe_psql('postgres', 'CREATE DATABASE from_050');
$node->safe_psql('postgres', 'CREATE DATABASE from_060');
$node->safe_psql('postgres', 'CREATE DATABASE from_070');
$node->safe_psql('postgres', 'CREATE DATABASE from_080');
$node->safe_psql('postgres', 'CREATE DATABASE from_090');
my ($ret, $out, $err) = $node->psql('fresh', 'CREATE EXTENSION webhook_ingest');
is($ret, 0, 'CREATE EXTENSION succeeds in a database other than webhook_ingest.database');
is($node->safe_psql('fresh', q{SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest'}),
	'0.10.0', 'a fresh install is 0.10.0');
$node->safe_psql('from_030', q{CREATE EXTENSION webhook_ingest VERSION '0.3.0'});
is($node->safe_psql('from_030', q{SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest'}),
	'0.3.0', 'the landed 0.3.0 still installs as it was');
$node->safe_psql('from_030', q{ALTER EXTENSION webhook_ingest UPDATE});
$node->safe_psql('from_040', q{CREATE EXTENSION webhook_ingest VERSION '0.4.0'});
is($node->safe_psql('from_040', q{SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest'}),
	'0.4.0', 'the landed 0.4.0 still installs as it was');
$node->safe_psql('from_040', q{ALTER EXTENSION webhook_ingest UPDATE});
$node->safe_psql('from_050', q{CREATE EXTENSION webhook_ingest VERSION '0.5.0'});
is($node->safe_psql('from_050', q{SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest'}),
	'0.5.0', 'the landed 0.5.0 still installs as it was');
$node->safe_psql('from_050', q{ALTER EXTENSION webhook_ingest UPDATE});
$node->safe_psql('from_060', q{CREATE EXTENSION webhook_ingest VERSION '0.6.0'});
is($node->safe_psql('from_060', q{SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest'}),
	'0.6.0', 'the landed 0.6.0 still installs as it was');
$node->safe_psql('from_060', q{ALTER EXTENSION webhook_ingest UPDATE});
$node->safe_psql('from_070', q{CREATE EXTENSION webhook_ingest VERSION '0.7.0'});
is($node->safe_psql('from_070', q{SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest'}),
	'0.7.0', 'the landed 0.7.0 still installs as it was');
$node->safe_psql('from_070', q{ALTER EXTENSION webhook_ingest UPDATE});
$node->safe_psql('from_080', q{CREATE EXTENSION webhook_ingest VERSION '0.8.0'});
is($node->safe_psql('from_080', q{SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest'}),
	'0.8.0', 'the landed 0.8.0 still installs as it was');
$node->safe_psql('from_080', q{ALTER EXTENSION webhook_ingest UPDATE});
$node->safe_psql('from_090', q{CREATE EXTENSION webhook_ingest VERSION '0.9.0'});
is($node->safe_psql('from_090', q{SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest'}),
	'0.9.0', 'the landed 0.9.0 still installs as it was');
$node->safe_psql('from_090', q{ALTER EXTENSION webhook_ingest UPDATE});
$node->safe_psql('upgraded', q{CREATE EXTENSION webhook_ingest VERSION '0.1.0'});
# An old version: its worker waits (0.1.0's worker_status, one row, still works).
ok($node->poll_query_until('upgraded',
		q{SELECT state = 'waiting for ALTER EXTENSION webhook_ingest UPDATE' FROM webhook_ingest.worker_status}),
	'at 0.1.0 the worker waits for ALTER EXTENSION UPDATE');
$node->safe_psql('upgraded', q{
	ALTER EXTENSION webhook_ingest UPDATE TO '0.2.0';
	ALTER EXTENSION webhook_ingest UPDATE TO '0.3.0';
	ALTER EXTENSION webhook_ingest UPDATE TO '0.4.0';
	ALTER EXTENSION webhook_ingest UPDATE TO '0.5.0';
	ALTER EXTENSION webhook_ingest UPDATE TO '0.6.0';
	ALTER EXTENSION webhook_ingest UPDATE TO '0.7.0';
	ALTER EXTENSION webhook_ingest UPDATE TO '0.8.0';
	ALTER EXTENSION webhook_ingest UPDATE TO '0.9.0';
	ALTER EXTENSION webhook_ingest UPDATE TO '0.10.0';
});
ok($node->poll_query_until('upgraded',
		q{SELECT state = 'disabled' FROM webhook_ingest.worker_status WHERE database = 'upgraded'}),
	'once updated (no other step) the worker goes on at once');

# What the extension is made of, as text that does not depend on OIDs (sorted by
# name: the fresh install, sql/webhook_ingest.sql, creates them in another order).
my @catalog = (
	q{SELECT pg_describe_object(classid, objid, objsubid) FROM pg_depend
	   WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
	     AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'webhook_ingest') ORDER BY 1},
	q{SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
	         a.attisdropped, a.attcollation::regcollation, pg_get_expr(d.adbin, d.adrelid), a.attacl
	    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
	    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
	   WHERE c.relnamespace = 'webhook_ingest'::regnamespace AND a.attnum > 0 ORDER BY 1, 2},
	q{SELECT relname, relkind, relacl, relrowsecurity, reloptions,
	         CASE WHEN relkind = 'v' THEN pg_get_viewdef(oid) END
	    FROM pg_class WHERE relnamespace = 'webhook_ingest'::regnamespace ORDER BY 1},
	q{SELECT indexrelid::regclass, pg_get_indexdef(indexrelid) FROM pg_index
	   WHERE indrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'webhook_ingest'::regnamespace) ORDER BY indexrelid::regclass::text},
	q{SELECT conrelid::regclass, contypid::regtype, conname, pg_get_constraintdef(oid) FROM pg_constraint
	   WHERE connamespace = 'webhook_ingest'::regnamespace ORDER BY conrelid::regclass::text, contypid::regtype::text, 3},
	q{SELECT tgrelid::regclass, tgname, pg_get_triggerdef(oid), tgenabled FROM pg_trigger
	   WHERE NOT tgisinternal
	     AND tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'webhook_ingest'::regnamespace) ORDER BY tgrelid::regclass::text, 2},
	q{SELECT polrelid::regclass, polname, polcmd, polpermissive, polroles::regrole[],
	         pg_get_expr(polqual, polrelid), pg_get_expr(polwithcheck, polrelid)
	    FROM pg_policy ORDER BY polrelid::regclass::text, 2},
	q{SELECT p.oid::regprocedure, p.proacl, p.prosecdef, p.provolatile, p.proconfig,
	         CASE WHEN p.prokind <> 'a' THEN pg_get_functiondef(p.oid) END
	    FROM pg_proc p WHERE p.pronamespace = 'webhook_ingest'::regnamespace ORDER BY p.oid::regprocedure::text},
	q{SELECT t.typname, e.enumsortorder, e.enumlabel FROM pg_enum e JOIN pg_type t ON t.oid = e.enumtypid
	   WHERE t.typnamespace = 'webhook_ingest'::regnamespace ORDER BY 1, 2},
	q{SELECT t.typname, t.typtype, t.typacl FROM pg_type t
	   WHERE t.typnamespace = 'webhook_ingest'::regnamespace ORDER BY 1},
	q{SELECT pg_describe_object(classoid, objoid, objsubid), description FROM pg_description
	   WHERE objoid IN (SELECT objid FROM pg_depend
	                     WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
	                       AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'webhook_ingest'))
	   ORDER BY 1},
	q{SELECT nspacl FROM pg_namespace WHERE nspname = 'webhook_ingest'},
	q{SELECT extversion, (SELECT array_agg(c::regclass ORDER BY c::regclass::text) FROM unnest(extconfig) c),
	         (SELECT array_agg(x ORDER BY x) FROM unnest(extcondition) x)
	    FROM pg_extension WHERE extname = 'webhook_ingest'},
);
my $i = 0;
for my $sql (@catalog)
{
	$i++;
	my $f = $node->safe_psql('fresh', $sql);
	my $u = $node->safe_psql('upgraded', $sql);
	ok($f ne '', "catalog query $i finds something");
	is($f, $u, "catalog query $i: a fresh install and an updated one are the same");
	is($f, $node->safe_psql('from_030', $sql), "catalog query $i: a fresh install and 0.3.0 updated are the same");
	is($f, $node->safe_psql('from_040', $sql), "catalog query $i: a fresh install and 0.4.0 updated are the same");
	is($f, $node->safe_psql('from_050', $sql), "catalog query $i: a fresh install and 0.5.0 updated are the same");
	is($f, $node->safe_psql('from_060', $sql), "catalog query $i: a fresh install and 0.6.0 updated are the same");
	is($f, $node->safe_psql('from_070', $sql), "catalog query $i: a fresh install and 0.7.0 updated are the same");
	is($f, $node->safe_psql('from_080', $sql), "catalog query $i: a fresh install and 0.8.0 updated are the same");
	is($f, $node->safe_psql('from_090', $sql), "catalog query $i: a fresh install and 0.9.0 updated are the same");
}

unlike(slurp_file($node->logfile), qr/FATAL/, 'no FATAL in the log: no extension, an old version, an update');
$node->stop;
done_testing();
