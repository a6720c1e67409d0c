export PG_CONFIG=/opt/pgD/usr/lib/postgresql/15/bin/pg_config
export PGBIN=/opt/pgD/usr/lib/postgresql/15/bin
export PGHOST=/tmp/a15 PGPORT=55415 PGUSER=postgres PGDATABASE=postgres
N() { ip netns exec a15 "$@"; }
U() { ip netns exec a15 runuser -u postgres -- env PATH=$PGBIN:$PATH PGHOST=$PGHOST PGPORT=$PGPORT PGUSER=postgres "$@"; }
Q() { U psql -X -v ON_ERROR_STOP=1 -qAt "$@"; }
