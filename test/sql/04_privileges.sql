-- The enqueue role may call enqueue() and nothing else; sources (with their
-- secrets) stay with admins.
\set VERBOSITY default
\set SHOW_CONTEXT never

SELECT rolcanlogin FROM pg_roles WHERE rolname = 'webhook_ingest_enqueue';
CREATE ROLE regress_app LOGIN;
GRANT webhook_ingest_enqueue TO regress_app;
CREATE ROLE regress_stranger LOGIN;
SELECT webhook_ingest.add_source('app', 'http://127.0.0.1:8080/app/{external_id}', headers => '{"Authorization": "Bearer hidden"}');

SET ROLE regress_app;
SELECT outcome FROM webhook_ingest.enqueue('app', 'a1', '{"k": "v"}', 'app-e1');
SELECT outcome FROM webhook_ingest.enqueue('app', 'a1', NULL, 'app-e1');
SELECT headers FROM webhook_ingest.sources;
\echo :SQLSTATE
SELECT external_id, payload FROM webhook_ingest.jobs;
\echo :SQLSTATE
SELECT count(*) FROM webhook_ingest.events;
\echo :SQLSTATE
INSERT INTO webhook_ingest.jobs (source, external_id) VALUES ('app', 'forged');
\echo :SQLSTATE
SELECT webhook_ingest.add_source('mine', 'http://h/{external_id}');
\echo :SQLSTATE
SELECT webhook_ingest.alter_source('app', headers => '{}');
\echo :SQLSTATE
SELECT webhook_ingest.drop_source('app', true);
\echo :SQLSTATE
SELECT webhook_ingest.url_for('app', 'a1');
\echo :SQLSTATE
SELECT webhook_ingest.purge_events();
\echo :SQLSTATE
SELECT * FROM webhook_ingest.worker_status;
\echo :SQLSTATE
RESET ROLE;

-- operators the caller puts first on search_path do not change what enqueue runs
CREATE SCHEMA regress_evil AUTHORIZATION regress_app;
SET ROLE regress_app;
CREATE FUNCTION regress_evil.never(webhook_ingest.job_state, webhook_ingest.job_state)
RETURNS boolean LANGUAGE sql AS 'SELECT false';
CREATE OPERATOR regress_evil.= (leftarg = webhook_ingest.job_state, rightarg = webhook_ingest.job_state,
                                function = regress_evil.never);
CREATE FUNCTION regress_evil.never(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT false';
CREATE OPERATOR regress_evil.= (leftarg = text, rightarg = text, function = regress_evil.never);
SET search_path = regress_evil, pg_catalog;
SELECT outcome FROM webhook_ingest.enqueue('app', 'a1', NULL, 'app-e2');
SELECT outcome FROM webhook_ingest.enqueue('app', 'a1', NULL, 'app-e2');
SELECT outcome FROM webhook_ingest.enqueue('app', 'a2');
RESET search_path;
RESET ROLE;

SET ROLE regress_stranger;
SELECT * FROM webhook_ingest.enqueue('app', 'a1');
\echo :SQLSTATE
RESET ROLE;

SELECT source, external_id, state, payload, events FROM webhook_ingest.jobs WHERE source = 'app' ORDER BY external_id;
