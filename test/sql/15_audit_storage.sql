-- Audit of 0.6.0's storage (app role's side): the jobs view is a UNION ALL
-- over queue, job_history and jobs_legacy; the planner flattens it into an
-- append of its branches, so the security barrier of the view alone let a
-- caller's leaky qual (COST lower than the row filter) see the ids and
-- states of other sources' jobs, which 0.5.0's row security hid.
\set VERBOSITY terse
CREATE ROLE regress_st_app LOGIN IN ROLE webhook_ingest_enqueue;
CREATE SCHEMA regress_st AUTHORIZATION regress_st_app;
SELECT webhook_ingest.add_source('st_mine', 'http://127.0.0.1:9/o/{external_id}',
                                 enqueue_roles => ARRAY['regress_st_app']::regrole[]);
SELECT webhook_ingest.add_source('st_other', 'http://127.0.0.1:9/o/{external_id}',
                                 enqueue_roles => ARRAY['webhook_ingest_admin']::regrole[]);
SELECT webhook_ingest.pause_source('st_mine');
SELECT webhook_ingest.pause_source('st_other');
SELECT count(*) FROM webhook_ingest.enqueue('st_other', 'hidden-pending', '{"secret": 1}');
-- A done job of the other source, filed into job_history through the view.
INSERT INTO webhook_ingest.jobs (source, external_id, state, attempts, finished_at)
VALUES ('st_other', 'hidden-done', 'done', 1, now());
-- (the ids the app role must not learn, to tell them from other tests' jobs)
CREATE TABLE regress_st.hidden AS SELECT id FROM webhook_ingest.jobs WHERE source = 'st_other';
GRANT SELECT ON regress_st.hidden TO regress_st_app;
SET ROLE regress_st_app;
SELECT count(*) FROM webhook_ingest.enqueue('st_mine', 'visible');
CREATE FUNCTION regress_st.peek(id bigint, state text) RETURNS boolean
LANGUAGE plpgsql COST 0.0000001 AS $$
BEGIN
    IF EXISTS (SELECT FROM regress_st.hidden h WHERE h.id = peek.id) THEN
        RAISE NOTICE 'peek saw a % job of st_other', state;
    END IF;
    RETURN true;
END
$$;
-- No job of the other source reaches the qual; the app role's own job does.
SELECT count(*) > 0 AS sees_its_own FROM webhook_ingest.jobs WHERE regress_st.peek(id, state::text);
SELECT count(*) FROM webhook_ingest.jobs j JOIN regress_st.hidden h ON h.id = j.id;
-- Nor does an error tell which ids exist (no done job is the app role's).
SELECT count(*) FROM webhook_ingest.jobs WHERE 1 / (id - id) = 0 AND state = 'done';
RESET ROLE;
DROP FUNCTION regress_st.peek(bigint, text);
DROP TABLE regress_st.hidden;
DROP SCHEMA regress_st;
SELECT webhook_ingest.drop_source('st_mine', force => true);
SELECT webhook_ingest.drop_source('st_other', force => true);
DROP ROLE regress_st_app;
