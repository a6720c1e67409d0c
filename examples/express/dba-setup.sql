-- examples/express/dba-setup.sql: what a superuser (the DBA) does once for
-- the Express app.  CREATE EXTENSION needs a superuser; nothing after this
-- does: scripts/migrate.js runs as express_owner, the app as express_app.
--
--   psql -v ON_ERROR_STOP=1 -d postgres -f dba-setup.sql
CREATE ROLE express_owner LOGIN;   -- owns the tables and the handler, registers the sources
CREATE ROLE express_app LOGIN;     -- the app's connection
CREATE DATABASE express_blog OWNER express_owner;
\connect express_blog
CREATE EXTENSION webhook_ingest;   -- the database gets its worker at once
GRANT webhook_ingest_admin TO express_owner;
GRANT webhook_ingest_enqueue TO express_app;
