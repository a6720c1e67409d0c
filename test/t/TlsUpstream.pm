# TlsUpstream.pm: nginx from Debian as the TAP tests' TLS upstream
# (test/tls/nginx.sh, with the certificates test/tls/make_certs.sh makes).
#
#   my %port = TlsUpstream::ports($base);   # good expired wrong mtls h1 plain
#   TlsUpstream::nginx($dir, \%port, 'start', '--delay-ms', 50) or die ...;
#   TlsUpstream::nginx($dir, \%port, 'stop');
#   my @r = TlsUpstream::requests($dir, qr{^/posts/});  # from $dir/access.log
#
# requests() gives one hash per logged request: conn (nginx's $connection),
# nreq (requests on that connection), port, proto, ssl, status, uri.
package TlsUpstream;

use strict;
use warnings;
use Cwd qw(getcwd);

my $top = getcwd();

# The six listeners, from $base up, in nginx.sh's order.
sub ports
{
	my ($base) = @_;
	return (good => $base, expired => $base + 1, wrong => $base + 2, mtls => $base + 3,
		h1 => $base + 4, plain => $base + 5);
}

# nginx.sh start|stop for $dir on these ports; true on success.
sub nginx
{
	my ($dir, $port, $cmd, @opts) = @_;
	local $ENV{WI_TLS_PORT_GOOD} = $port->{good};
	local $ENV{WI_TLS_PORT_EXPIRED} = $port->{expired};
	local $ENV{WI_TLS_PORT_WRONGHOST} = $port->{wrong};
	local $ENV{WI_TLS_PORT_MTLS} = $port->{mtls};
	local $ENV{WI_TLS_PORT_H1} = $port->{h1};
	local $ENV{WI_TLS_PORT_PLAIN} = $port->{plain};
	return system("$top/test/tls/nginx.sh", $cmd, $dir, @opts) == 0;
}

# The requests nginx logged whose URI matches $uri_re.
sub requests
{
	my ($dir, $uri_re) = @_;
	my @r;
	open my $fh, '<', "$dir/access.log" or return ();
	while (<$fh>)
	{
		my @f = split ' ';
		next unless defined $f[6] && $f[6] =~ $uri_re;
		push @r, { conn => $f[0], nreq => $f[1], port => $f[2], proto => $f[3], ssl => $f[4],
			status => $f[5], uri => $f[6] };
	}
	close $fh;
	return @r;
}

1;
