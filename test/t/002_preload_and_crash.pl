# The library must be preloaded; and what enqueue() committed survives an
# immediate shutdown (a crash) while what it had not committed leaves no trace.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# Without shared_preload_libraries: a clear error with a hint.
my $plain = PostgreSQL::Test::Cluster->new('plain');
$plain->init;
$plain->start;
my ($ret, $out, $err) = $plain->psql('postgres', 'CREATE EXTENSION webhook_ingest');
isnt($ret, 0, 'CREATE EXTENSION fails without shared_preload_libraries');
like($err, qr/webhook_ingest must be loaded via shared_preload_libraries/, 'the error says why');
like($err, qr/HINT:\s+Add webhook_ingest to shared_preload_libraries/, 'and how to fix it');
$plain->stop;

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init;
# Intake alone: the worker serves app but claims nothing.
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.database = 'app'
webhook_ingest.enabled = off
});
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE app');
# Since 0.3.0 the extension may live in any database; webhook_ingest.database
# only decides which get a worker.
($ret, $out, $err) = $node->psql('postgres', 'CREATE EXTENSION webhook_ingest');
is($ret, 0, 'CREATE EXTENSION succeeds in a database webhook_ingest.database leaves out');
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.worker_status WHERE role = 'fetcher' AND database = 'postgres'}),
	'0', 'and that database gets no worker');
$node->safe_psql('app', 'CREATE EXTENSION webhook_ingest');
$node->safe_psql('app', q{
	SELECT webhook_ingest.add_source('crash', 'http://127.0.0.1:9/o/{external_id}');
	SELECT count(*) FROM (SELECT webhook_ingest.enqueue('crash', 'obj-' || i, NULL, 'ev-' || i)
	                        FROM generate_series(1, 100) i) s;
});

# A transaction that enqueued but had not committed when the server went down.
my $open = $node->background_psql('app');
$open->query_safe(q{BEGIN});
$open->query_safe(q{SELECT webhook_ingest.enqueue('crash', 'obj-uncommitted', NULL, 'ev-uncommitted')});
$node->stop('immediate');
$open->quit;
$node->start;

is($node->safe_psql('app', q{SELECT count(*) FROM webhook_ingest.jobs WHERE state = 'pending'}),
	'100', 'every committed job survived the crash');
is($node->safe_psql('app', q{SELECT count(*) FROM webhook_ingest.events}),
	'100', 'every committed event id survived the crash');
is($node->safe_psql('app', q{SELECT outcome FROM webhook_ingest.enqueue('crash', 'obj-7', NULL, 'ev-7')}),
	'duplicate', 'a redelivery after the crash is still a duplicate');
is($node->safe_psql('app', q{SELECT outcome FROM webhook_ingest.enqueue('crash', 'obj-uncommitted', NULL, 'ev-uncommitted')}),
	'queued', 'the uncommitted delivery left nothing behind');

$node->stop;
done_testing();
