# mem.sh CAFILE PORT N : restart cluster, add source, enqueue N, sample worker RSS
. /tmp/a15/env.sh; cd /tmp/a15
ca=$1; port=$2; n=$3; name=m$RANDOM
U pg_ctl -D /tmp/a15/data -l /tmp/a15/server.log -w restart >/dev/null
sleep 2
wpid=$(Q -c "select pid from webhook_ingest.worker_status")
echo "worker $wpid start: $(grep -E 'VmRSS' /proc/$wpid/status)"
cat > /tmp/a15/mem_$name.sql <<EOS
\set ca \`cat $ca\`
select webhook_ingest.add_source('$name', 'https://127.0.0.1:$port/posts/{external_id}', tls_ca => :'ca', timeout_ms => 30000);
EOS
Q -f /tmp/a15/mem_$name.sql >/dev/null
Q -c "select count(*) from generate_series(1,$n) g, webhook_ingest.enqueue('$name', 'x'||g)" >/dev/null
t0=$(date +%s.%N); peak=0
while :; do
  r=$(awk '/VmRSS/{print $2}' /proc/$wpid/status); [ "$r" -gt "$peak" ] && peak=$r
  left=$(Q -c "select count(*) from webhook_ingest.jobs where source='$name' and state not in ('done','dead')")
  [ "$left" = 0 ] && break; sleep 0.2
done
t1=$(date +%s.%N)
echo "peak VmRSS ${peak} kB, VmHWM $(awk '/VmHWM/{print $2}' /proc/$wpid/status) kB, $(echo "$t1 - $t0" | bc) s"
Q -c "select state, count(*) from webhook_ingest.jobs where source='$name' group by 1"
Q -c "select connections_opened, tls_connections_opened, fetched from webhook_ingest.worker_status"
ps -o pid,rss,time,cmd -p $wpid | tail -1
