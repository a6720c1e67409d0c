# One version everywhere (issue 13): META.json, debian/changelog, CHANGELOG.md, the installed control file's
# default_version, the newest install script installed beside it, the newest
# update script's target, the library's own version (WI_VERSION, from the
# Makefile's EXTVERSION) and the Makefile's EXTVERSION are one.  The library
# tells its version only through the worker: at an older extension version it
# logs "extension version P is installed, the library is L" and waits; at L
# it goes on.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use JSON::PP;

# The Makefile's EXTVERSION (test/run's copy of the tree is the cwd).
my ($extversion) = slurp_file('Makefile') =~ /^EXTVERSION\s*=\s*(\S+)/m;
ok(defined $extversion, "the Makefile sets EXTVERSION");
$extversion //= '';

# The files that name it by hand: META.json (PGXN), debian/changelog, CHANGELOG.md.
my $meta = decode_json(slurp_file('META.json'));
is($meta->{version}, $extversion, 'META.json: version is EXTVERSION');
is($meta->{provides}{webhook_ingest}{version}, $extversion, "META.json: provides webhook_ingest's version is EXTVERSION");
like(slurp_file('debian/changelog'), qr/\A\S+ \(\Q$extversion\E\)/, "debian/changelog's top entry is EXTVERSION");
like(slurp_file('CHANGELOG.md'), qr/^## \Q$extversion\E\b/m, 'CHANGELOG.md has a section for EXTVERSION');

my $node = PostgreSQL::Test::Cluster->new('versions');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.enabled = off
webhook_ingest.poll_interval = 50ms
});
$node->start;

# What is installed: the control file and the scripts beside it.
my $sharedir = $node->config_data('--sharedir');
my $extdir = "$sharedir/extension";
my ($default) = slurp_file("$extdir/webhook_ingest.control") =~ /^default_version\s*=\s*'([^']*)'/m;
is($default, $extversion, "the installed control file's default_version is EXTVERSION ($extversion)");

sub vcmp
{
	my @x = split /\./, shift;
	my @y = split /\./, shift;
	for my $i (0 .. 2) { my $c = ($x[$i] // 0) <=> ($y[$i] // 0); return $c if $c; }
	return 0;
}
sub by_version { return vcmp($a, $b); }
opendir(my $dh, $extdir) or die "$extdir: $!";
my @scripts = grep { /^webhook_ingest--.*\.sql$/ } readdir $dh;
closedir $dh;
my @installs = sort by_version map { /^webhook_ingest--([^-]+)\.sql$/ ? $1 : () } @scripts;
my @targets = sort by_version map { /^webhook_ingest--[^-]+--([^-]+)\.sql$/ ? $1 : () } @scripts;
is($installs[-1], $extversion, "the newest installed install script is webhook_ingest--$extversion.sql");
is($targets[-1], $extversion, "the newest installed update script leads to $extversion");
is($node->safe_psql('postgres', q{SELECT default_version FROM pg_available_extensions WHERE name = 'webhook_ingest'}),
	$extversion, 'pg_available_extensions agrees');

# The library: at the version before, the worker names its own and waits.
my @older = grep { vcmp($_, $extversion) < 0 } @installs;
my $previous = (sort by_version @older)[-1];
ok(defined $previous, 'an older install script exists to start from');
$node->safe_psql('postgres', 'CREATE DATABASE versions');
my $offset = -s $node->logfile;
$node->safe_psql('versions', qq{CREATE EXTENSION webhook_ingest VERSION '$previous'});
# (the worker's row: from 0.10.0 on the view has a row per apply worker too, role 'applier')
my $state_sql = q{SELECT state FROM webhook_ingest.worker_status w
                   WHERE to_jsonb(w) ->> 'role' IS DISTINCT FROM 'applier' AND database = 'versions'};
ok($node->poll_query_until('versions',
		"SELECT coalesce(($state_sql) IN ('waiting for ALTER EXTENSION webhook_ingest UPDATE', 'disabled'), false)"),
	"at $previous the worker has looked at the extension");
is($node->safe_psql('versions', $state_sql), 'waiting for ALTER EXTENSION webhook_ingest UPDATE',
	"at $previous the worker waits (the library is not $previous)");
$node->wait_for_log(qr/extension version \Q$previous\E is installed, the library is/, $offset);
my ($library) = slurp_file($node->logfile, $offset) =~ /extension version \Q$previous\E is installed, the library is (\S+)/;
is($library, $extversion, "the library's version (WI_VERSION) is EXTVERSION ($extversion)");

# Updated to the default version, the worker takes it as its own.
$node->safe_psql('versions', 'ALTER EXTENSION webhook_ingest UPDATE');
is($node->safe_psql('versions', q{SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest'}),
	$extversion, "ALTER EXTENSION UPDATE goes to $extversion");
ok($node->poll_query_until('versions', "SELECT ($state_sql) = 'disabled'"),
	"at $extversion the worker stops waiting: the library and the scripts agree");

# A fresh CREATE EXTENSION installs the default version.
$node->safe_psql('postgres', 'CREATE EXTENSION webhook_ingest');
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'webhook_ingest'}),
	$extversion, "CREATE EXTENSION installs $extversion");

$node->stop;
done_testing();
