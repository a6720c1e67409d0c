# audit-8 finding: crash-guard suspects that never come back to be completed
# stay suspects forever (persisted in the guard file, across restarts):
# a culprit the crash made dead (wi_crash_guard_start adds it as a suspect
# after wi_count_crash), and suspects cancelled, parked or dropped before
# their lone completion.  The list is capped at 1024 and add_suspect drops
# silently when full: from then on a crash while completing several jobs
# adds no suspect, the batch is reclaimed (attempts given back) and
# completed together again: the 0.2.0 poison loop, with a log line that
# says "each is completed alone".  Part 1 shows the leak; part 2 starts with
# a full list (seeded, as 1024 leaked entries would leave it) and shows the
# loop.  The poison handler is superuser-owned (as in 008: a stand-in for a
# segfaulting C function).
use strict;
use warnings;
use lib 'test/t';
use AuditNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = AuditNode::start('audit_suspects');
$node->safe_psql('postgres', q{
	CREATE FUNCTION public.maybe_die(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE plpgsql AS $$
	BEGIN
		IF external_id LIKE 'poison%' THEN
			PERFORM pg_terminate_backend(pg_backend_pid());
			PERFORM pg_sleep(5);
		END IF;
	END $$;
	SELECT webhook_ingest.add_source('pz', 'http://127.0.0.1:18080/posts/{external_id}?delay_ms=300',
	                                 'public.maybe_die(text,jsonb,jsonb)', max_attempts => 1);
});
my $dboid = $node->safe_psql('postgres', q{SELECT oid FROM pg_database WHERE datname = current_database()});
# the fetcher's list of suspects (0.9.0 kept it in webhook_ingest.$dboid.completing)
my $guard = $node->data_dir . "/pg_stat_tmp/webhook_ingest.$dboid.suspects";

# Part 1: a lone poison job dies (max_attempts 1); it stays a suspect.
$node->safe_psql('postgres', q{SELECT webhook_ingest.enqueue('pz', 'poison-alone')});
$node->poll_query_until('postgres', q{SELECT state = 'dead' FROM webhook_ingest.jobs WHERE external_id = 'poison-alone'})
  or diag('poison-alone not dead');
AuditNode::wait_for_worker($node);
my $dead_id = $node->safe_psql('postgres', q{SELECT id FROM webhook_ingest.jobs WHERE external_id = 'poison-alone'});
my $file = slurp_file($guard);
diag("guard file: $file");
unlike($file, qr/suspects.*\b$dead_id\b/, "the dead culprit (job $dead_id) is no longer a suspect");

# Part 2: a full suspect list (1024 entries), then a poison job in a batch.
$node->stop('fast');
open(my $fh, '>', $guard) or die;
print $fh "suspects " . join(' ', map { 900000000 + $_ } 1 .. 1024) . "\n";
close $fh;
$node->start;
AuditNode::wait_for_worker($node);
$node->safe_psql('postgres', q{SELECT webhook_ingest.alter_source('pz', max_attempts => 2)});
$node->safe_psql('postgres', q{SELECT count(*) FROM unnest(ARRAY['poison-batch', 'm1', 'm2', 'm3', 'm4', 'm5']) k,
                               webhook_ingest.enqueue('pz', k)});
my $ended = $node->safe_psql('postgres', q{
	DO $$ BEGIN
		FOR i IN 1 .. 300 LOOP		-- at most 30 s
			EXIT WHEN (SELECT state = 'dead' FROM webhook_ingest.jobs WHERE external_id = 'poison-batch');
			PERFORM pg_sleep(0.1);
		END LOOP;
	EXCEPTION WHEN OTHERS THEN NULL;
	END $$;
	SELECT state || ' ' || attempts FROM webhook_ingest.jobs WHERE external_id = 'poison-batch'});
my $crashes = () = slurp_file($node->logfile) =~ /died while completing \d+ jobs/g;
diag("poison-batch: $ended; worker restarts while completing a batch: $crashes");
is($ended, 'dead 2', 'with 1024 leaked suspects a poison job in a batch still ends dead after max_attempts');
cmp_ok($crashes, '<=', 2, 'the worker does not crash-loop on it');
# stop the loop before stopping the node
$node->safe_psql('postgres', q{SELECT count(*) FROM webhook_ingest.jobs j, webhook_ingest.cancel(j.id) c WHERE j.source = 'pz'});
$node->stop('immediate');
done_testing();
