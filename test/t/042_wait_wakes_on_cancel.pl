# wait_for_job() callers wake when cancel() of their job commits, not at
# their next recheck (up to a second later), and not on a rolled-back cancel.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('cancel_wake');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.enabled = off
});
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION webhook_ingest;
	SELECT webhook_ingest.add_source('w', 'http://127.0.0.1:9/o/{external_id}');
});

# Start a waiter on job $id (timeout 10 s); returns the session.
sub start_waiter
{
	my ($id) = @_;
	my $waiter = $node->background_psql('postgres');
	$waiter->query_until(qr/waiting/, qq{
		\\echo waiting
		SELECT webhook_ingest.wait_for_job($id, '10 s') AS finished,
		       round(extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000) AS ms;
	});
	usleep(300_000);	# asleep on its condition variable by now
	return $waiter;
}

# The waiter's answer: (finished, ms after the cancel's commit).
sub waiter_result
{
	my ($waiter) = @_;
	my $out = $waiter->query_until(qr/^[tf]\|\d+$/m, '');
	my ($finished, $ms) = $out =~ /^([tf])\|(\d+)$/m;
	$waiter->quit;
	return ($finished, $ms);
}

my $id = $node->safe_psql('postgres', q{SELECT job_id FROM webhook_ingest.enqueue('w', 'a')});
my $waiter = start_waiter($id);
$node->safe_psql('postgres', "SELECT webhook_ingest.cancel($id)");
my ($finished, $ms) = waiter_result($waiter);
is($finished, 'f', 'wait_for_job of a cancelled job returns false');
# 300 ms of sleep before the cancel; the old recheck would have answered at 1 000 ms.
cmp_ok($ms, '<', 800, "the waiter woke at the cancel's commit (${ms} ms after it began waiting)");

# A cancel rolled back wakes nobody for good: the waiter goes on waiting.
$id = $node->safe_psql('postgres', q{SELECT job_id FROM webhook_ingest.enqueue('w', 'b')});
my $w2 = $node->background_psql('postgres');
$w2->query_until(qr/waiting/, qq{
	\\echo waiting
	SELECT webhook_ingest.wait_for_job($id, '1500 ms') AS finished,
	       round(extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000) AS ms;
});
usleep(300_000);
$node->safe_psql('postgres', "BEGIN; SELECT webhook_ingest.cancel($id); ROLLBACK;");
($finished, $ms) = waiter_result($w2);
is($finished, 'f', 'after a rolled-back cancel the waiter times out');
cmp_ok($ms, '>=', 1400, "and only at its timeout (${ms} ms)");
is($node->safe_psql('postgres', "SELECT state FROM webhook_ingest.jobs WHERE id = $id"), 'pending',
	'the job is still pending');

$node->stop;
done_testing();
