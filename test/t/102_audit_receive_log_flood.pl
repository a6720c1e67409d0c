# audit 0.4.0 finding (test/audit/FINDINGS-0.4.0.md, F4): with PostgreSQL's
# default log_min_error_statement = error, every failed receive() writes its
# whole statement to the server log.  A client that interpolates parameters
# (psycopg2, which the Django example uses) sends the headers and the raw
# body inside the statement, so anyone on the internet - no secret needed -
# makes the server log grow by the size of each forged request: 500 kB of
# log per forged 500 kB webhook, 2 MB per oversized one.  receive()'s own
# errors about a request (size, signature, JSON, ids) now hide the
# statement; the message still names the source and the failed check.
use strict;
use warnings;
use lib 'test/t';
use AuditNode;
use PostgreSQL::Test::Utils;
use Test::More;

# PostgreSQL::Test::Cluster logs every statement (log_statement = all); a
# server's default logs none, and only failed ones (log_min_error_statement).
my $node = AuditNode::start('audit_logflood', "log_statement = none\n");
$node->safe_psql('postgres', q{
	CREATE EXTENSION pgcrypto;
	SELECT webhook_ingest.add_source('gh', 'http://127.0.0.1:18080/posts/{external_id}',
	                                 signature_scheme => 'github', signing_secrets => '{gh-secret}',
	                                 external_id_path => '$.id');
	SELECT webhook_ingest.pause_source('gh');
});

# Each request as a client-side-interpolated statement (a literal body).
sub log_growth_of
{
	my ($sql) = @_;
	my $before = -s $node->logfile;
	my ($ret, $out, $err) = $node->psql('postgres', $sql);
	my $growth = (-s $node->logfile) - $before;
	return ($growth, $err);
}

my $fake = 'sha256=' . ('0' x 64);
my $body = '{"id": "' . ('x' x 500000) . '"}';
my ($growth, $err) = log_growth_of(
	qq{SELECT * FROM webhook_ingest.receive('gh', '{"X-Hub-Signature-256": "$fake"}', '$body')});
like($err, qr/webhook signature verification failed/, 'a forged request is refused (28000)');
diag("a forged 500 kB request: the server log grew by $growth bytes");
cmp_ok($growth, '<', 10000, 'a forged request does not put its body in the server log');

my $huge = '{"id": "' . ('y' x 2000000) . '"}';
($growth, $err) = log_growth_of(qq{SELECT * FROM webhook_ingest.receive('gh', '{}', '$huge')});
like($err, qr/exceeds webhook_ingest.max_payload_size/, 'an oversized request is refused (54000)');
diag("an unsigned 2 MB request: the server log grew by $growth bytes");
cmp_ok($growth, '<', 10000, 'an oversized request does not put its body in the server log');

# Signed, but not JSON: still the statement is not logged.
my $bad = '{"id": ' . ('1' x 300000) . 'x}';
($growth, $err) = log_growth_of(qq{
	SELECT * FROM webhook_ingest.receive('gh',
		jsonb_build_object('X-Hub-Signature-256', 'sha256=' || encode(hmac('$bad', 'gh-secret', 'sha256'), 'hex')),
		'$bad')});
like($err, qr/webhook body is not valid JSON/, 'a signed body that is not JSON is refused (22P02)');
cmp_ok($growth, '<', 10000, 'nor does a signed body that is not JSON');

# The log still says what failed, for whom.
like(slurp_file($node->logfile), qr/ERROR:  webhook signature verification failed for source "gh"/,
	'the server log still has the error');
$node->stop;
done_testing();
