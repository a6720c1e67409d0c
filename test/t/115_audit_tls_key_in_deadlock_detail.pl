# Audit 0.7.0 (second pass), findings K1 and K2 (test/audit/FINDINGS-0.7.0-second.md):
# a client key passed as a literal leaked into the server log
#   K1. through the DETAIL of a deadlock report: PostgreSQL puts the text of
#       every statement in the cycle into it (errdetail_log, for the server
#       log only), and the log hook looked at detail, not detail_log.  The
#       session whose alter_source carries the key deadlocks with another
#       one; whichever of the two reports it, the key was in the log;
#   K2. through the STATEMENT line of a refused key that lacks the PEM
#       header the hook looks for (the base64 body alone, as a secrets
#       manager may hand it out, or a header damaged by a copy and paste):
#       "tls_client_key is not a PEM private key", then the statement with
#       the whole key in it.  (With the defaults: log_statement = 'none',
#       log_min_error_statement = error.  A bare body under log_statement =
#       'all' is logged before anything runs and has nothing to recognise it
#       by: the finding says so.)
# No traffic: the worker is off.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $data = "$ENV{PG_ABS_SRCDIR}/data/tls";
$data = 'test/data/tls' unless -d $data;
my $cert = slurp_file("$data/client.pem");
my $key = slurp_file("$data/client.key");
my @key_lines = grep { $_ ne '' && $_ !~ /-----/ } split /\n/, $key;
my $key_line = $key_lines[1];
die 'no key line' unless defined $key_line && length($key_line) > 20;
my $body = join("\n", @key_lines) . "\n";    # the key without its BEGIN and END lines

my $node = PostgreSQL::Test::Cluster->new('tls_key_deadlock');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.enabled = off
log_statement = 'none'
log_min_error_statement = error
deadlock_timeout = 200ms
});
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION webhook_ingest;
SELECT webhook_ingest.add_source('k1', 'https://127.0.0.1:9/x/{external_id}');
});

# K1: A holds the source's row and waits for B's advisory lock, B (with the
# key in its statement) holds the advisory lock and waits for the row.
my $offset = -s $node->logfile;
my $a = $node->background_psql('postgres', on_error_stop => 0);
my $b = $node->background_psql('postgres', on_error_stop => 0);
$a->query_safe(q{BEGIN; SELECT name FROM webhook_ingest.sources WHERE name = 'k1' FOR UPDATE});
$b->query_safe(q{BEGIN; SELECT pg_advisory_xact_lock(4242)});
$b->query_until(qr/started/, qq{\\echo started
SELECT webhook_ingest.alter_source('k1', tls_client_cert => '$cert', tls_client_key => '$key');
\\echo b_done
});
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%alter_source%'}),
	'the alter_source carrying a key waits for the row lock');
$a->query_until(qr/a_done/, q{SELECT pg_advisory_xact_lock(4242);
\echo a_done
});
$b->query_until(qr/b_done/, '');
$a->query(q{ROLLBACK});
$b->query(q{ROLLBACK});
$a->quit;
$b->quit;

my $log = slurp_file($node->logfile, $offset);
like($log, qr/deadlock detected/, 'the deadlock is reported in the server log');
like($log, qr/Process \d+ waits for/, '  with its DETAIL (which processes wait for what)');
unlike($log, qr/\Q$key_line\E/, '  and no line of the key is in the server log (K1)');
unlike($log, qr/PRIVATE KEY-----/, '  nor a PEM key header');

# K2: the key's body without its header lines, refused.
$offset = -s $node->logfile;
my ($ret, $out, $err) = $node->psql('postgres', qq{
SELECT webhook_ingest.alter_source('k1', tls_client_cert => '$cert', tls_client_key => '$body')});
like($err, qr/tls_client_key is not a PEM private key/, 'a key without its PEM header lines is refused');
$log = slurp_file($node->logfile, $offset);
like($log, qr/tls_client_key is not a PEM private key/, '  the refusal is logged');
unlike($log, qr/\Q$key_line\E/, '  but not the statement that carried the key (K2)');

# The same with only a certificate and the bare key, and with the key alone.
$offset = -s $node->logfile;
($ret, $out, $err) = $node->psql('postgres', qq{
SELECT webhook_ingest.alter_source('k1', tls_client_key => '$body')});
like($err, qr/tls_client_cert and tls_client_key go together/, 'a key without its certificate is refused');
$log = slurp_file($node->logfile, $offset);
unlike($log, qr/\Q$key_line\E/, '  and its statement is not logged either');

# A refused statement with no key in it is still logged with its statement.
$offset = -s $node->logfile;
$node->psql('postgres', q{SELECT webhook_ingest.alter_source('k1', tls_client_cert => 'not a cert', tls_client_key => NULL, reset_tls_client => false) /* marker_k2 */});
$log = slurp_file($node->logfile, $offset);
like($log, qr/STATEMENT:.*marker_k2/, 'a refused statement without a key keeps its STATEMENT line');

$node->stop;
done_testing();
