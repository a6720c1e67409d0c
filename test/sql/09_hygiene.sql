-- Input hygiene (0.3.0): the payload cap, search_path pinned in every
-- SECURITY DEFINER function, no message echoing more than about 100 bytes of
-- an input.
\set VERBOSITY default
\set SHOW_CONTEXT never

SELECT webhook_ingest.add_source('cap', 'http://127.0.0.1:9/c/{external_id}');
SELECT FROM setval('webhook_ingest.jobs_id_seq', 1000000);    -- job ids in messages below
CREATE FUNCTION public.counts(OUT jobs bigint, OUT events bigint) LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM webhook_ingest.jobs WHERE source = 'cap'),
           (SELECT count(*) FROM webhook_ingest.events WHERE source = 'cap') $$;

-- 1. max_payload_size: over it, 54000 and nothing written, not even the event id
SHOW webhook_ingest.max_payload_size;
SET webhook_ingest.max_payload_size = '1kB';
SELECT * FROM counts();
SELECT * FROM webhook_ingest.enqueue('cap', 'big', jsonb_build_object('x', repeat('a', 2000)), 'evt-big');
\echo :SQLSTATE
SELECT * FROM counts();
-- a payload of a pending job is not replaced either
SELECT outcome FROM webhook_ingest.enqueue('cap', 'big', '{"small": true}', 'evt-small');
SELECT * FROM webhook_ingest.enqueue('cap', 'big', jsonb_build_object('x', repeat('a', 2000)));
\echo :SQLSTATE
SELECT external_id, payload, events FROM webhook_ingest.jobs WHERE source = 'cap';
-- the SQL path (REPEATABLE READ) refuses the same
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM webhook_ingest.enqueue('cap', 'big2', jsonb_build_object('x', repeat('a', 2000)), 'evt-big2');
\echo :SQLSTATE
ROLLBACK;
-- the event id was not remembered: the same delivery with a small payload is accepted
SELECT outcome FROM webhook_ingest.enqueue('cap', 'big2', '{}', 'evt-big');
SELECT * FROM counts();
-- the size is the jsonb datum's (uncompressed, 4-byte header included): 1024 bytes pass, 1025 do not
SELECT pg_column_size(jsonb_build_object('x', repeat('a', 1024 - 17))) AS at_cap;
SELECT outcome FROM webhook_ingest.enqueue('cap', 'edge', jsonb_build_object('x', repeat('a', 1024 - 17)));
SELECT * FROM webhook_ingest.enqueue('cap', 'edge', jsonb_build_object('x', repeat('a', 1024 - 16)));
\echo :SQLSTATE
RESET webhook_ingest.max_payload_size;
-- the default of 1 MB takes what is below it
SELECT outcome FROM webhook_ingest.enqueue('cap', 'big', jsonb_build_object('x', repeat('a', 500000)));
-- an application cannot raise it
CREATE ROLE regress_capped LOGIN IN ROLE webhook_ingest_enqueue;
SET ROLE regress_capped;
SET webhook_ingest.max_payload_size = '100MB';
\echo :SQLSTATE
RESET ROLE;

-- 2. every SECURITY DEFINER function of the extension pins search_path
SELECT p.oid::regprocedure AS security_definer, p.proconfig
  FROM pg_proc p
 WHERE p.pronamespace = 'webhook_ingest'::regnamespace AND p.prosecdef
 ORDER BY p.oid::regprocedure::text COLLATE "C";
SELECT p.oid::regprocedure AS unpinned
  FROM pg_proc p
 WHERE p.pronamespace = 'webhook_ingest'::regnamespace AND p.prosecdef
   AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false);
-- and enqueue and wait_for_job check their caller: they are not SECURITY DEFINER
SELECT p.oid::regprocedure, p.prosecdef FROM pg_proc p
 WHERE p.pronamespace = 'webhook_ingest'::regnamespace AND p.proname IN ('enqueue', 'wait_for_job');

-- 3. no message echoes more than about 100 bytes of an input
CREATE FUNCTION public.message_of(q text) RETURNS TABLE (code text, bytes int, message text)
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN;
EXCEPTION WHEN OTHERS THEN
    code := SQLSTATE;
    bytes := octet_length(SQLERRM);
    message := SQLERRM;
    RETURN NEXT;
END $$;
SELECT * FROM message_of(format('SELECT webhook_ingest.enqueue(%L, %L)', repeat('s', 5000), 'a'));
SELECT * FROM message_of(format('SELECT webhook_ingest.enqueue(%L, %L)', repeat('é', 3000), 'a'));
SELECT * FROM message_of(format('SELECT webhook_ingest.alter_source(%L, timeout_ms => 1)', repeat('s', 5000)));
SELECT * FROM message_of(format('SELECT webhook_ingest.drop_source(%L)', repeat('s', 5000)));
SELECT * FROM message_of(format('SELECT webhook_ingest.pause_source(%L)', repeat('s', 5000)));
SELECT * FROM message_of(format('SELECT webhook_ingest.resume_source(%L)', repeat('s', 5000)));
SELECT * FROM message_of(format('SELECT webhook_ingest.retry_dead(%L)', repeat('s', 5000)));
-- the notice of a retry that meets an active job names the object clipped
SELECT job_id AS long_job FROM webhook_ingest.enqueue('cap', repeat('L', 1000)) \gset
SELECT webhook_ingest.cancel(:long_job);
SELECT outcome FROM webhook_ingest.enqueue('cap', repeat('L', 1000));
SELECT webhook_ingest.retry(:long_job);
SELECT webhook_ingest.drop_source('cap', force => true);
