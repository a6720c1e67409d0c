-- Handlers run as the role that owns the function, and nothing a handler does
-- outlives it: settings, session advisory locks, a search_path that shadows
-- the worker's own SQL.  A runaway handler is cut off by handler_timeout.
-- Against test/upstream.py on 127.0.0.1:18080.
\set VERBOSITY terse
\set SHOW_CONTEXT never

\i test/worker/wait_until.sql

-- Enqueue one webhook; the state and error of the latest job for an object; whether it has finished.
CREATE FUNCTION run_job(p_src text, p_id text) RETURNS void
LANGUAGE sql AS $$ SELECT FROM webhook_ingest.enqueue(p_src, p_id) $$;
CREATE FUNCTION job_result(p_src text, p_id text) RETURNS TABLE (state text, error text)
LANGUAGE sql AS $$
    SELECT j.state::text, regexp_replace(j.last_error, 'after \d+ ms', 'after N ms')
      FROM webhook_ingest.jobs j WHERE j.source = p_src AND j.external_id = p_id
     ORDER BY j.id DESC LIMIT 1 $$;
CREATE FUNCTION finished(p_src text, p_id text) RETURNS boolean
LANGUAGE sql AS $$
    SELECT coalesce((SELECT j.state IN ('done', 'dead') FROM webhook_ingest.jobs j
                      WHERE j.source = p_src AND j.external_id = p_id ORDER BY j.id DESC LIMIT 1), false) $$;

-- A developer role that owns its handler and its table, and nothing else.
CREATE ROLE regress_dev NOLOGIN;
CREATE ROLE regress_dev2 NOLOGIN;
CREATE SCHEMA devs AUTHORIZATION regress_dev;
GRANT USAGE ON SCHEMA devs TO regress_dev2;
SET ROLE regress_dev;
CREATE TABLE devs.seen (external_id text, current_user_name name, session_user_name name,
                        search_path text, work_mem text, lock_timeout text, at timestamptz DEFAULT clock_timestamp());
GRANT INSERT, SELECT ON devs.seen TO regress_dev2;
CREATE FUNCTION devs.handle(external_id text, details jsonb, payload jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO devs.seen (external_id, current_user_name, session_user_name, search_path, work_mem, lock_timeout)
    VALUES (external_id, current_user, session_user, current_setting('search_path'),
            current_setting('work_mem'), current_setting('lock_timeout'));
    IF external_id = 'leak' THEN
        -- a session-level change: must not reach the next handler or the worker's own SQL
        PERFORM set_config('search_path', 'devs, pg_catalog, public', false);
        PERFORM set_config('work_mem', '1234kB', false);
        PERFORM pg_advisory_lock(4242);
    ELSIF external_id = 'escalate' THEN
        EXECUTE 'ALTER ROLE regress_dev SUPERUSER';
    ELSIF external_id = 'kill' THEN
        PERFORM pg_terminate_backend(pg_backend_pid());
    ELSIF external_id = 'temp' THEN
        CREATE TEMP TABLE handler_scratch (x int);
    ELSIF external_id LIKE 'sleep%' THEN
        PERFORM pg_sleep(3);
    END IF;
END $$;
-- a function that would shadow pg_catalog.pg_backend_pid() for SQL run with devs first on search_path
CREATE TABLE devs.hijacked (at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION devs.pg_backend_pid() RETURNS integer
LANGUAGE sql AS $$ INSERT INTO devs.hijacked DEFAULT VALUES RETURNING 0 $$;
RESET ROLE;

SELECT webhook_ingest.add_source('dev', 'http://127.0.0.1:18080/posts/{external_id}', 'devs.handle(text,jsonb,jsonb)',
                                 max_attempts => 1);

-- the handler runs as its owner, not as the worker's superuser
SELECT run_job('dev', 'who');
SELECT wait_until($$SELECT finished('dev', 'who')$$);
SELECT * FROM job_result('dev', 'who');
SELECT current_user_name, session_user_name = current_user AS session_is_bootstrap_superuser
  FROM devs.seen WHERE external_id = 'who';

-- the owner may not do as a handler what it may not do itself
SELECT run_job('dev', 'escalate');
SELECT wait_until($$SELECT finished('dev', 'escalate')$$);
SELECT * FROM job_result('dev', 'escalate');
SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_dev';
SELECT run_job('dev', 'kill');
SELECT wait_until($$SELECT finished('dev', 'kill')$$);
SELECT * FROM job_result('dev', 'kill');
SELECT run_job('dev', 'temp');
SELECT wait_until($$SELECT finished('dev', 'temp')$$);
SELECT * FROM job_result('dev', 'temp');

-- settings, search_path and session advisory locks do not outlive the handler
SELECT run_job('dev', 'leak');
SELECT wait_until($$SELECT finished('dev', 'leak')$$);
SELECT * FROM job_result('dev', 'leak');
SELECT run_job('dev', 'after-leak');
SELECT wait_until($$SELECT finished('dev', 'after-leak')$$);
SELECT * FROM job_result('dev', 'after-leak');
SELECT external_id, search_path, work_mem FROM devs.seen WHERE external_id IN ('leak', 'after-leak') ORDER BY at;
SELECT count(*) AS worker_sql_hijacked FROM devs.hijacked;
SELECT pg_try_advisory_lock(4242) AS advisory_lock_released;
SELECT pg_advisory_unlock(4242);

-- a renamed handler is picked up at once; so is a new owner
ALTER FUNCTION devs.handle(text, jsonb, jsonb) RENAME TO handle_renamed;
SELECT run_job('dev', 'renamed');
SELECT wait_until($$SELECT finished('dev', 'renamed')$$);
SELECT * FROM job_result('dev', 'renamed');
ALTER FUNCTION devs.handle_renamed(text, jsonb, jsonb) OWNER TO regress_dev2;
SELECT run_job('dev', 'new-owner');
SELECT wait_until($$SELECT finished('dev', 'new-owner')$$);
SELECT * FROM job_result('dev', 'new-owner');
SELECT external_id, current_user_name FROM devs.seen WHERE external_id IN ('renamed', 'new-owner') ORDER BY at;

-- an owner that lost EXECUTE on its handler: the job ends with a clear error
REVOKE EXECUTE ON FUNCTION devs.handle_renamed(text, jsonb, jsonb) FROM PUBLIC, regress_dev2;
SELECT run_job('dev', 'no-execute');
SELECT wait_until($$SELECT finished('dev', 'no-execute')$$);
SELECT * FROM job_result('dev', 'no-execute');
SELECT count(*) AS ran FROM devs.seen WHERE external_id = 'no-execute';
GRANT EXECUTE ON FUNCTION devs.handle_renamed(text, jsonb, jsonb) TO regress_dev2;

-- a runaway handler is cut off by webhook_ingest.handler_timeout; other jobs go on
ALTER SYSTEM SET webhook_ingest.handler_timeout = '300ms';
SELECT pg_reload_conf();
SELECT pg_sleep(0.3);
SELECT run_job('dev', 'sleep-1');
SELECT wait_until($$SELECT finished('dev', 'sleep-1')$$);
SELECT * FROM job_result('dev', 'sleep-1');
SELECT run_job('dev', 'after-sleep');
SELECT wait_until($$SELECT finished('dev', 'after-sleep')$$);
SELECT * FROM job_result('dev', 'after-sleep');
ALTER SYSTEM RESET webhook_ingest.handler_timeout;
SELECT pg_reload_conf();

SELECT webhook_ingest.drop_source('dev', true);
DROP SCHEMA devs CASCADE;
DROP ROLE regress_dev;
DROP ROLE regress_dev2;
