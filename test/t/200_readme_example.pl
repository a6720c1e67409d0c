# README's example, as it stands: the blocks marked <!-- example: NAME --> in README.md (the set-up, the
# endpoint, the sender, the follow-up read) run against a throwaway cluster and test/upstream.py on
# 127.0.0.1:18080 (test/run starts it), and what the README's comments say they answer is what they answer.
# Only the endpoint's port is changed (8000 to a free one), in the endpoint and the sender alike.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use IO::Socket::INET;
use Time::HiRes qw(time usleep);

my $readme = slurp_file('README.md');
my %block;
while ($readme =~ /^<!-- example: (\S+) -->\n```[a-z]*\n(.*?)^```$/msg)
{
	$block{$1} = $2;
}
is(join(' ', sort keys %block), 'endpoint.py follow-up.sql send.sh setup.sql',
	'README.md marks four example blocks: setup.sql, endpoint.py, send.sh, follow-up.sql');

my $up = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => 18080, Proto => 'tcp', Timeout => 2);
ok($up, 'the API stand-in answers on 127.0.0.1:18080 (test/run starts test/upstream.py there)')
  or BAIL_OUT('no upstream on 127.0.0.1:18080');
close $up;

my $node = PostgreSQL::Test::Cluster->new('readme');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
});
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', 'CREATE EXTENSION webhook_ingest');

# The set-up, as an admin (the node's superuser), in psql.
my ($rc, $out, $err) = $node->psql('app', $block{'setup.sql'}, on_error_stop => 1);
is($rc, 0, "README's set-up runs: the table, the handler, the source, the app's role" . ($err ? " ($err)" : ''));

# The endpoint, with the node in libpq's environment (its connection string names no host or port).
my $port = PostgreSQL::Test::Cluster::get_free_port();
(my $endpoint = $block{'endpoint.py'}) =~ s/\b8000\b/$port/g;
my $dir = PostgreSQL::Test::Utils::tempdir('readme');
open my $f, '>', "$dir/endpoint.py" or die $!;
print $f $endpoint;
close $f;
my ($ep_out, $ep_err) = ('', '');
my $ep = do
{
	local $ENV{PGHOST} = $node->host;
	local $ENV{PGPORT} = $node->port;
	IPC::Run::start([ '/usr/bin/python3', "$dir/endpoint.py" ], '>', \$ep_out, '2>', \$ep_err);
};
my $up_at = time();
my $listening;
until ($listening = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp'))
{
	last if time() - $up_at > 20 || !$ep->pumpable;
	usleep(100_000);
	$ep->pump_nb;
}
ok($listening, "README's endpoint listens (on 127.0.0.1:$port)") or diag($ep_err);
close $listening if $listening;

# The sender, in bash; then the same again (a redelivery), then another body with the first signature.
(my $send = $block{'send.sh'}) =~ s/\b8000\b/$port/g;
sub send_sh
{
	my ($script) = @_;
	my ($o, $e) = ('', '');
	IPC::Run::run([ 'bash', '-c', $script ], '>', \$o, '2>', \$e);
	return $o . $e;
}
is(send_sh($send), '{"job_id": 1, "outcome": "queued"}', 'the delivery: 202, job 1 queued');
# (job_id: the object's job while it is pending or running, NULL once it is done)
like(send_sh($send), qr/^\{"job_id": (1|null), "outcome": "duplicate"\}$/, 'the same again: a duplicate');
(my $tampered = $send) =~ s/\bsig=.*$/$&\nbody='{"action": "deleted", "post": {"id": "post-42"}}'/m;
isnt($tampered, $send, 'a sender whose body changes after it signed');
my $refused = '';
IPC::Run::run([ 'bash', '-c', $tampered =~ s/curl -s /curl -s -o \/dev\/null -w '%{http_code} ' /r ], '>', \$refused);
is($refused, '401 ', 'another body with that signature: 401');

# The follow-up read: the job done, the handler's row there, as the README's comments say.
my @says = $block{'follow-up.sql'} =~ /--\s*(.*?)\s*$/mg;
is_deeply(\@says, [ 't: done, the handler\'s rows committed', 'Post post-42 | {tag-1,tag-4}' ],
	"the follow-up's comments (what the test compares with)");
my @read = split /\n/, $node->safe_psql('app', $block{'follow-up.sql'});
is($read[0], 't', 'wait_for_job(1): true');
is($read[1], 'Post post-42|{tag-1,tag-4}', "the handler's row: the title and tags the API serves for post-42");
is($node->safe_psql('app', q{SELECT count(*) FROM webhook_ingest.jobs}), 1, 'one job for the two deliveries');

$ep->kill_kill;
$node->stop;
done_testing();
