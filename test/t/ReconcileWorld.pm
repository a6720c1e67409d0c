# Shared by the reconciliation TAP tests (issue 30, test/t/19x_reconcile_*.pl):
# a world of the test upstream's paginated lists (test/upstream_lists.py, on
# the 127.0.0.1:18080 test/run starts), one per key, in the shape of GitHub,
# Shopify or Stripe; its changes and the webhooks of those that send one;
# what the upstream was asked (page requests, fetches of each object); and
# the source that reconciles it, with the settings of
# doc/pending/30-reconciliation.md's examples - the hosts the upstream's, a
# page size that makes a sweep of a few pages, and since the world's start.
package ReconcileWorld;
use strict;
use warnings;
use HTTP::Tiny;
use JSON::PP;
use PostgreSQL::Test::Cluster;

my $http = HTTP::Tiny->new(timeout => 60);
my $up = 'http://127.0.0.1:18080';

# A started node with the library preloaded, the worker polling every 100 ms, these
# postgresql.conf lines, and the extension.
sub start_node
{
	my ($name, $conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'webhook_ingest'\nwebhook_ingest.poll_interval = 100ms\n" . ($conf // ''));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION webhook_ingest');
	return $node;
}

# A SQL literal.
sub lit
{
	my $s = shift;
	$s =~ s/'/''/g;
	return "'$s'";
}

# A new world of $objects objects (object i at version i) under $key.
sub new
{
	my ($class, %a) = @_;
	my $self = bless { key => $a{key}, style => $a{style}, objects => $a{objects} }, $class;
	$self->up("reconcile/reset?style=$a{style}&objects=$a{objects}");
	return $self;
}

# GET /$path of the world (JSON).
sub up
{
	my ($self, $path) = @_;
	my $sep = $path =~ /\?/ ? '&' : '?';
	my $r = $http->get("$up/$path${sep}key=$self->{key}");
	die "the upstream answered $path with $r->{status}: $r->{content}" unless $r->{success};
	return decode_json($r->{content});
}

# $n changes (each object once while $n <= objects): [{id, version, webhook, payload}].
sub change { my ($self, $n) = @_; return $self->up("reconcile/change?n=$n")->{changes}; }

# Every object's current version, {id => version}.
sub state { return $_[0]->up('reconcile/state'); }

# What the world was asked: {pages => {page => n}, fetches => {id => n}, log => [[what, answered at, credential]]}.
sub requests { return $_[0]->up('reconcile/requests'); }

# The SQL that delivers the webhooks of these changes (all of them with $all).
sub deliver_sql
{
	my ($self, $source, $changes, $all) = @_;
	return join '', map {
		sprintf("SELECT webhook_ingest.enqueue(%s, %s, %s);\n", lit($source), lit($_->{id}),
			lit(encode_json($_->{payload})))
	} grep { $all || $_->{webhook} } @$changes;
}

# The time of version $v as the world's style writes a since.
sub since
{
	my ($self, $v) = @_;
	my $epoch = 1704067200 + $v;
	return $epoch if $self->{style} eq 'stripe';
	my @t = gmtime($epoch - ($self->{style} eq 'shopify' ? 5 * 3600 : 0));
	return sprintf('%04d-%02d-%02dT%02d:%02d:%02d%s', $t[5] + 1900, $t[4] + 1, $t[3], $t[2], $t[1], $t[0],
		$self->{style} eq 'shopify' ? '-05:00' : 'Z');
}

# add_source()'s arguments for the doc's example of the style: url_template, headers, reconcile.
sub example
{
	my ($self, %o) = @_;
	my $k = $self->{key};
	my $per = $o{per_page} // 10;
	my $list = $o{list_args} // '';
	my %r;
	my ($template, $headers);
	if ($self->{style} eq 'github')
	{
		$template = "$up/github/repos/acme/app/issues/{external_id}?key=$k";
		$headers = { Authorization => 'Bearer ghp_test', Accept => 'application/vnd.github+json' };
		%r = (url => "$up/github/repos/acme/app/issues?key=$k$list&state=all&sort=updated&direction=asc"
			  . "&per_page=$per&since={since}",
			id => '$.number', version => '$.updated_at', every => '1 hour');
	}
	elsif ($self->{style} eq 'shopify')
	{
		$template = "$up/shopify/admin/api/2024-01/products/{external_id}.json?key=$k";
		$headers = { 'X-Shopify-Access-Token' => 'shpat_test' };
		%r = (url => "$up/shopify/admin/api/2024-01/products.json?key=$k$list&limit=$per&updated_at_min={since}",
			items => '$.products[*]', id => '$.id', version => '$.updated_at',
			fetched_version => '$.product.updated_at', every => '1 hour');
	}
	else
	{
		my $events = "$up/stripe/v1/events?key=$k$list&limit=$per&types[]=customer.created"
		  . "&types[]=customer.updated&created[gte]={since_epoch}";
		$template = "$up/stripe/v1/customers/{external_id}?key=$k";
		$headers = { Authorization => 'Bearer sk_test' };
		%r = (url => $events, next_url => "$events&starting_after={cursor}",
			items => '$.data[*]', id => '$.data.object.id', version => '$.created',
			fetched_version => '$.created', cursor => '$.data[last].id', has_more => '$.has_more',
			every => '1 hour');
	}
	$r{since} = $self->since($o{since} // $self->{objects});
	%r = (%r, %{ $o{reconcile} // {} });
	return ($template, encode_json($headers), encode_json(\%r));
}

# SELECT add_source(...) for the doc's example, with more arguments ("name => value" SQL) if given.
sub add_source_sql
{
	my ($self, $name, %o) = @_;
	my ($template, $headers, $reconcile) = $self->example(%o);
	return sprintf("SELECT webhook_ingest.add_source(%s, %s, headers => %s, reconcile => %s%s);\n",
		lit($name), lit($template), lit($headers), lit($reconcile), $o{more} ? ", $o{more}" : '');
}

# The credential the source's requests carry (its Authorization or X-Shopify-Access-Token).
sub credential
{
	my $self = shift;
	return { github => 'Bearer ghp_test', shopify => 'shpat_test', stripe => 'Bearer sk_test' }->{ $self->{style} };
}

# The stored document's version of each object fetched, as the world counts versions.
sub stored_version_sql
{
	my ($self, $source) = @_;
	my $v = {
		github => q{extract(epoch FROM (d.details ->> 'updated_at')::timestamptz)::bigint - 1704067200},
		shopify => q{extract(epoch FROM (d.details -> 'product' ->> 'updated_at')::timestamptz)::bigint - 1704067200},
		stripe => q{(d.details -> 'metadata' ->> 'version')::bigint} }->{ $self->{style} };
	return "SELECT d.external_id, $v FROM webhook_ingest.documents d WHERE d.source = " . lit($source);
}

1;
