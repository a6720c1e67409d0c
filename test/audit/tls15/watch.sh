# watch.sh SECS SRC... : per second, the count of unfinished jobs per source
. /tmp/a15/env.sh; secs=$1; shift; t0=$(date +%s.%N)
for i in $(seq 1 $secs); do
  line=$(Q -c "select string_agg(s || '=' || coalesce((select count(*) from webhook_ingest.jobs j where j.source=s and j.state not in ('done','dead')),0), ' ' order by s) from unnest(string_to_array('$*',' ')) s")
  printf '%5.1f %s\n' $(echo "$(date +%s.%N) - $t0" | bc) "$line"
  case "$line" in *[1-9]*) ;; *) break;; esac
  sleep 1
done
