# NOTIFY webhook_ingest_done after the job's transaction commits, and DROP
# DATABASE of the worker's database served at once with transfers in flight.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = PostgreSQL::Test::Cluster->new('notify');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.database = 'wdb'
webhook_ingest.poll_interval = 50ms
});
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE wdb');
$node->safe_psql('wdb', q{
	CREATE EXTENSION webhook_ingest;
	SELECT webhook_ingest.add_source('blog', 'http://127.0.0.1:18080/posts/{external_id}');
	SELECT webhook_ingest.add_source('stuck', 'http://127.0.0.1:18080/slow/{external_id}');
});
$node->poll_query_until('wdb',
	q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_ingest worker'})
  or die 'no worker';

# A listener hears about each job once it is done: its id, nothing more
# (audit 0.10.0 third pass, item 2: channels have no access control, so any
# role that may connect hears them; 0.9.0 sent the source and external id).
$node->safe_psql('wdb', q{CREATE ROLE nobody_listens LOGIN});
my $listener = $node->background_psql('wdb', on_error_stop => 0);
$listener->query_safe('SET ROLE nobody_listens');
$listener->query_safe('LISTEN webhook_ingest_done');
my $job = $node->safe_psql('wdb', q{SELECT job_id FROM webhook_ingest.enqueue('blog', 'n-1')});
$node->poll_query_until('wdb', qq{SELECT state = 'done' FROM webhook_ingest.jobs WHERE id = $job})
  or die 'job not done';
my $heard = '';
for (1 .. 50)
{
	$heard .= $listener->query('SELECT 1') // '';
	last if $heard =~ /webhook_ingest_done/;
	sleep 0.1;
}
like($heard, qr/Asynchronous notification "webhook_ingest_done" with payload "\{"job_id": $job\}"/,
	'NOTIFY webhook_ingest_done carries the job id alone');
unlike($heard, qr/n-1|blog/, '  a role with no grant at all learns neither the object id nor the source');
$node->psql('wdb', 'SET ROLE nobody_listens; SELECT state FROM webhook_ingest.jobs', stderr => \my $denied);
like($denied, qr/permission denied/, '  and cannot read the job it was told of');

# wait_for_job never trusts a notification: a forged one for a job still
# running (its fetch takes 5 s) changes nothing, the wait times out
my $running = $node->safe_psql('wdb', q{SELECT job_id FROM webhook_ingest.enqueue('stuck', 'w-1')});
$node->poll_query_until('wdb', qq{SELECT state = 'running' FROM webhook_ingest.jobs WHERE id = $running})
  or die 'job not running';
# (the forger sends its notifications while the waiter sleeps)
my $forger = $node->background_psql('wdb');
$forger->query_until(qr/forging/, qq{\\echo forging
SELECT pg_sleep(0.3); NOTIFY webhook_ingest_done, '{"job_id": $running}';
SELECT pg_notify('webhook_ingest_done', '{"job_id": $running, "source": "stuck", "external_id": "w-1"}');
});
is($node->safe_psql('wdb', qq{SELECT webhook_ingest.wait_for_job($running, '1500 ms')}), 'f',
	'wait_for_job of a running job returns false, forged notifications or not');
$forger->quit;
$listener->quit;
is($node->safe_psql('wdb', qq{SELECT state FROM webhook_ingest.jobs WHERE id = $running}), 'running',
	'  (the job is still running)');

# SIGHUP: switching webhook_ingest.enabled off and on takes effect on reload
$node->safe_psql('wdb', q{ALTER SYSTEM SET webhook_ingest.enabled = off; SELECT pg_reload_conf();});
sleep 1;
$node->safe_psql('wdb', q{SELECT webhook_ingest.enqueue('blog', 'h-1')});
sleep 1;
is($node->safe_psql('wdb', q{SELECT state FROM webhook_ingest.jobs WHERE external_id = 'h-1'}),
	'pending', 'after a reload with enabled = off the worker fetches nothing');
$node->safe_psql('wdb', q{ALTER SYSTEM RESET webhook_ingest.enabled; SELECT pg_reload_conf();});
ok($node->poll_query_until('wdb', q{SELECT state = 'done' FROM webhook_ingest.jobs WHERE external_id = 'h-1'}),
	'after a reload with enabled = on it does');

# transfers in flight, then DROP DATABASE WITH (FORCE) of the worker's database
$node->safe_psql('wdb', q{SELECT count(*) FROM generate_series(1, 20) i, webhook_ingest.enqueue('stuck', 's-' || i) e});
$node->poll_query_until('wdb', q{SELECT count(*) = 20 FROM webhook_ingest.jobs WHERE state = 'running' AND external_id LIKE 's-%'})
  or die 'transfers did not start';
my $t0 = time();
$node->safe_psql('postgres', 'DROP DATABASE wdb WITH (FORCE)');
my $ms = (time() - $t0) * 1000;
cmp_ok($ms, '<', 1000, sprintf('DROP DATABASE of the worker\'s database with 20 transfers in flight took %.0f ms', $ms));
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_database WHERE datname = 'wdb'}), '0', 'the database is gone');
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'and the server is still up');

$node->stop;
done_testing();
