# monitoring/postgres_exporter.yml: every query runs as the monitoring role
# against a worker that has done some work, and returns every column its
# metrics name, with a number in each metric column.
use strict;
use warnings;
use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $upstream = $ENV{WI_UPSTREAM_PORT} // 18080;

# The queries and the columns their metrics name, read from the file with a
# line parser (no YAML module needed): top-level keys, query:, "- column:".
my $file = "$FindBin::Bin/../../monitoring/postgres_exporter.yml";
open(my $fh, '<', $file) or die "cannot open $file: $!";
my (%queries, %columns, %labels, $current, $last_column);
while (my $line = <$fh>)
{
	next if $line =~ /^\s*#/;
	if ($line =~ /^(\w+):\s*$/) { $current = $1; next; }
	if ($line =~ /^\s+query:\s*"(.*)"\s*$/) { $queries{$current} = $1; next; }
	if ($line =~ /^\s+-\s+(\w+):\s*$/) { $last_column = $1; push @{ $columns{$current} }, $1; next; }
	if ($line =~ /^\s+usage:\s*"LABEL"/) { $labels{$current}{$last_column} = 1; }
}
close($fh);
is(scalar(keys %queries), 3, 'the file has the three queries: ' . join(', ', sort keys %queries));

my $node = PostgreSQL::Test::Cluster->new('monitoring');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'webhook_ingest'
webhook_ingest.poll_interval = 50ms
webhook_ingest.backoff_base = 50ms
});
$node->start;
$node->safe_psql('postgres', qq{
	CREATE EXTENSION webhook_ingest;
	CREATE ROLE exporter LOGIN IN ROLE webhook_ingest_monitor;
	SELECT webhook_ingest.add_source('blog', 'http://127.0.0.1:$upstream/posts/{external_id}');
	SELECT webhook_ingest.add_source('broken', 'http://127.0.0.1:$upstream/error/{external_id}', max_attempts => 2);
	SELECT count(*) FROM generate_series(1, 20) i, webhook_ingest.enqueue('blog', 'p' || i);
	SELECT count(*) FROM webhook_ingest.enqueue('broken', 'b1');
});
$node->poll_query_until('postgres',
	q{SELECT count(*) = 21 FROM webhook_ingest.jobs WHERE state IN ('done', 'dead')})
  or die 'the worker did not finish the jobs';

for my $name (sort keys %queries)
{
	my ($stdout, $stderr);
	my $ret = $node->psql('postgres', "COPY ($queries{$name}) TO STDOUT WITH (FORMAT csv, HEADER)",
		stdout => \$stdout, stderr => \$stderr, extra_params => [ '-U', 'exporter' ]);
	is($ret, 0, "$name runs as a member of webhook_ingest_monitor") or diag($stderr);
	my @lines = split /\n/, $stdout;
	my @header = split /,/, shift(@lines) // '';
	ok(@lines >= 1, "$name returns rows (" . scalar(@lines) . ')');
	is_deeply([ sort @header ], [ sort @{ $columns{$name} } ], "$name returns exactly the columns its metrics name");
	my $numeric = 1;
	for my $row (@lines)
	{
		my %value;
		@value{@header} = split /,/, $row;
		for my $column (@header)
		{
			next if $labels{$name}{$column};
			$numeric = 0 unless defined $value{$column} && $value{$column} =~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/;
		}
	}
	ok($numeric, "$name: every metric value is a number");
}

# the figures agree with what happened
is($node->safe_psql('postgres',
	q{SELECT done_last_hour || ' ' || dead FROM webhook_ingest.queue_stats WHERE source = 'blog'}),
	'20 0', 'queue_stats: blog did 20 jobs, none dead');
is($node->safe_psql('postgres',
	q{SELECT dead || ' ' || retried_last_hour FROM webhook_ingest.queue_stats WHERE source = 'broken'}),
	'1 1', 'queue_stats: broken has one dead job after one retry');
is($node->safe_psql('postgres', q{SELECT jobs FROM webhook_ingest.latency WHERE source = 'blog'}),
	'20', 'latency: 20 blog jobs measured');

$node->stop;
done_testing();
