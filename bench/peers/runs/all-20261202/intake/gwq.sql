\set ev random(1000000, 1000000000000000)
\set obj random(1, 1000000000000000)
SELECT graphile_worker.add_job('fetch_post', json_build_object('id', :obj::text), queue_name => :obj::text, job_key => :obj::text, job_key_mode => 'preserve_run_at')
;
