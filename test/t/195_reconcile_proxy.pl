# A sweep's list pages go through the source's proxy, as its fetches do
# (issue 30; the proxy stand-in test/proxy.py, as in 061_proxy.pl): proxy A
# on 127.0.0.1:18476 is webhook_ingest.proxy, proxy C on 127.0.0.5:18477 a
# source's own.  Three GitHub-style sources, each a first sweep of 2 pages
# over 20 objects none known (since 0), so 2 pages and 20 fetches each:
#   - 'global' (proxy NULL): its pages and fetches all through A, as
#     absolute-form GETs of the pages' URLs (page 2 the Link rel="next"
#     URL), none through C;
#   - 'own' (proxy C): all through C, none through A;
#   - 'direct' (proxy ''): through neither;
# the upstream saw each page once, and every object is stored.
use strict;
use warnings;
use Cwd qw(getcwd);
use IO::Socket::INET;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use lib 'test/t';
use ReconcileWorld;

my $top = getcwd();
my $dir = PostgreSQL::Test::Utils::tempdir('reconcile_proxy');
my %proxy = (a => [ '127.0.0.1', 18476 ], c => [ '127.0.0.5', 18477 ]);
my @children;

END
{
	my $rc = $?;    # the test's exit status, not the proxies'
	kill 'TERM', $_ for @children;
	waitpid($_, 0) for @children;
	$? = $rc;
}

for my $p (sort keys %proxy)
{
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		open STDOUT, '>', "$dir/proxy_$p.out" or die;
		open STDERR, '>&', \*STDOUT or die;
		exec 'python3', "$top/test/proxy.py", "$proxy{$p}[0]:$proxy{$p}[1]", "$dir/proxy_$p.log"
		  or die "exec: $!";
	}
	push @children, $pid;
	my $up = 0;
	for (1 .. 100)
	{
		my $s = IO::Socket::INET->new(PeerAddr => $proxy{$p}[0], PeerPort => $proxy{$p}[1], Proto => 'tcp');
		if ($s) { close $s; $up = 1; last; }
		usleep(100_000);
	}
	die "proxy $p did not start" unless $up;
}

my $node = ReconcileWorld::start_node('reconcile_proxy', "webhook_ingest.proxy = 'http://127.0.0.1:18476'\n");
sub q1 { return $node->safe_psql('postgres', shift); }

my $run = 'r195' . int(rand(1e9));
my %source_proxy = (global => 'NULL', own => q{'http://127.0.0.5:18477'}, direct => q{''});
my %world = map { $_ => ReconcileWorld->new(key => "$run$_", style => 'github', objects => 20) } keys %source_proxy;
q1(join '', map { $world{$_}->add_source_sql($_, since => 0, more => "proxy => $source_proxy{$_}") } sort keys %world);
$node->poll_query_until('postgres', q{
	SELECT count(*) = 3 FROM webhook_ingest.reconcile_stats WHERE sweeps = 1 AND state = 'idle'
	   AND NOT EXISTS (SELECT FROM webhook_ingest.queue)})
  or diag(q1(q{SELECT source, state, page, attempts, last_error FROM webhook_ingest.reconcile_stats}));

sub proxied
{
	my ($p, $key) = @_;
	my @lines = -e "$dir/proxy_$p.log" ? split /\n/, slurp_file("$dir/proxy_$p.log") : ();
	my @mine = grep { /[?&]key=\Q$key\E(&|$)/ } @lines;
	return {
		pages => [ grep { m{^GET http://127\.0\.0\.1:18080/github/repos/acme/app/issues\?} } @mine ],
		fetches => [ grep { m{^GET http://127\.0\.0\.1:18080/github/repos/acme/app/issues/\d+\?} } @mine ],
		all => \@mine };
}

for my $s (sort keys %world)
{
	my $w = $world{$s};
	my $key = "$run$s";
	my %seen = map { $_ => proxied($_, $key) } keys %proxy;
	my $asked = $w->requests;
	is(q1("SELECT last_pages || ' ' || last_listed || ' ' || sweeps_failed FROM webhook_ingest.reconcile_stats
	        WHERE source = '$s'"), '2 20 0', "$s: a sweep of 2 pages listed the 20 objects");
	is(join(' ', map { $asked->{pages}{$_} // 0 } 1 .. 3), '1 1 0', "$s: the upstream saw each page once");
	my $through = { global => 'a', own => 'c', direct => '' }->{$s};
	for my $p (sort keys %proxy)
	{
		my $n = $p eq $through ? 2 : 0;
		my $f = $p eq $through ? 20 : 0;
		is(scalar(@{ $seen{$p}{pages} }) . ' ' . scalar(@{ $seen{$p}{fetches} }) . ' ' . scalar(@{ $seen{$p}{all} }),
			"$n $f " . ($n + $f), "$s: proxy " . uc($p) . " saw $n pages and $f fetches of it, nothing else")
		  or diag(join "\n", @{ $seen{$p}{all} });
	}
	if ($through)
	{
		my @pages = @{ $seen{$through}{pages} };
		ok($pages[0] =~ /[?&]since=/ && $pages[0] !~ /[?&]page=/ && ($pages[1] // '') =~ /[?&]page=2(&|$)/,
			"$s: the first page's URL, then the Link rel=\"next\" one, through the proxy")
		  or diag("@pages");
	}
	my $state = $w->state;
	my @stored = split /\n/, q1($w->stored_version_sql($s));
	is(scalar(grep { my ($id, $v) = split /\|/; $v == $state->{$id} } @stored), 20, "$s: every object stored");
}

my @bad = grep { /ERROR|WARNING|FATAL/ } split /\n/, slurp_file($node->logfile);
is(scalar(@bad), 0, 'no error in the log') or diag(join "\n", @bad);
$node->stop;
note(sprintf('%s took %d s', $0, time() - $^T));
done_testing();
