# race.sh NAME URL N TIMEOUT_MS [extra add_source args] : add source + enqueue N (max_attempts 1)
. /tmp/a15/env.sh; cd /tmp/a15
name=$1 url=$2 n=$3 to=$4; shift 4
Q -c "select webhook_ingest.add_source('$name', '$url', tls_ca => pg_read_file('/tmp/a15/certs/ca.pem'), max_attempts => 1, timeout_ms => $to $*)" >/dev/null
Q -c "select count(*) from generate_series(1,$n) g, webhook_ingest.enqueue('$name', '$name'||g)" >/dev/null
