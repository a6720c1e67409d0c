# bench/peers/lib.sh: setup of the peers for bench/peers/run (sourced after
# test/lib.sh).
#
#   wi_peers_setup  graphile-worker and pg-boss from the npm registry into
#                   bench/peers/node_modules (wi_npm_ci, from the committed
#                   package-lock.json), PgQ (postgresql-15-pgq3) and its
#                   ticker daemon pgqd from Debian (wi_install_packages with
#                   WI_PEERS_PACKAGES, with gnuplot for bench/peers/plot; pgqd's service is stopped and disabled:
#                   the bench runs its own pgqd), and, when PG_CONFIG is not
#                   the system PostgreSQL (a private copy), the package's
#                   pgq files copied into that copy's lib and extension dirs.

WI_PEERS_DIR="$WI_TOP/bench/peers"
WI_PEERS_PACKAGES="postgresql-$WI_PG_MAJOR-pgq3 pgqd python3-psycopg2 nodejs gnuplot-nox"

wi_peers_setup() {
	local missing=0 f pkglib share
	dpkg-query -W -f='${Status}' pgqd 2>/dev/null | grep -q "install ok installed" || missing=1
	WI_PACKAGES=$WI_PEERS_PACKAGES wi_install_packages || return 1
	[ "$missing" = 0 ] || wi_stop_service pgqd
	wi_npm_ci "$WI_PEERS_DIR" || return 1
	pkglib=$("$PG_CONFIG" --pkglibdir) share=$("$PG_CONFIG" --sharedir)
	if [ "$pkglib" != "/usr/lib/postgresql/$WI_PG_MAJOR/lib" ]; then
		for f in $(dpkg -L "postgresql-$WI_PG_MAJOR-pgq3"); do
			case $f in
			/usr/lib/postgresql/"$WI_PG_MAJOR"/lib/*.so) cmp -s "$f" "$pkglib/${f##*/}" || cp "$f" "$pkglib/" ;;
			/usr/share/postgresql/"$WI_PG_MAJOR"/extension/pgq*) cmp -s "$f" "$share/extension/${f##*/}" || cp "$f" "$share/extension/" ;;
			esac
		done
	fi
}

# wi_peers_versions: one line, the versions in use.
wi_peers_versions() {
	printf 'node %s, graphile-worker %s, pg-boss %s, pg %s, pgq %s, pgqd %s\n' "$(node --version)" \
		"$(node -p 'require(process.argv[1]).version' "$WI_PEERS_DIR/node_modules/graphile-worker/package.json")" \
		"$(node -p 'require(process.argv[1]).version' "$WI_PEERS_DIR/node_modules/pg-boss/package.json")" \
		"$(node -p 'require(process.argv[1]).version' "$WI_PEERS_DIR/node_modules/pg/package.json")" \
		"$(dpkg-query -W -f='${Version}' "postgresql-$WI_PG_MAJOR-pgq3")" "$(dpkg-query -W -f='${Version}' pgqd)"
}
