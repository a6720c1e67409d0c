'use strict';
// The Express endpoint against a real PostgreSQL with webhook_ingest and its
// worker, and the upstream stand-in (test/upstream.py) on 127.0.0.1:18080.
// Deliveries are signed by the senders' own libraries: `standardwebhooks`
// (Svix, Clerk, ...) and `stripe`.  Run: npm test (PGHOST, PGPORT set; the
// database and roles of dba-setup.sql exist).
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { Pool } = require('pg');
const { Webhook } = require('standardwebhooks');
const Stripe = require('stripe');
const { createApp } = require('../app');
const { migrate, settings } = require('../scripts/migrate');

const database = process.env.EXPRESS_DB || 'express_blog';
const ownerRole = process.env.EXPRESS_DB_OWNER || 'express_owner';
const appRole = settings.appRole;
const stripe = new Stripe('sk_test_not_used_no_request_is_made');

let app; // the app's pool, as express_app
let admin; // webhook_ingest's tables, as express_owner (an admin)
let server;
let baseUrl;

before(async () => {
  await migrate({ database, user: ownerRole });
  admin = new Pool({ database, user: ownerRole, max: 2 });
  app = new Pool({ database, user: appRole, max: 4 });
  server = createApp(app).listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  baseUrl = `http://127.0.0.1:${server.address().port}`;
});

after(async () => {
  await new Promise((resolve) => server.close(resolve));
  await app.end();
  await admin.end();
});

const newId = (prefix) => `${prefix}-${crypto.randomUUID().slice(0, 12)}`;
const blogEvent = (postId, type = 'post.updated') =>
  JSON.stringify({ type, timestamp: '2026-12-01T12:00:00Z', data: { post_id: postId } });
const stripeEvent = (postId, eventId = newId('evt')) =>
  JSON.stringify({ id: eventId, object: 'event', type: 'product.updated', data: { object: { id: postId } } });

async function post(source, body, headers) {
  const r = await fetch(`${baseUrl}/webhooks/${source}`, {
    method: 'POST', body, headers: { 'content-type': 'application/json', ...headers },
  });
  return { status: r.status, json: await r.json() };
}

// A Standard Webhooks delivery, signed by the standardwebhooks package.
function deliverBlog(body, { msgId = newId('msg'), date = new Date(), secret = settings.blogSecrets[0],
  signedBody = body } = {}) {
  const signature = new Webhook(secret).sign(msgId, date, signedBody);
  return post('blog', body, {
    'webhook-id': msgId,
    'webhook-timestamp': String(Math.floor(date.getTime() / 1000)),
    'webhook-signature': signature,
  });
}

// A Stripe delivery, signed by the stripe package.
function deliverStripe(body, { secret = settings.stripeSecret, timestamp, signedBody = body } = {}) {
  const header = stripe.webhooks.generateTestHeaderString({ payload: signedBody, secret, timestamp });
  return post('payments', body, { 'stripe-signature': header });
}

async function waitForJob(jobId) {
  const { rows } = await app.query("SELECT webhook_ingest.wait_for_job($1, '30 s') AS done", [jobId]);
  if (rows[0].done) return;
  // Say why: the job's state and error, which only an admin may read.
  const job = await admin.query('SELECT state, last_error FROM webhook_ingest.jobs WHERE id = $1', [jobId]);
  assert.fail(`job ${jobId} did not end done: ${JSON.stringify(job.rows[0])}`);
}

async function adminCount(sql, params) {
  const { rows } = await admin.query(sql, params);
  return Number(rows[0].count);
}
const jobsFor = (source, postId) =>
  adminCount('SELECT count(*) FROM webhook_ingest.jobs WHERE source = $1 AND external_id = $2', [source, postId]);
const eventsFor = (source, eventId) =>
  adminCount('SELECT count(*) FROM webhook_ingest.events WHERE source = $1 AND event_id = $2', [source, eventId]);

async function upstreamPost(postId) {
  const r = await fetch(`http://127.0.0.1:18080/posts/${encodeURIComponent(postId)}`);
  return r.json();
}

// The post's rows, read in one statement (one snapshot), as the app role.
async function storedPost(postId) {
  const { rows } = await app.query(
    `SELECT p.title, p.fetch_count,
            ARRAY(SELECT t.name FROM post_tags pt JOIN tags t ON t.id = pt.tag_id
                   WHERE pt.post_id = p.id ORDER BY t.name) AS tags,
            ARRAY(SELECT c.name FROM post_categories pc JOIN categories c ON c.id = pc.category_id
                   WHERE pc.post_id = p.id ORDER BY c.name) AS categories
       FROM posts p WHERE p.external_id = $1`, [postId]);
  return rows;
}

async function assertPostAsFetched(postId, fetches = 1) {
  const want = await upstreamPost(postId);
  const rows = await storedPost(postId);
  assert.equal(rows.length, 1, `one row for ${postId}`);
  assert.equal(rows[0].title, want.title);
  assert.equal(rows[0].fetch_count, fetches);
  assert.deepEqual(rows[0].tags, [...want.tags].sort());
  assert.deepEqual(rows[0].categories, [...want.categories].sort());
}

test('the app and the owner are not superusers; the handler is the owner\'s', async () => {
  for (const [pool, role, memberOf] of [[app, appRole, 'webhook_ingest_enqueue'],
    [admin, ownerRole, 'webhook_ingest_admin']]) {
    const { rows } = await pool.query(
      `SELECT current_user AS who, rolsuper, pg_has_role(current_user, $1, 'USAGE') AS member
         FROM pg_roles WHERE rolname = current_user`, [memberOf]);
    assert.deepEqual(rows[0], { who: role, rolsuper: false, member: true });
  }
  const { rows } = await admin.query(
    `SELECT DISTINCT pg_get_userbyid(p.proowner) AS owner FROM webhook_ingest.sources s
       JOIN pg_proc p ON p.oid = s.handler WHERE s.name IN ('blog', 'payments')`);
  assert.deepEqual(rows, [{ owner: ownerRole }]);
});

test('a fresh Standard Webhooks delivery is 202 queued, and the worker stores the fetched post', async () => {
  const postId = newId('post');
  const r = await deliverBlog(blogEvent(postId));
  assert.equal(r.status, 202, JSON.stringify(r.json));
  assert.equal(r.json.outcome, 'queued');
  assert.equal(typeof r.json.job_id, 'number');
  await waitForJob(r.json.job_id);
  await assertPostAsFetched(postId);
});

test('a Stripe delivery is 202 queued; its redelivery (same event id) is 202 duplicate', async () => {
  const postId = newId('prod');
  const eventId = newId('evt');
  const body = stripeEvent(postId, eventId);
  const first = await deliverStripe(body);
  assert.deepEqual([first.status, first.json.outcome], [202, 'queued']);
  const again = await deliverStripe(body); // Stripe signs each attempt anew
  assert.deepEqual([again.status, again.json.outcome], [202, 'duplicate']);
  assert.ok([first.json.job_id, null].includes(again.json.job_id));
  await waitForJob(first.json.job_id);
  await assertPostAsFetched(postId);
  assert.equal(await jobsFor('payments', postId), 1);
  assert.equal(await eventsFor('payments', eventId), 1);
});

test('a Standard Webhooks redelivery (same webhook-id) is 202 duplicate, before and after the fetch', async () => {
  const postId = newId('post');
  const msgId = newId('msg');
  const first = await deliverBlog(blogEvent(postId), { msgId });
  assert.deepEqual([first.status, first.json.outcome], [202, 'queued']);
  const again = await deliverBlog(blogEvent(postId), { msgId });
  assert.deepEqual([again.status, again.json.outcome], [202, 'duplicate']);
  await waitForJob(first.json.job_id);
  const later = await deliverBlog(blogEvent(postId), { msgId });
  assert.deepEqual([later.status, later.json.outcome], [202, 'duplicate']);
  assert.equal(await jobsFor('blog', postId), 1);
  await assertPostAsFetched(postId);
});

test('a tampered body is 401 and writes nothing', async () => {
  const postId = newId('post');
  const otherId = newId('post');
  const msgId = newId('msg');
  const r = await deliverBlog(blogEvent(otherId), { msgId, signedBody: blogEvent(postId) });
  assert.equal(r.status, 401, JSON.stringify(r.json));
  const s = await deliverStripe(stripeEvent(otherId), { signedBody: stripeEvent(postId) });
  assert.equal(s.status, 401, JSON.stringify(s.json));
  for (const id of [postId, otherId]) {
    assert.equal(await jobsFor('blog', id) + await jobsFor('payments', id), 0);
    assert.equal((await storedPost(id)).length, 0);
  }
  assert.equal(await eventsFor('blog', msgId), 0);
});

test('a wrong secret, no signature or a stale timestamp is 401', async () => {
  const postId = newId('post');
  const body = blogEvent(postId);
  const wrong = 'whsec_' + Buffer.from('not the sender secret').toString('base64');
  const tenMinutesAgo = new Date(Date.now() - 10 * 60 * 1000);
  const cases = [
    ['standard-webhooks, wrong secret', () => deliverBlog(body, { secret: wrong })],
    ['standard-webhooks, timestamp 10 minutes old', () => deliverBlog(body, { date: tenMinutesAgo })],
    ['standard-webhooks, no signature header', () => post('blog', body, { 'webhook-id': newId('msg'),
      'webhook-timestamp': String(Math.floor(Date.now() / 1000)) })],
    ['stripe, wrong secret', () => deliverStripe(stripeEvent(postId), { secret: 'whsec_wrong' })],
    ['stripe, timestamp 10 minutes old', () => deliverStripe(stripeEvent(postId),
      { timestamp: Math.floor(tenMinutesAgo.getTime() / 1000) })],
  ];
  for (const [name, deliver] of cases) {
    const r = await deliver();
    assert.equal(r.status, 401, `${name}: ${JSON.stringify(r.json)}`);
  }
  assert.equal(await jobsFor('blog', postId) + await jobsFor('payments', postId), 0);
});

test('the second secret of a rotation is accepted', async () => {
  const postId = newId('post');
  const r = await deliverBlog(blogEvent(postId), { secret: settings.blogSecrets[1] });
  assert.deepEqual([r.status, r.json.outcome], [202, 'queued']);
  await waitForJob(r.json.job_id);
  await assertPostAsFetched(postId);
});

test('two deliveries for one post close together make one job', async () => {
  // The upstream answers after 300 ms here, so the second delivery finds the
  // first one's job pending (coalesced) or being fetched (requeued).
  await admin.query("SELECT webhook_ingest.alter_source('blog', url_template => $1)",
    [`${settings.upstreamUrl}?delay_ms=300`]);
  try {
    const postId = newId('post');
    const [first, second] = [await deliverBlog(blogEvent(postId, 'post.created')),
      await deliverBlog(blogEvent(postId, 'post.tagged'))];
    assert.deepEqual([first.status, first.json.outcome], [202, 'queued']);
    assert.equal(second.status, 202);
    assert.ok(['coalesced', 'requeued'].includes(second.json.outcome), second.json.outcome);
    assert.equal(second.json.job_id, first.json.job_id);
    await waitForJob(first.json.job_id);
    await assertPostAsFetched(postId, second.json.outcome === 'requeued' ? 2 : 1);
    assert.equal(await jobsFor('blog', postId), 1);
  } finally {
    await admin.query("SELECT webhook_ingest.alter_source('blog', url_template => $1)", [settings.upstreamUrl]);
  }
});

test('shared tags and categories exist once', async () => {
  const postIds = Array.from({ length: 6 }, () => newId('post'));
  const jobs = [];
  for (const postId of postIds) {
    const r = await deliverBlog(blogEvent(postId));
    assert.equal(r.status, 202);
    jobs.push(r.json.job_id);
  }
  for (const job of jobs) await waitForJob(job);
  for (const postId of postIds) await assertPostAsFetched(postId);
  const dup = await app.query(`SELECT (SELECT count(*) - count(DISTINCT name) FROM tags)
                                    + (SELECT count(*) - count(DISTINCT name) FROM categories) AS n`);
  assert.equal(Number(dup.rows[0].n), 0);
  const upstream = await Promise.all(postIds.map(upstreamPost));
  const { rows } = await app.query('SELECT name FROM tags WHERE name = ANY ($1)', [upstream.flatMap((p) => p.tags)]);
  assert.equal(rows.length, new Set(upstream.flatMap((p) => p.tags)).size);
});

test('a body that is not JSON, or has no usable post id, is 400 and writes nothing', async () => {
  const { rows } = await admin.query('SELECT coalesce(max(id), 0) AS last FROM webhook_ingest.jobs');
  const cases = [
    ['not JSON', 'this is not json', '22P02'],
    ['no post id', JSON.stringify({ type: 'post.updated', data: {} }), '22023'],
    ['post id not a scalar', JSON.stringify({ data: { post_id: ['a', 'b'] } }), '22023'],
    ['over max_payload_size', JSON.stringify({ data: { post_id: newId('post') }, pad: 'x'.repeat(1100 * 1024) }), '54000'],
  ];
  for (const [name, body, sqlstate] of cases) {
    const msgId = newId('msg');
    const r = await deliverBlog(body, { msgId });
    assert.deepEqual([r.status, r.json.sqlstate], [400, sqlstate], name);
    assert.equal(await eventsFor('blog', msgId), 0, name);
  }
  assert.equal(await adminCount('SELECT count(*) FROM webhook_ingest.jobs WHERE id > $1', [rows[0].last]), 0);
});

test('a shard that is unreachable (08006) or a closed intake (57P03) is 503 with Retry-After', async () => {
  // What the router (webhook_ingest_router) raises, from a stand-in pool: the app's mapping only.
  for (const code of ['08006', '08001', '57P03']) {
    const failing = { query: async () => { const e = new Error('shard 2 of webhook_ingest_shards is unreachable'); e.code = code; throw e; } };
    const s = createApp(failing).listen(0, '127.0.0.1');
    await new Promise((resolve) => s.once('listening', resolve));
    try {
      const r = await fetch(`http://127.0.0.1:${s.address().port}/webhooks/blog`, { method: 'POST', body: '{}' });
      assert.deepEqual([r.status, r.headers.get('retry-after'), (await r.json()).sqlstate], [503, '5', code], code);
    } finally {
      await new Promise((resolve) => s.close(resolve));
    }
  }
});
