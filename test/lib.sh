# test/lib.sh: shell helpers shared by test/run, bench/* and the demo.
#
#   wi_setup      install missing Debian packages (as root; services they
#                 start are stopped: wi_stop_service), build and
#                 install the extension
#   wi_npm_ci DIR  npm, and DIR/node_modules (npm ci from its lock)
#   wi_examples_setup  wi_npm_ci examples/express
#   wi_workdir    a fresh directory owned by the unprivileged user
#   wi_as_user    run a command as that user (PostgreSQL refuses root)
#   wi_cluster_start DIR PORT / wi_cluster_stop DIR
#                 a throwaway cluster with the extension preloaded

WI_TOP=${WI_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
WI_PG_MAJOR=${WI_PG_MAJOR:-15}
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/$WI_PG_MAJOR/bin/pg_config}
WI_USER=${WI_USER:-postgres}
export PG_CONFIG

WI_PACKAGES="make gcc postgresql-$WI_PG_MAJOR postgresql-server-dev-$WI_PG_MAJOR libcurl4-openssl-dev libssl-dev libipc-run-perl python3 bc"
# The examples (examples/): Django and psycopg2 for /usr/bin/python3, Node.
WI_EXAMPLES_PACKAGES="python3-django nodejs"
WI_PACKAGES="$WI_PACKAGES $WI_EXAMPLES_PACKAGES"
# psycopg2 for /usr/bin/python3: the examples (Django) and the storm's senders
# (bench/peers/storm_send.py), which test/t/140_router.pl runs through the router.
WI_PACKAGES="$WI_PACKAGES python3-psycopg2"
# curl and openssl: README's example sender (test/t/200_readme_example.pl runs it).
WI_PACKAGES="$WI_PACKAGES curl"
# pgbouncer: test/t/050_pgbouncer.pl starts its own (the package's service is stopped).
WI_PACKAGES="$WI_PACKAGES pgbouncer"
# TLS upstreams (test/tls/): nginx with the echo module as the test server
# (test/tls/nginx.sh starts its own; the package's service is stopped), and
# the openssl command for test/tls/make_certs.sh.
WI_PACKAGES="$WI_PACKAGES nginx libnginx-mod-http-echo openssl"
# High availability and scaling out (issue 16): pg_auto_failover (its
# extension and pg_autoctl; the TAP failover tests start their own monitor and
# nodes) and PL/Proxy, which the router extension webhook_ingest_router uses.
WI_PACKAGES="$WI_PACKAGES postgresql-$WI_PG_MAJOR-auto-failover pg-auto-failover-cli postgresql-$WI_PG_MAJOR-plproxy"
# make deb only (test/deb/build): pg_buildext and its debhelper sequence, and
# dpkg-buildpackage.  Not part of make test.
WI_DEB_PACKAGES="make gcc postgresql-$WI_PG_MAJOR postgresql-server-dev-$WI_PG_MAJOR postgresql-server-dev-all"
WI_DEB_PACKAGES="$WI_DEB_PACKAGES debhelper dpkg-dev fakeroot libcurl4-openssl-dev libssl-dev"

wi_log() { printf '== %s\n' "$*" >&2; }

wi_install_packages() {
	local missing=() p
	for p in $WI_PACKAGES; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		wi_log "missing packages: ${missing[*]} (run as root to install them)"
		return 1
	fi
	wi_log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	# The Debian package creates and starts a default cluster; we use our own.
	if command -v pg_ctlcluster >/dev/null && [ -d "/etc/postgresql/$WI_PG_MAJOR/main" ]; then
		pg_ctlcluster "$WI_PG_MAJOR" main stop 2>/dev/null || true
	fi
	# pgbouncer's package enables a service on /etc/pgbouncer (127.0.0.1:6432);
	# the TAP test starts its own pgbouncer, so keep that one stopped.
	case " ${missing[*]} " in *" pgbouncer "*) wi_stop_service pgbouncer ;; esac
	# nginx's package (its nginx-common) starts a service on port 80; the TLS
	# tests and benches run their own (test/tls/nginx.sh).
	case " ${missing[*]} " in *" nginx "*) wi_stop_service nginx ;; esac
}

# wi_stop_service NAME: stop and disable a service a package just started.
wi_stop_service() {
	if [ -d /run/systemd/system ]; then
		systemctl disable --now "$1" >/dev/null 2>&1 || true
	elif [ -x "/etc/init.d/$1" ]; then
		"/etc/init.d/$1" stop >/dev/null 2>&1 || true
		update-rc.d "$1" disable >/dev/null 2>&1 || true
	fi
}

wi_setup() {
	wi_install_packages
	wi_log "building and installing webhook_ingest"
	make -C "$WI_TOP" -s PG_CONFIG="$PG_CONFIG" >/dev/null
	make -C "$WI_TOP" -s PG_CONFIG="$PG_CONFIG" install >/dev/null
}

# wi_npm_ci DIR: npm (Debian's, unless the installed Node brings its own) and
# DIR/node_modules from DIR/package-lock.json.  `npm ci` runs only when the
# installed tree is not that lock's (a stamp in node_modules), so once
# installed it needs no network.
wi_npm_ci() {
	local dir=$1 want
	if ! command -v npm >/dev/null; then
		WI_PACKAGES=npm wi_install_packages || return 1
	fi
	want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
	[ "$(cat "$dir/node_modules/.wi-lock-sha256" 2>/dev/null)" = "$want" ] && return 0
	wi_log "npm ci in ${dir#"$WI_TOP"/}"
	if ! (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null); then
		wi_log "npm ci failed in ${dir#"$WI_TOP"/}: is the npm registry reachable?"
		return 1
	fi
	echo "$want" >"$dir/node_modules/.wi-lock-sha256"
}

# wi_examples_setup: examples/express/node_modules (wi_npm_ci).
wi_examples_setup() { wi_npm_ci "$WI_TOP/examples/express"; }

wi_as_user() {
	if [ "$(id -u)" -eq 0 ]; then
		# From a directory the user may enter (a clone under a private mktemp dir is not one).
		(cd "${WI_HOME:-/tmp}" &&
			runuser -u "$WI_USER" -- env HOME="${WI_HOME:-/tmp}" PATH="$("$PG_CONFIG" --bindir):$PATH" "$@")
	else
		env PATH="$("$PG_CONFIG" --bindir):$PATH" "$@"
	fi
}

wi_workdir() {
	local d
	d=$(mktemp -d "${TMPDIR:-/tmp}/webhook_ingest.XXXXXX")
	chmod 755 "$d"
	[ "$(id -u)" -eq 0 ] && chown "$WI_USER" "$d"
	printf '%s\n' "$d"
}

# wi_cluster_start DIR PORT [extra postgresql.conf lines...]
wi_cluster_start() {
	local dir=$1 port=$2
	shift 2
	wi_as_user initdb -D "$dir/data" -A trust -U postgres --no-locale -E UTF8 >/dev/null
	{
		echo "port = $port"
		echo "listen_addresses = ''"
		echo "unix_socket_directories = '$dir'"
		echo "shared_preload_libraries = 'webhook_ingest'"
		for line in "$@"; do echo "$line"; done
	} >>"$dir/data/postgresql.conf"
	wi_as_user pg_ctl -D "$dir/data" -l "$dir/server.log" -w start >/dev/null
}

wi_cluster_stop() {
	[ -f "$1/data/postmaster.pid" ] && wi_as_user pg_ctl -D "$1/data" -m fast -w stop >/dev/null 2>&1 || true
}

# wi_upstream_start PORT [DELAY_MS] LOG [HOST:PORT...]: test/upstream.py on
# 127.0.0.1:PORT and on each extra loopback HOST:PORT; sets WI_UPSTREAM_PID;
# fails if any of them does not answer.  Ports below 32768 stay clear of the
# ephemeral range, where a loopback client may hold the port.
wi_upstream_start() {
	local port=$1 delay=${2:-0} log=$3 hp pending
	shift 3
	python3 "$WI_TOP/test/upstream.py" "$port" "$delay" "$@" >"$log" 2>&1 &
	WI_UPSTREAM_PID=$!
	pending="127.0.0.1:$port $*"
	for _ in $(seq 1 100); do
		for hp in $pending; do
			(exec 3<>"/dev/tcp/${hp%:*}/${hp##*:}") 2>/dev/null && pending=${pending/$hp/}
		done
		if [ -z "${pending// /}" ]; then
			kill -0 "$WI_UPSTREAM_PID" 2>/dev/null && return 0
		fi
		kill -0 "$WI_UPSTREAM_PID" 2>/dev/null || break
		sleep 0.1
	done
	wi_log "the upstream stand-in did not start on${pending}:"
	cat "$log" >&2
	return 1
}
