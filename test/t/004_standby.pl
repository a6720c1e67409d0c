# On a standby the worker does nothing; after promotion it works the queue.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
# The primary's worker is switched off, so the jobs below wait for the standby.
$primary->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.enabled = off
webhook_ingest.poll_interval = 50ms
});
$primary->start;
$primary->safe_psql('postgres', q{
	CREATE EXTENSION webhook_ingest;
	SELECT webhook_ingest.add_source('blog', 'http://127.0.0.1:18080/posts/{external_id}');
	SELECT count(*) FROM generate_series(1, 20) i, webhook_ingest.enqueue('blog', 'p' || i) e;
});
$primary->backup('b');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->append_conf('postgresql.conf', 'webhook_ingest.enabled = on');
$standby->start;
$primary->wait_for_catchup($standby);

sleep 2;
is($standby->safe_psql('postgres',
	q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'}),
	'0', 'no worker runs on the standby');
is($standby->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.jobs WHERE state = 'pending'}),
	'20', 'the standby sees the jobs, still pending');

$primary->stop;
$standby->promote;
$standby->poll_query_until('postgres',
	q{SELECT count(*) = 20 FROM webhook_ingest.jobs WHERE state = 'done'})
  or diag($standby->safe_psql('postgres', 'SELECT state, count(*) FROM webhook_ingest.jobs GROUP BY 1'));
is($standby->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.jobs WHERE state = 'done'}),
	'20', 'after promotion the worker fetched every job');
is($standby->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.documents}),
	'20', 'and stored the documents on the new primary');

$standby->stop;
done_testing();
