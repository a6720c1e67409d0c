\set ev random(1000000, 1000000000000000)
\set obj random(1, 1000000000000000)
SELECT job_id, outcome FROM webhook_ingest.enqueue('bench', :obj, NULL, :ev)
;
