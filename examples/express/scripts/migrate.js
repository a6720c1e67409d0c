'use strict';
// Creates the tables and the handler (db/schema.sql), lets the app role read
// the tables, and registers the two sources with webhook_ingest.  Run as the
// owner role, a member of webhook_ingest_admin (no superuser):
//   PGUSER=express_owner PGDATABASE=express_blog node scripts/migrate.js
// Settings from the environment (examples below are for the tests only):
//   APP_ROLE               the app's role (express_app)
//   UPSTREAM_URL           where the worker fetches a post
//   BLOG_WEBHOOK_SECRETS   Standard Webhooks secrets, comma-separated (rotation)
//   STRIPE_WEBHOOK_SECRET  Stripe's endpoint secret (whsec_...)
const fs = require('node:fs');
const path = require('node:path');
const { Client } = require('pg');

const settings = {
  appRole: process.env.APP_ROLE || 'express_app',
  upstreamUrl: process.env.UPSTREAM_URL || 'http://127.0.0.1:18080/posts/{external_id}',
  blogSecrets: (process.env.BLOG_WEBHOOK_SECRETS ||
    'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw,whsec_bmV3LXNlY3JldC1mb3ItdGhlLXJvdGF0aW9u').split(',').filter(Boolean),
  stripeSecret: process.env.STRIPE_WEBHOOK_SECRET || 'whsec_test_stripe_endpoint_secret',
};

// name, signature scheme, secrets, where the post id is in the body.
function sources(s) {
  return [
    { name: 'blog', scheme: 'standard-webhooks', secrets: s.blogSecrets, externalIdPath: '$.data.post_id' },
    // Stripe's event id is the body's "id": receive() takes it by itself.
    { name: 'payments', scheme: 'stripe', secrets: [s.stripeSecret], externalIdPath: '$.data.object.id' },
  ];
}

async function register(client, source, upstreamUrl) {
  const { rows } = await client.query('SELECT 1 FROM webhook_ingest.sources WHERE name = $1', [source.name]);
  const fn = rows.length ? 'alter_source' : 'add_source';
  await client.query(
    `SELECT webhook_ingest.${fn}(name => $1, url_template => $2,
        handler => 'store_post(text,jsonb,jsonb)'::regprocedure,
        signature_scheme => $3, signing_secrets => $4::text[], external_id_path => $5::jsonpath)`,
    [source.name, upstreamUrl, source.scheme, source.secrets, source.externalIdPath]);
}

async function migrate(clientConfig = {}, s = settings) {
  const client = new Client(clientConfig);
  await client.connect();
  try {
    await client.query('BEGIN');
    await client.query(fs.readFileSync(path.join(__dirname, '..', 'db', 'schema.sql'), 'utf8'));
    const role = client.escapeIdentifier(s.appRole);
    await client.query(`GRANT SELECT ON posts, tags, categories, post_tags, post_categories TO ${role}`);
    for (const source of sources(s)) await register(client, source, s.upstreamUrl);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    await client.end();
  }
}

module.exports = { migrate, settings };

if (require.main === module) {
  migrate().then(() => console.log('migrated'), (err) => {
    console.error(`migrate: ${err.message}`);
    process.exit(1);
  });
}
