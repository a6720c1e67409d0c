'use strict';
// The webhook endpoint: the raw body and the headers go to
// webhook_ingest.receive(), which checks the signature, picks the post id and
// the event id, and queues one fetch per post.  The answer is 202 at once;
// the extension's worker fetches the post and calls the handler (store_post,
// db/schema.sql) after the statement commits.
const express = require('express');

// SQLSTATEs that mean the delivery is the sender's fault.
const UNAUTHORIZED = new Set(['28000']); // no or bad signature, timestamp outside the window
// Classes 22 (data exception: not JSON, no usable post id, an id too long, a NUL
// byte or invalid UTF-8, a number out of range) and 54 (over max_payload_size,
// nested too deep).
const BAD_REQUEST_CLASSES = new Set(['22', '54']);
// SQLSTATEs that mean "not now": class 08 (connection exception: behind the router
// webhook_ingest_router, the object's shard is unreachable, 08006) and 57P03 (the
// router's intake is closed while a shard is added).  503 with Retry-After: the
// sender delivers again later, and a redelivery is deduplicated by its event id.
const RETRY_LATER_CLASSES = new Set(['08']);
const RETRY_LATER = new Set(['57P03']);

function createApp(pool, { sources = ['blog', 'payments'] } = {}) {
  const app = express();
  // express.raw: the exact bytes the sender signed, not a re-serialised object.
  app.post('/webhooks/:source', express.raw({ type: '*/*', limit: '2mb' }), async (req, res, next) => {
    if (!sources.includes(req.params.source)) {
      return res.status(404).json({ error: 'no such source' });
    }
    const body = Buffer.isBuffer(req.body) ? req.body.toString('utf8') : '';
    try {
      // One statement, one transaction (the pool's autocommit): nothing to
      // roll back but this call.  Inside a transaction of your own, wrap it in
      // SAVEPOINT / ROLLBACK TO SAVEPOINT so a 401 leaves the rest usable.
      const { rows } = await pool.query(
        'SELECT job_id, outcome FROM webhook_ingest.receive($1, $2::jsonb, $3)',
        [req.params.source, JSON.stringify(req.headers), body]);
      const { job_id: jobId, outcome } = rows[0];
      // A redelivery (outcome "duplicate") is answered 202 too: the sender stops retrying.
      return res.status(202).json({ job_id: jobId === null ? null : Number(jobId), outcome });
    } catch (err) {
      if (UNAUTHORIZED.has(err.code)) return res.status(401).json({ error: 'invalid signature' });
      if (typeof err.code === 'string' && BAD_REQUEST_CLASSES.has(err.code.slice(0, 2))) return res.status(400).json({ error: 'bad webhook', sqlstate: err.code });
      if (typeof err.code === 'string' && (RETRY_LATER.has(err.code) || RETRY_LATER_CLASSES.has(err.code.slice(0, 2)))) {
        return res.status(503).set('Retry-After', '5').json({ error: 'try again later', sqlstate: err.code });
      }
      return next(err);
    }
  });
  return app;
}

module.exports = { createApp };
