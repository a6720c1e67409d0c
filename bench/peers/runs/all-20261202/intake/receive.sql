\set i random(1, 200000)
SELECT r.job_id, r.outcome FROM signed_requests s, webhook_ingest.receive('bench_rx', s.headers, s.body) r WHERE s.i = :i;
