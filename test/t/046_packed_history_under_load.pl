# Packing the history (0.8.0) while the worker finishes jobs, readers look
# them up by id and admins retry done ones: every job stays visible exactly
# once through the jobs view, none is lost or doubled between job_history
# and job_history_packed, and the worker packs on its own what settled a
# minute ago.  A packer session calls _pack_history with no settling time,
# over and over, so packing races the completions that fill the partition.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('packing');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.database = 'postgres'
webhook_ingest.poll_interval = 50ms
max_connections = 40
});
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION webhook_ingest;
	SELECT webhook_ingest.add_source('load', 'http://127.0.0.1:18080/posts/{external_id}');
	CREATE TABLE accepted (job_id bigint, outcome text);
});
ok($node->poll_query_until('postgres',
		q{SELECT count(*) > 0 FROM webhook_ingest._partitions('webhook_ingest.job_history')}),
	'the worker made the history partitions');

# Senders: 4 x 600 webhooks for 400 objects, a commit each.
my @senders = map {
	my $s = $node->background_psql('postgres');
	$s->query_until(qr/sending/, qq{\\echo sending
DO \$\$
BEGIN
    FOR i IN 1..600 LOOP
        INSERT INTO accepted SELECT job_id, outcome
          FROM webhook_ingest.enqueue('load', 'o' || ((i * 4 + $_) % 400), NULL, 's$_-' || i);
        COMMIT;
    END LOOP;
END
\$\$;
\\echo sent
});
	$s
} 1 .. 4;

# The packer, with no settling time, and a reader checking the view as it goes.
my $packer = $node->background_psql('postgres');
$packer->query_until(qr/packing/, q{\echo packing
DO $$
BEGIN
    FOR i IN 1..300 LOOP
        PERFORM webhook_ingest._pack_history(now(), '100 ms');
        COMMIT;
        PERFORM pg_sleep(0.02);
    END LOOP;
END
$$;
\echo packed
});
my $reader = $node->background_psql('postgres');
$reader->query_until(qr/reading/, q{\echo reading
CREATE TEMP TABLE seen (round int, total bigint, distinct_ids bigint, lookups_bad bigint);
DO $$
DECLARE
    t bigint;
    d bigint;
    bad bigint;
BEGIN
    FOR i IN 1..150 LOOP
        SELECT count(*), count(DISTINCT id) INTO t, d FROM webhook_ingest.jobs WHERE source = 'load';
        -- each done job found by id (the narrowed lookup) once
        SELECT count(*) INTO bad
          FROM (SELECT j.id FROM webhook_ingest.jobs j WHERE j.source = 'load' AND j.state = 'done'
                 ORDER BY random() LIMIT 20) s
         WHERE (SELECT count(*) FROM webhook_ingest.jobs x WHERE x.id = s.id) <> 1;
        INSERT INTO seen VALUES (i, t, d, bad);
        COMMIT;
        PERFORM pg_sleep(0.03);
    END LOOP;
END
$$;
\echo read
});
# An admin retrying done jobs meanwhile (each must come back once, done again).
my $admin = $node->background_psql('postgres');
$admin->query_until(qr/retrying/, q{\echo retrying
CREATE TABLE retried (job_id bigint);
DO $$
DECLARE
    j bigint;
BEGIN
    FOR i IN 1..40 LOOP
        SELECT id INTO j FROM webhook_ingest.jobs WHERE source = 'load' AND state = 'done' ORDER BY random() LIMIT 1;
        IF j IS NOT NULL AND webhook_ingest.retry(j) THEN
            INSERT INTO retried VALUES (j);
        END IF;
        COMMIT;
        PERFORM pg_sleep(0.1);
    END LOOP;
END
$$;
\echo retried
});

$_->query_until(qr/sent/, '') for @senders;
$reader->query_until(qr/read/, '');
$packer->query_until(qr/packed/, '');
$admin->query_until(qr/retried/, '');
is($node->safe_psql('postgres', q{SELECT count(*) FROM accepted}), '2400', 'every webhook was accepted');
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM webhook_ingest.jobs WHERE source = 'load' AND state <> 'done'}),
	'every job is done');

is($reader->query_safe(q{SELECT count(*) FROM seen WHERE total <> distinct_ids}), '0',
	'the reader never saw a job twice (150 rounds)');
is($reader->query_safe(q{SELECT coalesce(sum(lookups_bad), 0) FROM seen}), '0',
	'  and found every done job it looked up by id exactly once');
my $jobs = $node->safe_psql('postgres', q{SELECT count(DISTINCT job_id) FROM accepted});
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.jobs WHERE source = 'load'}), $jobs,
	"the view holds each of the $jobs jobs enqueue named");
is($node->safe_psql('postgres', q{
	SELECT (SELECT count(*) FROM accepted a WHERE a.job_id IS NOT NULL
	           AND NOT EXISTS (SELECT FROM webhook_ingest.jobs j WHERE j.id = a.job_id)),
	       (SELECT count(*) FROM (SELECT id FROM webhook_ingest.job_history
	                              UNION ALL SELECT unnest(ids) FROM webhook_ingest.job_history_packed) h),
	       (SELECT count(*) FROM (SELECT id FROM webhook_ingest.job_history
	                              UNION ALL SELECT unnest(ids) FROM webhook_ingest.job_history_packed) h
	         GROUP BY id HAVING count(*) > 1 LIMIT 1)}),
	"0|$jobs|", '  none missing, each done job in one of the two tables, none in both');
ok($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.job_history_packed}) > 0,
	'the history was packed');
ok($node->safe_psql('postgres', q{SELECT count(*) FROM retried}) > 0, 'done jobs were retried meanwhile');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM retried r JOIN webhook_ingest.jobs j ON j.id = r.job_id WHERE j.state = 'done'}),
	$node->safe_psql('postgres', q{SELECT count(*) FROM retried}), '  and each is done again, once');

# The worker packs on its own: 300 more jobs, and a minute later none of
# them is a row of job_history.
$node->safe_psql('postgres', q{
	SELECT webhook_ingest.enqueue('load', 'late-' || i, NULL, 'late-' || i) FROM generate_series(1, 300) i});
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 300 FROM webhook_ingest.jobs WHERE external_id LIKE 'late-%' AND state = 'done'}),
	'300 more jobs done');
my $done_at = time;
my $packed = 0;
for (1 .. 150)
{
	$packed = $node->safe_psql('postgres', q{
		SELECT count(*) FROM webhook_ingest.job_history_packed p, unnest(p.external_ids) e WHERE e LIKE 'late-%'});
	last if $packed == 300;
	sleep 1;
}
is($packed, 300, 'the worker packed them once they had settled for a minute');
note sprintf('packed %d s after they were done', time - $done_at);
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.jobs WHERE external_id LIKE 'late-%'}),
	'300', '  and the view shows each once');

$_->quit for @senders, $packer, $reader, $admin;
unlike(slurp_file($node->logfile), qr/ERROR|FATAL|PANIC/, 'no error in the server log');
$node->stop;
done_testing();
