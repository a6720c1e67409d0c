# A dump taken of 0.5.0 restores into 0.10.0: CREATE EXTENSION makes 0.10.0,
# and the dump's COPY into jobs and events (views since 0.6.0) goes through
# their INSTEAD OF triggers into queue and the ledger.  The ledger keeps a
# source's number, so the sources come first: a plain pg_restore (which
# loads events before sources) stops at the first event id, with a hint;
# restored with the sources' data moved up its list (pg_restore -L), every
# job the dump holds comes back (a running one pending, as in 0.5.0), every
# event id is still a duplicate, new job ids follow the dumped ones, and
# the worker drains the restored queue.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('restore050');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.max_databases = 4
});
$node->start;
my $tmp = PostgreSQL::Test::Utils::tempdir;

$node->safe_psql('postgres', 'CREATE DATABASE old050');
$node->safe_psql('old050', q{
	CREATE EXTENSION webhook_ingest VERSION '0.5.0';
	SELECT webhook_ingest.add_source('blog', 'http://127.0.0.1:18080/posts/{external_id}');
	SELECT webhook_ingest.pause_source('blog');       -- the 0.10.0 library's worker waits at 0.5.0 anyway
	-- (what 0.5.0's enqueue() wrote: the 0.10.0 library serves schemas from 0.9.0 on)
	INSERT INTO webhook_ingest.jobs (source, external_id, payload)
	SELECT 'blog', 'p-' || i, jsonb_build_object('n', i) FROM generate_series(1, 20) i;
	INSERT INTO webhook_ingest.events (source, event_id) SELECT 'blog', 'ev-' || i FROM generate_series(1, 20) i;
	UPDATE webhook_ingest.jobs SET state = 'dead', finished_at = now(), last_error = 'HTTP 500'
	 WHERE external_id = 'p-1';
	UPDATE webhook_ingest.jobs SET state = 'running', attempts = 1, lease_until = now() + interval '1 hour'
	 WHERE external_id = 'p-2';
	UPDATE webhook_ingest.jobs SET state = 'done', finished_at = now(), done_lsn = pg_current_wal_lsn()
	 WHERE external_id = 'p-3';
});
is($node->safe_psql('old050', q{SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest'}),
	'0.5.0', 'the source database is at 0.5.0');
my $max_id = $node->safe_psql('old050', q{SELECT max(id) FROM webhook_ingest.jobs});
$node->command_ok([ 'pg_dump', '-Fc', '-d', 'old050', '-f', "$tmp/old050.dump" ], 'pg_dump -Fc of the 0.5.0 database');

$node->safe_psql('postgres', 'CREATE DATABASE plain');
my ($out, $err) = ('', '');
IPC::Run::run([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('plain'), "$tmp/old050.dump" ],
	'>', \$out, '2>', \$err);
like($err, qr/source "blog" does not exist.*HINT:  Restore webhook_ingest.sources before/s,
	'a plain pg_restore stops at the first event id, whose source is not there yet, with a hint');
# The list with the sources' data before the event ids'.
my @toc = split /\n/, `pg_restore -l "$tmp/old050.dump"`;
my ($sources) = grep { / TABLE DATA webhook_ingest sources / } @toc;
@toc = map { / TABLE DATA webhook_ingest events / ? ($sources, $_) : $_ eq $sources ? () : $_ } @toc;
open(my $lf, '>', "$tmp/list") or die;
print $lf join("\n", @toc), "\n";
close($lf);
$node->safe_psql('postgres', 'CREATE DATABASE new060');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-L', "$tmp/list", '-d', 'new060', "$tmp/old050.dump" ],
	'the 0.5.0 dump restores into a new database (pg_restore --exit-on-error, the sources first)');
is($node->safe_psql('new060', q{SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest'}),
	'0.10.0', '  which has the current version (0.10.0)');
is($node->safe_psql('new060', q{SELECT string_agg(state || '=' || n, ',' ORDER BY state) FROM
	(SELECT state::text, count(*) n FROM webhook_ingest.queue GROUP BY 1) s}),
	'dead=1,pending=18', '  the queue holds the dumped jobs: 18 pending (the running one among them), 1 dead (done ones stay behind)');
is($node->safe_psql('new060', q{SELECT last_error FROM webhook_ingest.jobs WHERE external_id = 'p-2'}),
	'reclaimed: restored while it was running', '  the running job came back pending, as a restore makes it');
is($node->safe_psql('new060', q{SELECT count(*) FROM webhook_ingest.events}), '20',
	'  the 20 event ids are there');
is($node->safe_psql('new060', q{SELECT count(*) FROM webhook_ingest.event_ledger}), '20', '  in the ledger');
is($node->safe_psql('new060', q{SELECT outcome FROM webhook_ingest.enqueue('blog', 'p-9', NULL, 'ev-9')}),
	'duplicate', 'a redelivered event id is still a duplicate');
my $new = $node->safe_psql('new060', q{SELECT job_id FROM webhook_ingest.enqueue('blog', 'q-1', NULL, 'ev-new')});
cmp_ok($new, '>', $max_id, "a new job's id ($new) follows the dumped ones (up to $max_id)");

$node->safe_psql('new060', q{SELECT webhook_ingest.resume_source('blog')});
ok($node->poll_query_until('new060', q{SELECT count(*) = 0 FROM webhook_ingest.queue WHERE state = 'pending'}),
	'the worker drains the restored queue');
is($node->safe_psql('new060', q{SELECT count(*) FROM webhook_ingest.job_history}), '19',
	'  into job_history: the 18 restored pending jobs and the new one');
$node->stop;
done_testing();
