# Adding a shard behind webhook_ingest_router (README, Scaling out: Adding a shard), both steps:
#   1. two shards, partitions doubled to four with repeated connection strings: nothing moves;
#   2. a third database, partition 3 pointed at it, the intake closed, move_partition(3, 1): partition 3's
#      pending jobs (payloads kept) and shard 1's dedup ledger on the new database, cancelled on shard 1,
#      the new database's job ids above shard 1's; then through the router: a redelivery of a moved
#      object's event is a duplicate, a new webhook for it coalesces into its moved job, the objects of
#      partition 1 stayed, check_shards is empty.  move_partition refuses while the intake is open and
#      while the partitions share a database; run again, it moves nothing twice.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# The router needs PL/Proxy (postgresql-NN-plproxy).
{
	my $pg_config = $ENV{PG_CONFIG} // 'pg_config';
	chomp(my $share = `$pg_config --sharedir`);
	plan skip_all => "PL/Proxy is not installed in $share" unless -f "$share/extension/plproxy.control";
}

my @dbs;
for my $name (qw(split0 split1 split_new))
{
	my $n = PostgreSQL::Test::Cluster->new($name);
	$n->init;
	$n->append_conf('postgresql.conf', "shared_preload_libraries = 'webhook_ingest'\nmax_connections = 40\n");
	$n->start;
	# Paused: nothing is fetched, so every job stays pending where it is.
	$n->safe_psql('postgres', q{
		CREATE EXTENSION webhook_ingest;
		CREATE ROLE app LOGIN IN ROLE webhook_ingest_enqueue;
		SELECT webhook_ingest.add_source('held', 'http://127.0.0.1:1/posts/{external_id}');
		SELECT webhook_ingest.pause_source('held');
	});
	push @dbs, $n;
}
my $connstr = sub { sprintf "host=%s port=%d dbname=postgres", $_[0]->host, $_[0]->port };
my $router = PostgreSQL::Test::Cluster->new('split_router');
$router->init;
$router->start;
$router->safe_psql('postgres', sprintf(q{
	CREATE EXTENSION webhook_ingest_router CASCADE;
	CREATE ROLE app LOGIN IN ROLE webhook_ingest_enqueue;
	CREATE SERVER webhook_ingest_shards FOREIGN DATA WRAPPER plproxy OPTIONS (p0 '%s', p1 '%s');
	CREATE USER MAPPING FOR PUBLIC SERVER webhook_ingest_shards;
	GRANT USAGE ON FOREIGN SERVER webhook_ingest_shards TO webhook_ingest_enqueue;
	INSERT INTO webhook_ingest.sources (name) VALUES ('held');
}, $connstr->($dbs[0]), $connstr->($dbs[1])));
sub r { return $router->safe_psql('postgres', $_[0]); }
sub r_err
{
	my ($out, $err) = ('', '');
	$router->psql('postgres', "\\set VERBOSITY verbose\n$_[0]", stdout => \$out, stderr => \$err);
	return $err;
}

# 60 objects with a payload and an event id each, on two shards.
r(q{SELECT webhook_ingest.enqueue('held', 'o-' || k, jsonb_build_object('k', k), 'ev-' || k) FROM generate_series(1, 60) k});
my %hash = map { split /\|/ } split /\n/, r(q{SELECT 'o-' || k, webhook_ingest.shard_hash('held', 'o-' || k) FROM generate_series(1, 60) k});
my @moving = sort grep { ($hash{$_} & 3) == 3 } keys %hash;
my @staying1 = sort grep { ($hash{$_} & 3) == 1 } keys %hash;
ok(@moving > 0 && @staying1 > 0, sprintf('objects of shard 1 that will move (hash & 3 = 3): %d, that stay (hash & 3 = 1): %d',
	scalar(@moving), scalar(@staying1)));
r(qq{SELECT webhook_ingest.enqueue('held', '$moving[0]', NULL, 'ev-again-0')});

# Step 1: four partitions, p2 and p3 the same databases as p0 and p1.
r(sprintf(q{ALTER SERVER webhook_ingest_shards OPTIONS (ADD p2 '%s', ADD p3 '%s')}, $connstr->($dbs[0]), $connstr->($dbs[1])));
is(r(q{SELECT string_agg(outcome, ',' ORDER BY k) = repeat('coalesced,', 59) || 'coalesced'
	FROM generate_series(1, 60) k, webhook_ingest.enqueue('held', 'o-' || k, NULL, 'ev-step1-' || k)}), 't',
	'step 1, four partitions on two databases: every object coalesces into its job (nothing moved)');
# A router id handed out now for a moving object names partition 3 (still shard 1's database).
my $before_move = r(qq{SELECT job_id FROM webhook_ingest.enqueue('held', '$moving[0]', NULL, 'ev-step1b')});
is(int($before_move / 2**48), 3, "after step 1 a moving object's router id names partition 3");

# Step 2: partition 3 to the new database.
like(r_err(q{SELECT * FROM webhook_ingest.move_partition(3, 1)}), qr/ERROR:  55000: the router's intake is open/,
	'move_partition refuses while the intake is open (55000)');
r(q{SELECT webhook_ingest.close_intake('moving partition 3')});
like(r_err(q{SELECT * FROM webhook_ingest.move_partition(3, 1)}), qr/ERROR:  55000: partitions 3 and 1 name the same database/,
	'and while partition 3 still names shard 1 (55000)');
my $last_old = $dbs[1]->safe_psql('postgres', 'SELECT last_value FROM webhook_ingest.jobs_id_seq');
r(sprintf(q{ALTER SERVER webhook_ingest_shards OPTIONS (SET p3 '%s')}, $connstr->($dbs[2])));
like(r_err(q{SELECT * FROM webhook_ingest.enqueue('held', 'o-1')}), qr/ERROR:  57P03: /, 'meanwhile the router refuses webhooks (57P03)');
is(r(q{SELECT jobs_moved || ' ' || (events_copied > 0) FROM webhook_ingest.move_partition(3, 1)}), scalar(@moving) . ' true',
	sprintf('move_partition(3, 1): %d jobs moved, the ledger copied', scalar(@moving)));
my $list = join(',', map { "'$_'" } @moving);
is($dbs[2]->safe_psql('postgres', "SELECT count(*) || ' ' || bool_and(payload->>'k' = substr(external_id, 3)) || ' ' || bool_and(id > $last_old)
	FROM webhook_ingest.queue WHERE state = 'pending' AND external_id IN ($list)"), scalar(@moving) . ' true true',
	"on the new database: each moved object's job pending with its payload, its id above shard 1's ($last_old)");
is($dbs[1]->safe_psql('postgres', "SELECT count(*) FROM webhook_ingest.queue WHERE state = 'pending' AND external_id IN ($list)"), 0,
	'none of them pending on shard 1 any more (cancelled)');
is(r(q{SELECT jobs_moved FROM webhook_ingest.move_partition(3, 1)}), 0, 'run again: nothing to move');
r(q{SELECT webhook_ingest.open_intake()});

# Through the router afterwards.
is(r(qq{SELECT outcome FROM webhook_ingest.enqueue('held', '$moving[0]', NULL, 'ev-again-0')}), 'duplicate',
	'a redelivery of an event of a moved object: duplicate (the ledger moved)');
my ($id, $outcome) = split /\|/, r(qq{SELECT job_id, outcome FROM webhook_ingest.enqueue('held', '$moving[0]', NULL, 'ev-new-0')});
is($outcome, 'coalesced', 'a new webhook for it coalesces into its moved job');
is(int($id / 2**48), 3, 'whose router id names partition 3');
is($dbs[2]->safe_psql('postgres', 'SELECT count(*) FROM webhook_ingest.queue WHERE id = ' . ($id % 2**48) . " AND external_id = '$moving[0]'"), 1,
	'and which is on the new database');
is(r(qq{SELECT outcome FROM webhook_ingest.enqueue('held', '$staying1[0]', NULL, 'ev-new-1')}), 'coalesced',
	"an object of partition 1 stayed on shard 1 (coalesced into its job there)");
is(r(qq{SELECT count(*) FROM webhook_ingest.job($before_move)}), 0,
	'a router id of a moved job from before the move names no job (not another one)');
is(r(q{SELECT count(*) FROM webhook_ingest.check_shards()}), 0, 'check_shards: all three databases agree');

$_->stop for @dbs, $router;
done_testing();
