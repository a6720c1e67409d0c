-- receive(source, headers, body) (0.4.0): the signature checked with the
-- source's scheme and secrets (28000, nothing written, on any failure), the
-- event id from the scheme's delivery id or event_id_path, the object id from
-- external_id_path, the body as the payload; then enqueue's outcomes.  The
-- intake settings are validated, and as secret as headers.  Requests are
-- signed here, now, with pgcrypto's hmac().
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE EXTENSION IF NOT EXISTS pgcrypto;
CREATE SCHEMA rxtest;
CREATE FUNCTION rxtest.hex(key text, msg text) RETURNS text LANGUAGE sql
  AS $$ SELECT encode(public.hmac(convert_to(msg, 'UTF8'), convert_to(key, 'UTF8'), 'sha256'), 'hex') $$;
CREATE FUNCTION rxtest.now_s() RETURNS bigint LANGUAGE sql AS $$ SELECT floor(extract(epoch FROM now()))::bigint $$;
-- what each sender sends with a body
CREATE FUNCTION rxtest.github(body text, delivery text, secret text DEFAULT 'gh-secret') RETURNS jsonb LANGUAGE sql
  AS $$ SELECT jsonb_build_object('X-Hub-Signature-256', 'sha256=' || rxtest.hex(secret, body),
                                  'X-GitHub-Delivery', delivery) $$;
CREATE FUNCTION rxtest.standard(body text, msg_id text, ts bigint DEFAULT rxtest.now_s(), prefix text DEFAULT 'webhook') RETURNS jsonb
  LANGUAGE sql AS $$
    SELECT jsonb_build_object(prefix || '-id', msg_id, prefix || '-timestamp', ts::text,
        prefix || '-signature', 'v1,' || encode(public.hmac(convert_to(msg_id || '.' || ts || '.' || body, 'UTF8'),
                                                           decode('c2VjcmV0LWtleS1ieXRlcw==', 'base64'), 'sha256'), 'base64')) $$;
CREATE FUNCTION rxtest.stripe(body text, ts bigint DEFAULT rxtest.now_s()) RETURNS jsonb LANGUAGE sql
  AS $$ SELECT jsonb_build_object('Stripe-Signature', 't=' || ts || ',v1=' || rxtest.hex('whsec_stripe', ts || '.' || body)) $$;
CREATE FUNCTION rxtest.slack(body text, ts bigint DEFAULT rxtest.now_s()) RETURNS jsonb LANGUAGE sql
  AS $$ SELECT jsonb_build_object('X-Slack-Request-Timestamp', ts::text,
                                  'X-Slack-Signature', 'v0=' || rxtest.hex('slack-secret', 'v0:' || ts || ':' || body)) $$;
CREATE FUNCTION rxtest.shopify(body text, event text) RETURNS jsonb LANGUAGE sql
  AS $$ SELECT jsonb_build_object('X-Shopify-Hmac-Sha256',
                                  encode(public.hmac(convert_to(body, 'UTF8'), convert_to('shop-secret', 'UTF8'), 'sha256'), 'base64'),
                                  'X-Shopify-Event-Id', event, 'X-Shopify-Webhook-Id', 'w-' || event) $$;
GRANT USAGE ON SCHEMA rxtest TO PUBLIC;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA rxtest TO PUBLIC;

-- one source per scheme (paused: this suite has a worker, and no upstream)
SELECT webhook_ingest.add_source('rx_gh', 'http://127.0.0.1:9/{external_id}', signature_scheme => 'github',
                                 signing_secrets => '{gh-secret}', external_id_path => '$.issue.number');
SELECT webhook_ingest.add_source('rx_sw', 'http://127.0.0.1:9/{external_id}', signature_scheme => 'standard-webhooks',
                                 signing_secrets => '{whsec_old0key0aaaaaaaaaaaaaaaa, whsec_c2VjcmV0LWtleS1ieXRlcw==}',
                                 external_id_path => '$.data.id');
SELECT webhook_ingest.add_source('rx_st', 'http://127.0.0.1:9/{external_id}', signature_scheme => 'stripe',
                                 signing_secrets => '{whsec_stripe}', external_id_path => '$.data.object.id');
SELECT webhook_ingest.add_source('rx_sl', 'http://127.0.0.1:9/{external_id}', signature_scheme => 'slack',
                                 signing_secrets => '{slack-secret}', signature_tolerance => '1 minute',
                                 external_id_path => '$.event.channel');
SELECT webhook_ingest.add_source('rx_sh', 'http://127.0.0.1:9/{external_id}', signature_scheme => 'shopify',
                                 signing_secrets => '{shop-secret}', external_id_path => '$.id');
SELECT webhook_ingest.pause_source(s) FROM unnest('{rx_gh,rx_sw,rx_st,rx_sl,rx_sh}'::text[]) s;

-- GitHub: the delivery id is the event id; the issue number (a JSON number) is the object id
\set b1 '{"action": "opened", "issue": {"number": 1347}}'
SELECT outcome FROM webhook_ingest.receive('rx_gh', rxtest.github(:'b1', 'gh-d1'), :'b1');
SELECT outcome FROM webhook_ingest.receive('rx_gh', rxtest.github(:'b1', 'gh-d1'), :'b1');   -- redelivered
\set b2 '{"action": "edited", "issue": {"number": 1347}}'
SELECT outcome FROM webhook_ingest.receive('rx_gh', rxtest.github(:'b2', 'gh-d2'), :'b2');   -- the same object
-- header names in any case, as frameworks pass them
SELECT outcome FROM webhook_ingest.receive('rx_gh',
    jsonb_build_object('x-hub-signature-256', rxtest.github(:'b2', 'x')->>'X-Hub-Signature-256', 'x-github-delivery', 'gh-d2'), :'b2');
SELECT external_id, events, payload FROM webhook_ingest.jobs WHERE source = 'rx_gh';
SELECT event_id FROM webhook_ingest.events WHERE source = 'rx_gh' ORDER BY 1;

-- Standard Webhooks: webhook-id (or svix-id) is the event id; either secret of a rotation verifies
\set b3 '{"type": "invoice.paid", "data": {"id": "inv_1"}}'
SELECT outcome FROM webhook_ingest.receive('rx_sw', rxtest.standard(:'b3', 'msg_1'), :'b3');
SELECT outcome FROM webhook_ingest.receive('rx_sw', rxtest.standard(:'b3', 'msg_1', prefix => 'svix'), :'b3');
SELECT outcome FROM webhook_ingest.receive('rx_sw', rxtest.standard(:'b3', 'msg_2', prefix => 'svix'), :'b3');
-- Stripe: the body's id is the event id
\set b4 '{"id": "evt_1", "type": "charge.succeeded", "data": {"object": {"id": "ch_1"}}}'
SELECT outcome FROM webhook_ingest.receive('rx_st', rxtest.stripe(:'b4'), :'b4');
SELECT outcome FROM webhook_ingest.receive('rx_st', rxtest.stripe(:'b4'), :'b4');
-- Slack: the body's event_id
\set b5 '{"event_id": "Ev1", "event": {"type": "message", "channel": "C1"}}'
SELECT outcome FROM webhook_ingest.receive('rx_sl', rxtest.slack(:'b5'), :'b5');
SELECT outcome FROM webhook_ingest.receive('rx_sl', rxtest.slack(:'b5'), :'b5');
-- Shopify: X-Shopify-Event-Id first
\set b6 '{"id": 820982911946154508, "title": "shirt"}'
SELECT outcome FROM webhook_ingest.receive('rx_sh', rxtest.shopify(:'b6', 'sh-e1'), :'b6');
SELECT outcome FROM webhook_ingest.receive('rx_sh', rxtest.shopify(:'b6', 'sh-e1'), :'b6');
SELECT source, external_id, events FROM webhook_ingest.jobs WHERE source IN ('rx_sw', 'rx_st', 'rx_sl', 'rx_sh') ORDER BY 1;
SELECT source, event_id FROM webhook_ingest.events WHERE source IN ('rx_sw', 'rx_st', 'rx_sl', 'rx_sh') ORDER BY 1, 2;

-- every failed check is 28000, says which check, and writes nothing
SELECT count(*) AS jobs_before FROM webhook_ingest.jobs \gset
SELECT count(*) AS events_before FROM webhook_ingest.events \gset
\set b7 '{"action": "opened", "issue": {"number": 7}}'
SELECT * FROM webhook_ingest.receive('rx_gh', '{"X-GitHub-Delivery": "gh-d7"}', :'b7');
\echo :SQLSTATE
SELECT * FROM webhook_ingest.receive('rx_gh', rxtest.github(:'b7', 'gh-d7'), replace(:'b7', '7', '8'));
\echo :SQLSTATE
SELECT * FROM webhook_ingest.receive('rx_gh', rxtest.github(:'b7', 'gh-d7', secret => 'guess'), :'b7');
\echo :SQLSTATE
SELECT * FROM webhook_ingest.receive('rx_sw', rxtest.standard(:'b3', 'msg_3', rxtest.now_s() - 310), :'b3');
\echo :SQLSTATE
SELECT * FROM webhook_ingest.receive('rx_sw', rxtest.standard(:'b3', 'msg_3', rxtest.now_s() + 310), :'b3');
\echo :SQLSTATE
SELECT * FROM webhook_ingest.receive('rx_sl', rxtest.slack(:'b5', rxtest.now_s() - 61), :'b5');   -- the source's own tolerance
\echo :SQLSTATE
SELECT * FROM webhook_ingest.receive('rx_st', '{"Stripe-Signature": "t=abc,v1=zz"}', :'b4');
\echo :SQLSTATE
SELECT * FROM webhook_ingest.receive('rx_gh', rxtest.github('not json at all', 'gh-d9'), 'not json at all');
\echo :SQLSTATE
SELECT count(*) = :jobs_before AS no_job_written, (SELECT count(*) FROM webhook_ingest.events) = :events_before AS no_event_written
  FROM webhook_ingest.jobs;

-- a verified body that cannot be used: 22P02 (not JSON, the token clipped), 22023 (no id), 54000 (too big)
SELECT * FROM webhook_ingest.receive('rx_gh', rxtest.github('{"issue": ' || repeat('x', 5000) || '}', 'gh-d10'),
                                     '{"issue": ' || repeat('x', 5000) || '}');
\echo :SQLSTATE
\set b11 '{"issue": {"title": "no number"}}'
SELECT * FROM webhook_ingest.receive('rx_gh', rxtest.github(:'b11', 'gh-d11'), :'b11');
\echo :SQLSTATE
\set b12 '{"issue": {"number": {"n": 1}}}'
SELECT * FROM webhook_ingest.receive('rx_gh', rxtest.github(:'b12', 'gh-d12'), :'b12');
\echo :SQLSTATE
\set b13 '{"issue": {"number": true}}'
SELECT * FROM webhook_ingest.receive('rx_gh', rxtest.github(:'b13', 'gh-d13'), :'b13');
\echo :SQLSTATE
SET webhook_ingest.max_payload_size = '1kB';
SELECT '{"issue": {"number": 14, "body": "' || repeat('y', 2000) || '"}}' AS b14 \gset
SELECT * FROM webhook_ingest.receive('rx_gh', rxtest.github(:'b14', 'gh-d14'), :'b14');
\echo :SQLSTATE
RESET webhook_ingest.max_payload_size;
-- an event_id_path that finds nothing is an error too; one that finds the id is used
SELECT webhook_ingest.alter_source('rx_gh', event_id_path => '$.delivery');
SELECT * FROM webhook_ingest.receive('rx_gh', rxtest.github(:'b7', 'gh-d7'), :'b7');
\echo :SQLSTATE
\set b15 '{"delivery": "body-d15", "issue": {"number": 15}}'
SELECT outcome FROM webhook_ingest.receive('rx_gh', rxtest.github(:'b15', 'gh-d15'), :'b15');
SELECT event_id FROM webhook_ingest.events WHERE source = 'rx_gh' AND event_id LIKE '%15';
SELECT webhook_ingest.alter_source('rx_gh', reset_event_id_path => true);
-- bad arguments
SELECT * FROM webhook_ingest.receive('rx_gh', NULL, :'b7');
\echo :SQLSTATE
SELECT * FROM webhook_ingest.receive('rx_gh', '[]', :'b7');
\echo :SQLSTATE
SELECT * FROM webhook_ingest.receive('nope', '{}', '{}');
\echo :SQLSTATE

-- a source without intake settings: receive refuses (55000), enqueue still works
SELECT webhook_ingest.add_source('rx_plain', 'http://127.0.0.1:9/{external_id}');
SELECT * FROM webhook_ingest.receive('rx_plain', '{}', '{}');
\echo :SQLSTATE
SELECT webhook_ingest.alter_source('rx_plain', signature_scheme => 'github', signing_secrets => '{s}');
SELECT * FROM webhook_ingest.receive('rx_plain', '{}', '{}');
\echo :SQLSTATE

-- the settings are checked, whoever writes them (a secret is never quoted)
SELECT webhook_ingest.alter_source('rx_plain', signature_scheme => 'hmac-md5');
\echo :SQLSTATE
SELECT webhook_ingest.alter_source('rx_plain', signature_scheme => 'standard-webhooks');
\echo :SQLSTATE
SELECT webhook_ingest.alter_source('rx_plain', signing_secrets => '{}');
\echo :SQLSTATE
SELECT webhook_ingest.alter_source('rx_plain', signing_secrets => ARRAY['a', NULL]);
\echo :SQLSTATE
SELECT webhook_ingest.alter_source('rx_plain', signing_secrets => ARRAY['']);
\echo :SQLSTATE
SELECT webhook_ingest.alter_source('rx_plain', signature_tolerance => '-1 second');
\echo :SQLSTATE
SELECT webhook_ingest.alter_source('rx_plain', drop_signature => true, signing_secrets => '{x}');
\echo :SQLSTATE
UPDATE webhook_ingest.sources SET signature_scheme = NULL WHERE name = 'rx_plain';
\echo :SQLSTATE
SELECT webhook_ingest.add_source('rx_bad', 'http://127.0.0.1:9/{external_id}', signing_secrets => '{s}');
\echo :SQLSTATE
SELECT webhook_ingest.alter_source('rx_plain', drop_signature => true);
SELECT name, signature_scheme, signing_secrets FROM webhook_ingest.sources WHERE name = 'rx_plain';

-- app roles: receive like enqueue (enqueue_roles apply), but the secrets stay unreadable
SELECT webhook_ingest.alter_source('rx_gh', enqueue_roles => '{regress_team}');
SET ROLE regress_app1;                              -- in regress_team
SELECT outcome FROM webhook_ingest.receive('rx_gh', rxtest.github(:'b7', 'gh-d7'), :'b7');
SELECT signing_secrets FROM webhook_ingest.sources;
\echo :SQLSTATE
SELECT webhook_ingest.verify_signature('github', 'gh-secret', rxtest.github(:'b7', 'x'), :'b7') AS app_may_verify;
SET ROLE regress_app2;                              -- not in regress_team
SELECT * FROM webhook_ingest.receive('rx_gh', rxtest.github(:'b7', 'gh-d7b'), :'b7');
\echo :SQLSTATE
SET ROLE regress_stranger;                          -- not an app role at all
SELECT * FROM webhook_ingest.receive('rx_gh', rxtest.github(:'b7', 'gh-d7c'), :'b7');
\echo :SQLSTATE
RESET ROLE;
-- an admin sets a rotation without superuser
SET ROLE regress_admin;
SELECT webhook_ingest.alter_source('rx_gh', signing_secrets => '{gh-secret-2, gh-secret}');
SELECT name, signing_secrets FROM webhook_ingest.sources WHERE name = 'rx_gh';
RESET ROLE;
\set b16 '{"issue": {"number": 16}}'
SELECT outcome FROM webhook_ingest.receive('rx_gh', rxtest.github(:'b16', 'gh-d16', secret => 'gh-secret-2'), :'b16');
SELECT outcome FROM webhook_ingest.receive('rx_gh', rxtest.github(:'b16', 'gh-d17', secret => 'gh-secret'), :'b16');

-- not on a standby, not in a read-only transaction
BEGIN READ ONLY;
SELECT * FROM webhook_ingest.receive('rx_gh', rxtest.github(:'b16', 'gh-d18'), :'b16');
\echo :SQLSTATE
ROLLBACK;

SELECT webhook_ingest.drop_source(s, force => true)
  FROM unnest('{rx_gh,rx_sw,rx_st,rx_sl,rx_sh,rx_plain}'::text[]) s;
DROP SCHEMA rxtest CASCADE;
DROP EXTENSION pgcrypto;
