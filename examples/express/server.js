'use strict';
// Starts the app.  The connection is the app role's (a member of
// webhook_ingest_enqueue), from the usual PG* variables (PGHOST, PGPORT,
// PGDATABASE, PGUSER, PGPASSWORD) or DATABASE_URL.
const { Pool } = require('pg');
const { createApp } = require('./app');

const pool = new Pool(process.env.DATABASE_URL ? { connectionString: process.env.DATABASE_URL } : {});
const port = Number(process.env.PORT || 3000);
const host = process.env.HOST || '127.0.0.1';
createApp(pool).listen(port, host, () => console.log(`listening on http://${host}:${port}`));
