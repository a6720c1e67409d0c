-- examples/django/dba-setup.sql: what a superuser (the DBA) does once for the
-- blog, before Django's migrations run.  CREATE EXTENSION needs a superuser;
-- nothing after this does.
--
--   psql -v ON_ERROR_STOP=1 -d postgres -f dba-setup.sql
--
-- blog_template holds the extension; blog (production) and test_blog (made
-- by `manage.py test`) are clones of it, so each has the extension and gets
-- its own worker as soon as it exists.  A template gets no worker itself.
CREATE ROLE blog_owner LOGIN CREATEDB;  -- runs the migrations, owns the tables and the handler
CREATE ROLE blog_app LOGIN;             -- the Django app's connection
CREATE DATABASE blog_template IS_TEMPLATE true;
\connect blog_template
CREATE EXTENSION webhook_ingest;        -- creates the roles webhook_ingest_admin, _enqueue, _monitor
GRANT webhook_ingest_admin TO blog_owner;   -- may register sources (add_source) with its own functions
GRANT webhook_ingest_enqueue TO blog_app;   -- may call receive(), enqueue(), wait_for_job()
\connect postgres
CREATE DATABASE blog TEMPLATE blog_template OWNER blog_owner;
