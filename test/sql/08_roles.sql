-- Roles (0.3.0): a non-superuser admin role; handlers registered only by
-- roles with their owner's privileges; per-source app access
-- (enqueue_roles) for enqueue, the jobs table and wait_for_job.
\set VERBOSITY default
\set SHOW_CONTEXT never

SELECT rolname, rolcanlogin, rolsuper, rolbypassrls FROM pg_roles
 WHERE rolname IN ('webhook_ingest_admin', 'webhook_ingest_enqueue', 'webhook_ingest_monitor') ORDER BY 1;

CREATE ROLE regress_admin LOGIN;                -- a plain role: no superuser, no BYPASSRLS
GRANT webhook_ingest_admin TO regress_admin;
CREATE ROLE regress_admin2 LOGIN;
GRANT webhook_ingest_admin TO regress_admin2;
CREATE ROLE regress_dev LOGIN;                  -- owns a handler; not an admin
CREATE ROLE regress_team;                       -- a group of app roles
CREATE ROLE regress_app1 LOGIN IN ROLE webhook_ingest_enqueue, regress_team;
CREATE ROLE regress_app2 LOGIN IN ROLE webhook_ingest_enqueue;

CREATE SCHEMA regress_h;
GRANT USAGE ON SCHEMA regress_h TO PUBLIC;
-- errors as text, numbers masked (job ids depend on earlier tests)
CREATE FUNCTION regress_h.try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9]+', 'N', 'g');
END $$;
CREATE FUNCTION regress_h.dev_handler(external_id text, details jsonb, payload jsonb)
RETURNS void LANGUAGE sql AS 'SELECT';
ALTER FUNCTION regress_h.dev_handler(text, jsonb, jsonb) OWNER TO regress_dev;
CREATE FUNCTION regress_h.admin_handler(external_id text, details jsonb, payload jsonb)
RETURNS void LANGUAGE sql AS 'SELECT';
ALTER FUNCTION regress_h.admin_handler(text, jsonb, jsonb) OWNER TO regress_admin;
CREATE FUNCTION regress_h.su_handler(external_id text, details jsonb, payload jsonb)
RETURNS void LANGUAGE sql AS 'SELECT';

-- 1. the admin administers without being superuser
SET ROLE regress_admin;
SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user;
SELECT webhook_ingest.add_source('r_open', 'http://127.0.0.1:9/o/{external_id}',
                                 handler => 'regress_h.admin_handler(text,jsonb,jsonb)');
SELECT webhook_ingest.add_source('r_team', 'http://127.0.0.1:9/t/{external_id}', enqueue_roles => '{regress_team}');
SELECT webhook_ingest.add_source('r_gone', 'http://127.0.0.1:9/g/{external_id}');
SELECT webhook_ingest.alter_source('r_open', timeout_ms => 5000, headers => '{"X-Api-Key": "k"}');
SELECT webhook_ingest.url_for('r_open', 'a/b');
SELECT webhook_ingest.pause_source('r_gone');
SELECT webhook_ingest.resume_source('r_gone');
SELECT webhook_ingest.drop_source('r_gone');
SELECT name, handler, headers, timeout_ms, paused, enqueue_roles FROM webhook_ingest.sources
 WHERE name LIKE 'r\_%' ORDER BY name;
-- it reads every table and view
SELECT count(*) >= 0 AS sources FROM webhook_ingest.sources;
SELECT count(*) >= 0 AS jobs FROM webhook_ingest.jobs;
SELECT count(*) >= 0 AS events FROM webhook_ingest.events;
SELECT count(*) >= 0 AS documents FROM webhook_ingest.documents;
SELECT count(*) >= 0 AS purge_position FROM webhook_ingest.purge_position;
SELECT count(*) >= 0 AS queue_stats FROM webhook_ingest.queue_stats;
SELECT count(*) >= 0 AS worker_status FROM webhook_ingest.worker_status;
SELECT count(*) >= 0 AS latency FROM webhook_ingest.latency;
SELECT count(*) >= 0 AS recent_failures FROM webhook_ingest.recent_failures;
SELECT webhook_ingest.purge_events(1) >= 0 AS purged;
-- but writes the tables only through the functions
SELECT regress_h.try($$DELETE FROM webhook_ingest.jobs$$);
SELECT regress_h.try($$INSERT INTO webhook_ingest.jobs (source, external_id) VALUES ('r_open', 'forged')$$);
SELECT regress_h.try($$DELETE FROM webhook_ingest.sources$$);
SELECT regress_h.try($$UPDATE webhook_ingest.sources SET paused = true$$);
SELECT regress_h.try($$DELETE FROM webhook_ingest.events$$);
-- nor may it enqueue (it is no app)
SELECT regress_h.try($$SELECT webhook_ingest.enqueue('r_open', 'x')$$);
RESET ROLE;

-- 2. registering a handler takes its owner's privileges
SET ROLE regress_admin;
-- another role's function: refused, by add_source, alter_source and a direct write alike
SELECT webhook_ingest.add_source('r_borrow', 'http://127.0.0.1:9/b/{external_id}',
                                 handler => 'regress_h.dev_handler(text,jsonb,jsonb)');
\echo :SQLSTATE
SELECT webhook_ingest.add_source('r_borrow', 'http://127.0.0.1:9/b/{external_id}',
                                 handler => 'regress_h.su_handler(text,jsonb,jsonb)');
\echo :SQLSTATE
SELECT webhook_ingest.alter_source('r_open', handler => 'regress_h.dev_handler(text,jsonb,jsonb)');
\echo :SQLSTATE
UPDATE webhook_ingest.sources SET handler = 'regress_h.dev_handler(text,jsonb,jsonb)' WHERE name = 'r_open';
\echo :SQLSTATE
INSERT INTO webhook_ingest.sources (name, url_template, handler)
VALUES ('r_borrow', 'http://127.0.0.1:9/b/{external_id}', 'regress_h.dev_handler(text,jsonb,jsonb)');
\echo :SQLSTATE
-- and a direct write is validated like add_source
UPDATE webhook_ingest.sources SET headers = '{"X-A": "a\r\nInjected: 1"}' WHERE name = 'r_open';
\echo :SQLSTATE
UPDATE webhook_ingest.sources SET url_template = 'file:///etc/{external_id}' WHERE name = 'r_open';
\echo :SQLSTATE
SELECT name, handler FROM webhook_ingest.sources WHERE name LIKE 'r\_%' ORDER BY name;
-- another admin does not have regress_admin's privileges either
SET ROLE regress_admin2;
SELECT webhook_ingest.add_source('r_borrow', 'http://127.0.0.1:9/b/{external_id}',
                                 handler => 'regress_h.admin_handler(text,jsonb,jsonb)');
\echo :SQLSTATE
-- but may change everything else of a source whose handler it could not have set
SELECT webhook_ingest.alter_source('r_open', timeout_ms => 6000);
SELECT webhook_ingest.alter_source('r_open', drop_handler => true);
RESET ROLE;
-- a role with regress_dev's privileges may register its function
GRANT regress_dev TO regress_admin2;
SET ROLE regress_admin2;
SELECT webhook_ingest.alter_source('r_open', handler => 'regress_h.dev_handler(text,jsonb,jsonb)');
RESET ROLE;
REVOKE regress_dev FROM regress_admin2;
-- a superuser may register any function
SELECT webhook_ingest.add_source('r_su', 'http://127.0.0.1:9/s/{external_id}',
                                 handler => 'regress_h.su_handler(text,jsonb,jsonb)');
SELECT webhook_ingest.alter_source('r_su', handler => 'regress_h.dev_handler(text,jsonb,jsonb)');
SELECT name, handler FROM webhook_ingest.sources WHERE name LIKE 'r\_%' ORDER BY name;

-- 3. enqueue_roles: who may enqueue into a source, and see its jobs
SET ROLE regress_app1;      -- in regress_team
SELECT outcome FROM webhook_ingest.enqueue('r_team', 'x1', NULL, 'e-x1');
SELECT outcome FROM webhook_ingest.enqueue('r_open', 'x1');
RESET ROLE;
SELECT id AS team_job FROM webhook_ingest.jobs WHERE source = 'r_team' AND external_id = 'x1' \gset
SELECT id AS open_job FROM webhook_ingest.jobs WHERE source = 'r_open' AND external_id = 'x1' \gset
SELECT count(*) AS events_before FROM webhook_ingest.events WHERE source = 'r_team' \gset
SET ROLE regress_app2;      -- not in regress_team
SELECT * FROM webhook_ingest.enqueue('r_team', 'x2', NULL, 'e-x2');
\echo :SQLSTATE
-- a redelivery and a coalesce are refused as well, before anything is written
SELECT * FROM webhook_ingest.enqueue('r_team', 'x1', NULL, 'e-x1');
\echo :SQLSTATE
SELECT * FROM webhook_ingest.enqueue('r_team', 'x1');
\echo :SQLSTATE
-- on the SQL path (REPEATABLE READ) too
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM webhook_ingest.enqueue('r_team', 'x2');
\echo :SQLSTATE
ROLLBACK;
-- an unknown source still says so, and a source open to all still takes it
SELECT * FROM webhook_ingest.enqueue('r_none', 'x2');
\echo :SQLSTATE
SELECT outcome FROM webhook_ingest.enqueue('r_open', 'x2');
-- it sees the jobs of r_open only
SELECT count(*) AS team_jobs_seen FROM webhook_ingest.jobs WHERE id = :team_job;
SELECT count(*) AS open_jobs_seen FROM webhook_ingest.jobs WHERE id = :open_job;
SELECT regress_h.try(format('SELECT webhook_ingest.wait_for_job(%s, %L)', :team_job, '0'));
SELECT webhook_ingest.wait_for_job(:open_job, '0');
-- the columns an app may read are unchanged
SELECT regress_h.try($$SELECT payload FROM webhook_ingest.jobs$$);
RESET ROLE;
SELECT count(*) - :events_before AS events_added, count(*) FILTER (WHERE event_id = 'e-x2') AS e_x2
  FROM webhook_ingest.events WHERE source = 'r_team';
SELECT external_id, events FROM webhook_ingest.jobs WHERE source = 'r_team' ORDER BY external_id;
SET ROLE regress_app1;
SELECT count(*) AS team_jobs_seen FROM webhook_ingest.jobs WHERE id = :team_job;
SELECT webhook_ingest.wait_for_job(:team_job, '0');
RESET ROLE;
-- the admin and the monitor see everything
SET ROLE regress_admin;
SELECT count(*) AS team_jobs_seen FROM webhook_ingest.jobs WHERE id = :team_job;
SELECT webhook_ingest.wait_for_job(:team_job, '0');
SELECT source, pending FROM webhook_ingest.queue_stats WHERE source LIKE 'r\_%' ORDER BY source;
RESET ROLE;
CREATE ROLE regress_mon LOGIN IN ROLE webhook_ingest_monitor;
SET ROLE regress_mon;
SELECT source, pending FROM webhook_ingest.queue_stats WHERE source LIKE 'r\_%' ORDER BY source;
RESET ROLE;

-- an app in READ COMMITTED enqueues (row security on jobs does not apply to the owner's writes)
SET ROLE regress_app1;
SELECT outcome FROM webhook_ingest.enqueue('r_team', 'x3');
RESET ROLE;

-- alter_source: NULL keeps enqueue_roles, a list replaces it, reset_enqueue_roles clears it
SET ROLE regress_admin;
SELECT webhook_ingest.alter_source('r_team', timeout_ms => 7000);
SELECT enqueue_roles FROM webhook_ingest.sources WHERE name = 'r_team';
SELECT webhook_ingest.alter_source('r_team', enqueue_roles => '{regress_app2}');
SELECT enqueue_roles FROM webhook_ingest.sources WHERE name = 'r_team';
RESET ROLE;
SET ROLE regress_app2;
SELECT outcome FROM webhook_ingest.enqueue('r_team', 'x2');
RESET ROLE;
SET ROLE regress_app1;
SELECT regress_h.try($$SELECT webhook_ingest.enqueue('r_team', 'x1')$$);
SELECT count(*) AS team_jobs_seen FROM webhook_ingest.jobs WHERE id = :team_job;
RESET ROLE;
SET ROLE regress_admin;
SELECT webhook_ingest.alter_source('r_team', reset_enqueue_roles => true);
SELECT enqueue_roles FROM webhook_ingest.sources WHERE name = 'r_team';
RESET ROLE;
SET ROLE regress_app1;
SELECT outcome FROM webhook_ingest.enqueue('r_team', 'x1');
RESET ROLE;
-- bad lists
SELECT webhook_ingest.alter_source('r_team', enqueue_roles => '{}');
\echo :SQLSTATE
SELECT webhook_ingest.alter_source('r_team', enqueue_roles => ARRAY[NULL]::regrole[]);
\echo :SQLSTATE
SELECT webhook_ingest.alter_source('r_team', enqueue_roles => '{regress_app1}', reset_enqueue_roles => true);
\echo :SQLSTATE
SELECT webhook_ingest.add_source('r_bad', 'http://127.0.0.1:9/b/{external_id}', enqueue_roles => '{}');
\echo :SQLSTATE
SELECT webhook_ingest.add_source('r_bad', 'http://127.0.0.1:9/b/{external_id}', enqueue_roles => '{regress_nobody}');
\echo :SQLSTATE

-- 4. the admin operates jobs: cancel, retry, retry_dead, wait
SET ROLE regress_admin;
SELECT webhook_ingest.cancel(:open_job);
SELECT webhook_ingest.retry(:open_job);
SELECT webhook_ingest.retry_dead('r_open');
SELECT webhook_ingest.drop_source('r_su', force => true);
SELECT webhook_ingest.drop_source('r_open', force => true);
SELECT webhook_ingest.drop_source('r_team', force => true);
RESET ROLE;
SELECT count(*) AS left_behind FROM webhook_ingest.jobs WHERE source LIKE 'r\_%';

-- 5. app roles still may not administer
SET ROLE regress_app1;
SELECT regress_h.try($$SELECT webhook_ingest.add_source('r_x', 'http://h/{external_id}')$$);
SELECT regress_h.try($$SELECT webhook_ingest.cancel(1)$$);
SELECT regress_h.try($$SELECT count(*) FROM webhook_ingest.sources$$);
RESET ROLE;
