-- Audit of the 0.4.0 intake path (test/audit/FINDINGS-0.4.0.md), from a
-- hostile sender's side: someone who does not know the secret but captured
-- one valid delivery (a log, a proxy, a misdirected retry) and replays it.
-- For Standard Webhooks the receiver's replay protection is the signed
-- webhook-id, deduplicated, plus the timestamp window: a replay within the
-- window must be a duplicate however the unsigned parts of the request are
-- dressed.  And an oversized body is refused before any HMAC is computed.
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE EXTENSION IF NOT EXISTS pgcrypto;
CREATE SCHEMA audit12;
CREATE FUNCTION audit12.now_s() RETURNS bigint LANGUAGE sql AS $$ SELECT floor(extract(epoch FROM now()))::bigint $$;
-- what a Standard Webhooks sender (prefix webhook) or Svix (prefix svix) sends
CREATE FUNCTION audit12.standard(body text, msg_id text, prefix text DEFAULT 'webhook') RETURNS jsonb
  LANGUAGE sql AS $$
    SELECT jsonb_build_object(prefix || '-id', msg_id, prefix || '-timestamp', audit12.now_s()::text,
        prefix || '-signature', 'v1,' || encode(public.hmac(convert_to(msg_id || '.' || audit12.now_s() || '.' || body, 'UTF8'),
                                                           decode('c2VjcmV0LWtleS1ieXRlcw==', 'base64'), 'sha256'), 'base64')) $$;
SELECT webhook_ingest.add_source('au_sw', 'http://127.0.0.1:9/{external_id}', signature_scheme => 'svix',
                                 signing_secrets => '{whsec_c2VjcmV0LWtleS1ieXRlcw==}', external_id_path => '$.data.id');
SELECT webhook_ingest.add_source('au_gh', 'http://127.0.0.1:9/{external_id}', signature_scheme => 'github',
                                 signing_secrets => '{gh-secret, gh-secret-old}', external_id_path => '$.id');
SELECT webhook_ingest.pause_source('au_sw'), webhook_ingest.pause_source('au_gh');
\set body '{"type": "invoice.paid", "data": {"id": "inv_9"}}'

-- 1. A Svix delivery (svix-* headers), then the same delivery replayed with an
-- extra webhook-id header: the signature is over svix-id, so the event id
-- must be svix-id too, not the unsigned webhook-id.
SELECT outcome FROM webhook_ingest.receive('au_sw', audit12.standard(:'body', 'msg_svix_1', 'svix'), :'body');
SELECT outcome FROM webhook_ingest.receive('au_sw',
    audit12.standard(:'body', 'msg_svix_1', 'svix') || '{"webhook-id": "forged-1"}', :'body');
SELECT outcome FROM webhook_ingest.receive('au_sw',
    audit12.standard(:'body', 'msg_svix_1', 'svix') || '{"Webhook-Id": "forged-2"}', :'body');

-- 2. The signed id is the header's value trimmed: padding it with blanks must
-- not make a new event id.
SELECT outcome FROM webhook_ingest.receive('au_sw', audit12.standard(:'body', 'msg_std_1'), :'body');
SELECT outcome FROM webhook_ingest.receive('au_sw',
    audit12.standard(:'body', 'msg_std_1') || '{"webhook-id": "msg_std_1 "}', :'body');
SELECT outcome FROM webhook_ingest.receive('au_sw',
    audit12.standard(:'body', 'msg_std_1') || '{"webhook-id": "  msg_std_1"}', :'body');
-- (a blank-padded svix-id, too)
SELECT outcome FROM webhook_ingest.receive('au_sw',
    audit12.standard(:'body', 'msg_svix_1', 'svix') || '{"svix-id": "msg_svix_1 "}', :'body');
-- the only event ids remembered are the two signed ones
SELECT event_id, length(event_id) FROM webhook_ingest.events WHERE source = 'au_sw' ORDER BY 1;
SELECT external_id, events FROM webhook_ingest.jobs WHERE source = 'au_sw';

-- 3. Held: a webhook-id in another letter case beside the signed one is the
-- same header to both the signature and the event id (whichever comes first).
SELECT outcome FROM webhook_ingest.receive('au_sw',
    audit12.standard(:'body', 'msg_std_2') || '{"WEBHOOK-ID": "msg_std_2"}', :'body');
SELECT outcome FROM webhook_ingest.receive('au_sw',
    audit12.standard(:'body', 'msg_std_2') || '{"WEBHOOK-ID": "other"}', :'body');
\echo :SQLSTATE

-- 4. An oversized body is refused (54000) before its signature is computed:
-- an unsigned sender must not make every secret's HMAC run over it.  The
-- size check is the raw body's length, which a signed body fails as well.
SET webhook_ingest.max_payload_size = '1kB';
SELECT * FROM webhook_ingest.receive('au_gh',
    '{"X-Hub-Signature-256": "sha256=0000000000000000000000000000000000000000000000000000000000000000"}',
    '{"id": "' || repeat('x', 2000) || '"}');
\echo :SQLSTATE
SELECT * FROM webhook_ingest.receive('au_gh', '{}', '{"id": "' || repeat('x', 2000) || '"}');
\echo :SQLSTATE
-- a small unsigned body is still 28000
SELECT * FROM webhook_ingest.receive('au_gh', '{}', '{"id": "x"}');
\echo :SQLSTATE
RESET webhook_ingest.max_payload_size;

-- 5. What a signed body can hold (no crash, no echo of the body): a number
-- of 401 digits is an id; \u0000 is not valid JSON for jsonb (22P02, as the
-- README says of invalid JSON, rather than 22P05).
\set b5 '{"id": 1e400}'
SELECT outcome FROM webhook_ingest.receive('au_gh', jsonb_build_object('X-Hub-Signature-256',
    'sha256=' || encode(public.hmac(:'b5', 'gh-secret-old', 'sha256'), 'hex'), 'X-GitHub-Delivery', 'n1'), :'b5');
SELECT length(external_id) FROM webhook_ingest.jobs WHERE source = 'au_gh';
\set b5 '{"id": 1e99999999}'
SELECT outcome FROM webhook_ingest.receive('au_gh', jsonb_build_object('X-Hub-Signature-256',
    'sha256=' || encode(public.hmac(:'b5', 'gh-secret', 'sha256'), 'hex'), 'X-GitHub-Delivery', 'n2'), :'b5');
\echo :SQLSTATE
\set b5 '{"id": "a\\u0000b"}'
SELECT outcome FROM webhook_ingest.receive('au_gh', jsonb_build_object('X-Hub-Signature-256',
    'sha256=' || encode(public.hmac(:'b5', 'gh-secret', 'sha256'), 'hex'), 'X-GitHub-Delivery', 'n3'), :'b5');
\echo :SQLSTATE
\set VERBOSITY terse
SELECT '{"id": 1, "k": ' || repeat('[', 100000) || repeat(']', 100000) || '}' AS b5 \gset
SELECT outcome FROM webhook_ingest.receive('au_gh', jsonb_build_object('X-Hub-Signature-256',
    'sha256=' || encode(public.hmac(:'b5', 'gh-secret', 'sha256'), 'hex'), 'X-GitHub-Delivery', 'n4'), :'b5');
\echo :SQLSTATE
\set VERBOSITY default

-- 6. An admin cannot make every forged request cost unbounded HMAC work:
-- at most 16 secrets (a rotation needs two), each at most 4096 bytes.  With
-- 1 000 secrets a forged 1 MB request took 1.7 s; with one 50 MB secret,
-- 0.2 s even for an empty body.
SELECT webhook_ingest.add_source('au_many', 'http://127.0.0.1:9/{external_id}', signature_scheme => 'github',
    signing_secrets => (SELECT array_agg('s' || i) FROM generate_series(1, 17) i), external_id_path => '$.id');
\echo :SQLSTATE
SELECT webhook_ingest.add_source('au_many', 'http://127.0.0.1:9/{external_id}', signature_scheme => 'github',
    signing_secrets => ARRAY['ok', repeat('k', 4097)], external_id_path => '$.id');
\echo :SQLSTATE
SELECT webhook_ingest.add_source('au_many', 'http://127.0.0.1:9/{external_id}', signature_scheme => 'github',
    signing_secrets => (SELECT array_agg(repeat('k', 4096)) FROM generate_series(1, 16) i), external_id_path => '$.id');
UPDATE webhook_ingest.sources SET signing_secrets = signing_secrets || '{one-more}'::text[] WHERE name = 'au_many';
\echo :SQLSTATE
SELECT cardinality(signing_secrets) FROM webhook_ingest.sources WHERE name = 'au_many';

-- 7. A path that names a jsonpath variable would fail every receive() (42704:
-- receive passes none), so _check_intake refuses it, whoever writes the row.
CREATE FUNCTION audit12.path_ok(p jsonpath, as_event boolean DEFAULT false) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    IF as_event THEN
        PERFORM webhook_ingest._check_intake('github', '{k}', '5 min', '$.id', p);
    ELSE
        PERFORM webhook_ingest._check_intake('github', '{k}', '5 min', p, NULL);
    END IF;
    RETURN 'accepted';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
SELECT p, audit12.path_ok(p::jsonpath) FROM unnest(ARRAY[
    '$.a', '$.a ? (@ == $x)', 'strict $.a[$i to last]', '$.a[1, 2 to $n]', '$x.a',
    '$.a ? (exists($.b ? (@ starts with $p)))', '$.a ? (!(@ == 1) && -@ < +$q)',
    '$.a ? ((@ == 1) is unknown || $z == 1)', '$.a ? (@ like_regex "^x")', '$.a.datetime("HH24").type()',
    '$.**{2 to last}.a ? (@ % 2 == 1)', '$."$x"', '$.a ? (@ == "$x")']) p;
SELECT audit12.path_ok('$.b ? (@ == $v)', as_event => true);
-- (and a direct write of such a path is refused by sources_guard)
UPDATE webhook_ingest.sources SET external_id_path = '$.id ? (@ == $x)' WHERE name = 'au_gh';
\set b7 '{"id": "x"}'
SELECT outcome FROM webhook_ingest.receive('au_gh', jsonb_build_object('X-Hub-Signature-256',
    'sha256=' || encode(public.hmac(:'b7', 'gh-secret', 'sha256'), 'hex'), 'X-GitHub-Delivery', 'n7'), :'b7');
\echo :SQLSTATE
SELECT webhook_ingest.drop_source(s, force => true) FROM unnest('{au_sw,au_gh,au_many}'::text[]) s;
DROP SCHEMA audit12 CASCADE;
DROP EXTENSION pgcrypto;
