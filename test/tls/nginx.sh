#!/bin/bash
# test/tls/nginx.sh: the TLS (and plain) stand-in upstream for the tests and
# benches, an nginx run by the calling user with everything under DIR.
#
#   nginx.sh start DIR [--delay-ms N] [--workers N] [--streams N]
#                      [--log-buffer SIZE | --no-access-log] [--certs CERTDIR]
#                      [--keepalive-requests N]
#   nginx.sh stop DIR
#
# start: runs test/tls/make_certs.sh CERTDIR (default DIR; idempotent), writes
# DIR/nginx.conf, starts `nginx -p DIR -c DIR/nginx.conf -e DIR/error.log`
# (master's pid in DIR/nginx.pid; logs, *_temp_path dirs all in DIR) and
# returns once every port accepts connections (status 1, error.log on stderr,
# if it does not within 10 s; also 1 if an nginx of DIR is already running).
# stop: graceful stop (SIGQUIT, which also flushes a --log-buffer), waits for
# the master to exit (SIGKILL after 10 s); quiet and status 0 if none runs.
# Run it as the unprivileged user (test/lib.sh: wi_as_user); DIR must be
# writable by that user.
#
# The binary: $NGINX, else nginx on PATH, else /usr/sbin/nginx.
#
# Listeners, all on $WI_TLS_HOST (default 127.0.0.1), ports from the env:
#   WI_TLS_PORT_GOOD      18443  server.pem, ALPN h2 and http/1.1
#   WI_TLS_PORT_EXPIRED   18444  expired.pem (h2 + http/1.1)
#   WI_TLS_PORT_WRONGHOST 18445  wrong_host.pem (h2 + http/1.1)
#   WI_TLS_PORT_MTLS      18446  server.pem, h2 + http/1.1, client certificate
#                                required (ssl_verify_client on, client_ca.pem)
#   WI_TLS_PORT_H1        18447  server.pem, HTTP/1.1 only (no ALPN h2)
#   WI_TLS_PORT_PLAIN     18448  plain HTTP/1.1, same content
# TLSv1.2 and TLSv1.3; shared session cache and tickets on (resumption).
#
# Content (every port):
#   GET /posts/{id}  200, Content-Type application/json,
#                    {"id": "{id}", "title": "Post {id}", "tags": ["tag-0", "tag-3"],
#                     "categories": ["cat-0"]}   (test/upstream.py's field names;
#                    {id}: [A-Za-z0-9._-]+).  With --delay-ms N > 0 it answers
#                    after N ms (echo module's echo_sleep; body then sent chunked
#                    on HTTP/1.1), else at once (`return`, with Content-Length).
#   GET /            200 "ok\n" (text/plain)
#   anything else    404 {"error": "no such route"}
#
# Options: --delay-ms N (default 0); --workers N (worker_processes, default 1);
# --streams N (http2_max_concurrent_streams, default 128); --keepalive-requests
# N (requests per connection before nginx closes it, HTTP/1.1 and HTTP/2,
# default 100000).  keepalive_timeout 75s; worker_connections up to 8192.
#
# DIR/access.log, one line per request, fields separated by one space:
#   $connection $connection_requests $server_port $server_protocol
#   $ssl_protocol $status $request_uri $request_time $msec $ssl_session_reused
#   e.g. "3 17 18443 HTTP/2.0 TLSv1.3 200 /posts/1 0.000 1764619200.123 ."
#   ($connection: nginx's connection serial number, unique across workers
#   for the server's lifetime, so distinct values of field 1 for a port =
#   connections opened to it; $ssl_protocol "-" on the plain port;
#   $ssl_session_reused "r" on a connection that resumed a TLS session, "."
#   otherwise, "-" on the plain port.  A
#   handshake that fails (expired, wrong host, untrusted CA on the client
#   side) logs nothing.  On the mTLS port a missing or untrusted client
#   certificate does NOT fail the handshake: nginx answers 400 ("No required
#   SSL certificate was sent" / "The SSL certificate error"), logged as 400.)
# The log is written unbuffered by default (one write(2) per request, never
# fsync'ed), so a test can read it complete at any time.  --log-buffer SIZE
# (e.g. 256k) buffers it (flushed every 1 s and at stop); --no-access-log
# turns it off (benches).  Errors: DIR/error.log.
set -eu
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: nginx.sh start|stop DIR [options]" >&2; exit 2; }
shift 2
dir=$(mkdir -p "$dir" && cd "$dir" && pwd)

host=${WI_TLS_HOST:-127.0.0.1}
p_good=${WI_TLS_PORT_GOOD:-18443}
p_expired=${WI_TLS_PORT_EXPIRED:-18444}
p_wrong=${WI_TLS_PORT_WRONGHOST:-18445}
p_mtls=${WI_TLS_PORT_MTLS:-18446}
p_h1=${WI_TLS_PORT_H1:-18447}
p_plain=${WI_TLS_PORT_PLAIN:-18448}
ports="$p_good $p_expired $p_wrong $p_mtls $p_h1 $p_plain"
# $NGINX, else nginx on PATH, else Debian's /usr/sbin/nginx (not on a user's PATH)
nginx=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}

running() {
	local pid
	pid=$(cat "$dir/nginx.pid" 2>/dev/null) || return 1
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

stop() {
	local pid
	running || return 0
	pid=$(cat "$dir/nginx.pid")
	kill -QUIT "$pid" 2>/dev/null || true
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	echo "nginx.sh: nginx $pid did not stop in 10 s; killing it" >&2
	pkill -KILL -P "$pid" 2>/dev/null || true
	kill -KILL "$pid" 2>/dev/null || true
	return 0
}

start() {
	local delay=0 workers=1 streams=128 log=on certs=$dir nofile conns keepalive=100000
	while [ $# -gt 0 ]; do
		case $1 in
		--delay-ms) delay=$2; shift 2 ;;
		--workers) workers=$2; shift 2 ;;
		--streams) streams=$2; shift 2 ;;
		--keepalive-requests) keepalive=$2; shift 2 ;;
		--log-buffer) log="buffer=$2 flush=1s"; shift 2 ;;
		--no-access-log) log=off; shift ;;
		--certs) certs=$(cd "$2" && pwd); shift 2 ;;
		*) echo "nginx.sh: unknown option $1" >&2; exit 2 ;;
		esac
	done
	if running; then
		echo "nginx.sh: an nginx already runs in $dir (pid $(cat "$dir/nginx.pid"))" >&2
		exit 1
	fi
	"$here/make_certs.sh" "$certs"
	mkdir -p "$dir/tmp"
	nofile=$(ulimit -Hn)
	[ "$nofile" = unlimited ] || [ "$nofile" -gt 16384 ] && nofile=16384
	conns=$((nofile / 2))

	local body answer access
	body='{"id": "$post", "title": "Post $post", "tags": ["tag-0", "tag-3"], "categories": ["cat-0"]}'
	if [ "$delay" -gt 0 ]; then
		answer="echo_sleep $(printf '%d.%03d' $((delay / 1000)) $((delay % 1000))); echo '$body';"
	else
		answer="return 200 '$body';"
	fi
	case $log in
	off) access="access_log off;" ;;
	on) access="access_log $dir/access.log wi;" ;;
	*) access="access_log $dir/access.log wi $log;" ;;
	esac

	cat >"$dir/nginx.conf" <<CONF
# written by test/tls/nginx.sh; do not edit
load_module /usr/lib/nginx/modules/ngx_http_echo_module.so;
daemon on;
master_process on;
worker_processes $workers;
worker_rlimit_nofile $nofile;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections $conns; }
http {
	client_body_temp_path $dir/tmp/client_body;
	proxy_temp_path $dir/tmp/proxy;
	fastcgi_temp_path $dir/tmp/fastcgi;
	uwsgi_temp_path $dir/tmp/uwsgi;
	scgi_temp_path $dir/tmp/scgi;
	log_format wi '\$connection \$connection_requests \$server_port \$server_protocol \$ssl_protocol \$status \$request_uri \$request_time \$msec \$ssl_session_reused';
	$access
	server_tokens off;
	keepalive_requests $keepalive;
	keepalive_timeout 75s;
	http2_max_concurrent_streams $streams;
	ssl_protocols TLSv1.2 TLSv1.3;
	ssl_session_cache shared:wi_tls:10m;
	ssl_session_tickets on;
	ssl_certificate $certs/server.pem;
	ssl_certificate_key $certs/server.key;

	server {
		listen $host:$p_good ssl http2 backlog=4096;
		listen $host:$p_h1 ssl backlog=4096;
		listen $host:$p_plain backlog=4096;
		include $dir/content.conf;
	}
	server {
		listen $host:$p_expired ssl http2;
		ssl_certificate $certs/expired.pem;
		ssl_certificate_key $certs/expired.key;
		include $dir/content.conf;
	}
	server {
		listen $host:$p_wrong ssl http2;
		ssl_certificate $certs/wrong_host.pem;
		ssl_certificate_key $certs/wrong_host.key;
		include $dir/content.conf;
	}
	server {
		listen $host:$p_mtls ssl http2 backlog=4096;
		ssl_verify_client on;
		ssl_client_certificate $certs/client_ca.pem;
		ssl_verify_depth 2;
		include $dir/content.conf;
	}
}
CONF
	cat >"$dir/content.conf" <<CONF
location ~ "^/posts/(?<post>[A-Za-z0-9._-]+)\$" {
	default_type application/json;
	$answer
}
location = / {
	default_type text/plain;
	return 200 "ok\n";
}
location / {
	default_type application/json;
	return 404 '{"error": "no such route"}';
}
CONF
	if ! "$nginx" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" 2>>"$dir/error.log"; then
		echo "nginx.sh: nginx did not start:" >&2
		cat "$dir/error.log" >&2
		exit 1
	fi
	local pending=$ports p
	for _ in $(seq 1 100); do
		for p in $pending; do
			(exec 3<>"/dev/tcp/$host/$p") 2>/dev/null && pending=$(echo " $pending " | sed "s/ $p / /")
		done
		[ -z "${pending// /}" ] && return 0
		sleep 0.1
	done
	echo "nginx.sh: ports$pending do not answer:" >&2
	cat "$dir/error.log" >&2
	stop
	exit 1
}

case $cmd in
start) start "$@" ;;
stop) stop ;;
*) echo "usage: nginx.sh start|stop DIR [options]" >&2; exit 2 ;;
esac
