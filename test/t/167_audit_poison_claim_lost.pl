# Audit of 8d12040 (claims committed asynchronously), finding P1: a job whose
# handler kills its apply worker outright (SIGKILL: an OOM kill, a segfault
# in a C function) causes a crash restart, which loses the WAL not yet
# written - the asynchronous claim of that very job, made a few ms before.
# The job is then pending again with its old attempts, so the crash guard's
# count_crash (which wants it running) counts nothing: the poison job never
# dies, and every claim of it restarts the whole cluster, every session of
# every database killed, over and over.  Each crash must count: the job is
# dead after max_attempts (2) crashes, not restarted forever.
use strict;
use warnings;
use lib 'test/t';
use AuditNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = AuditNode::start('audit_poison_claim_lost');
$node->safe_psql('postgres', q{
	CREATE FUNCTION public.sigkills_itself(external_id text, details jsonb, payload jsonb) RETURNS void
	LANGUAGE plpgsql AS $$
	BEGIN
		-- the shell's parent is the apply worker
		EXECUTE 'COPY (SELECT 1) TO PROGRAM ''kill -9 $PPID''';
		PERFORM pg_sleep(5);
	END $$;
	SELECT webhook_ingest.add_source('poison', 'http://127.0.0.1:18080/posts/{external_id}',
	                                 'public.sigkills_itself(text,jsonb,jsonb)', max_attempts => 2);
});
my $offset = -s $node->logfile;
$node->safe_psql('postgres', q{SELECT webhook_ingest.enqueue('poison', 'p1')});

# Each round of the crash loop takes a crash restart (about a second); give it 25 s.
my $state = '';
my $deadline = time() + 25;
while (time() < $deadline)
{
	my $s = eval {
		$node->safe_psql('postgres', q{SELECT state || ' ' || attempts FROM webhook_ingest.jobs WHERE external_id = 'p1'})
	};
	$state = $s if defined $s;
	last if $state =~ /^dead/;
	usleep(250_000);
}
my $crashes = () = slurp_file($node->logfile, $offset) =~ /terminated by signal 9/g;
diag("crash restarts: $crashes; the job: $state");
like($state, qr/^dead/, 'a job whose handler SIGKILLs its apply worker is dead after max_attempts crashes');
cmp_ok($crashes, '<=', 3, "and the cluster was not crash-restarted over and over for it ($crashes crash restarts)");
$node->stop('immediate');
done_testing();
