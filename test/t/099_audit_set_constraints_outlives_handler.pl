# audit-8 finding: SET CONSTRAINTS outlives the handler that ran it.  It is
# transaction state, not a GUC, so the handler's GUC nest level does not undo
# it, and the handler's subtransaction commit keeps it: every later handler in
# the same batch (up to 256, any source, any owner) runs with all DEFERRABLE
# constraints deferred, and since a deferred trigger may not be queued in a
# security-restricted operation, each of them fails: "cannot fire deferred
# trigger within security-restricted operation".  One tenant's handler thus
# fails another tenant's jobs (here every one of 20, max_attempts 1).
# The same for a cursor a handler leaves open (portals of a committed
# subtransaction go to the parent): a later handler whose PL/pgSQL bound
# cursor has that name fails with 'cursor "curs" already in use'.
use strict;
use warnings;
use lib 'test/t';
use AuditNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = AuditNode::start('audit_constraints');
$node->safe_psql('postgres', q{
	CREATE ROLE victim NOLOGIN;
	CREATE SCHEMA v AUTHORIZATION victim;
	SET ROLE victim;
	CREATE TABLE v.parent (id int PRIMARY KEY);
	INSERT INTO v.parent VALUES (1);
	CREATE TABLE v.child (pid int REFERENCES v.parent DEFERRABLE INITIALLY IMMEDIATE, k text);
	CREATE FUNCTION v.h(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE sql AS $$ INSERT INTO v.child VALUES (1, external_id) $$;
	RESET ROLE;
	SET ROLE dev;
	CREATE FUNCTION devs.h(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE plpgsql AS $$ BEGIN SET CONSTRAINTS ALL DEFERRED; END $$;
	RESET ROLE;
	SELECT webhook_ingest.add_source('dev', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=200',
	                                 'devs.h(text,jsonb,jsonb)', max_attempts => 1);
	SELECT webhook_ingest.add_source('victim', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=200',
	                                 'v.h(text,jsonb,jsonb)', max_attempts => 1);
});
$node->safe_psql('postgres', q{SELECT count(*) FROM generate_series(1, 40) g,
	webhook_ingest.enqueue(CASE WHEN g % 2 = 0 THEN 'dev' ELSE 'victim' END, 'm' || g)});
$node->poll_query_until('postgres', q{SELECT count(*) = 40 FROM webhook_ingest.jobs WHERE state IN ('done', 'dead')})
  or diag('jobs did not finish');
diag($node->safe_psql('postgres', q{SELECT state || ': ' || count(*) || ' ' || coalesce(max(last_error), '')
                                     FROM webhook_ingest.jobs WHERE source = 'victim' GROUP BY state}));
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.jobs WHERE source = 'victim' AND state = 'dead'}),
	'0', 'another owner\'s SET CONSTRAINTS does not reach the victim\'s handlers');

# Part 2: an open cursor outlives its handler.
$node->safe_psql('postgres', q{
	SET ROLE dev;
	CREATE FUNCTION devs.h_cur(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE plpgsql AS $$ DECLARE c refcursor := 'curs'; BEGIN OPEN c FOR SELECT 1; END $$;
	RESET ROLE;
	SET ROLE victim;
	CREATE FUNCTION v.h_cur(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE plpgsql AS $$ DECLARE curs CURSOR FOR SELECT 1; x int; BEGIN OPEN curs; FETCH curs INTO x; CLOSE curs; END $$;
	RESET ROLE;
	SELECT webhook_ingest.add_source('dev_cur', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=200',
	                                 'devs.h_cur(text,jsonb,jsonb)', max_attempts => 1);
	SELECT webhook_ingest.add_source('victim_cur', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=200',
	                                 'v.h_cur(text,jsonb,jsonb)', max_attempts => 1);
});
$node->safe_psql('postgres', q{SELECT count(*) FROM generate_series(1, 40) g,
	webhook_ingest.enqueue(CASE WHEN g % 2 = 0 THEN 'dev_cur' ELSE 'victim_cur' END, 'c' || g)});
$node->poll_query_until('postgres', q{SELECT count(*) = 80 FROM webhook_ingest.jobs WHERE state IN ('done', 'dead')})
  or diag('jobs did not finish');
diag($node->safe_psql('postgres', q{SELECT state || ': ' || count(*) || ' ' || coalesce(max(last_error), '')
                                     FROM webhook_ingest.jobs WHERE source = 'victim_cur' GROUP BY state}));
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.jobs WHERE source = 'victim_cur' AND state = 'dead'}),
	'0', 'a cursor another owner\'s handler left open does not reach the victim\'s handlers');
$node->stop;
done_testing();
