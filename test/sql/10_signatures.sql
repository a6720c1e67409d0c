-- Signature verification (0.4.0): webhook_ingest.verify_signature(scheme,
-- secret, headers, body, tolerance) on each provider's published vector
-- (old timestamps: checked with a tolerance of 100 years), then on requests
-- signed here and now with pgcrypto's hmac(), an implementation independent
-- of ours: tampered, expired, future, rotated, malformed and huge headers,
-- header names in any case, the svix-* names, NULLs and the errors with their
-- SQLSTATE.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgcrypto;
RESET client_min_messages;
CREATE SCHEMA sigtest;
-- now, in whole seconds, from the same clock verify_signature reads
CREATE FUNCTION sigtest.now_s() RETURNS bigint LANGUAGE sql
  AS $$ SELECT floor(extract(epoch FROM clock_timestamp()))::bigint $$;
CREATE FUNCTION sigtest.hex(key text, msg text) RETURNS text LANGUAGE sql
  AS $$ SELECT encode(public.hmac(convert_to(msg, 'UTF8'), convert_to(key, 'UTF8'), 'sha256'), 'hex') $$;
CREATE FUNCTION sigtest.b64(key bytea, msg text) RETURNS text LANGUAGE sql
  AS $$ SELECT encode(public.hmac(convert_to(msg, 'UTF8'), key, 'sha256'), 'base64') $$;
-- Standard Webhooks headers for key (the base64 after whsec_), id, ts, body
CREATE FUNCTION sigtest.swh(key text, id text, ts bigint, body text) RETURNS jsonb LANGUAGE sql
  AS $$ SELECT jsonb_build_object('webhook-id', id, 'webhook-timestamp', ts::text,
                                  'webhook-signature', 'v1,' || sigtest.b64(decode(key, 'base64'), id || '.' || ts || '.' || body)) $$;
CREATE FUNCTION sigtest.stripe(secret text, ts bigint, body text) RETURNS jsonb LANGUAGE sql
  AS $$ SELECT jsonb_build_object('Stripe-Signature', 't=' || ts || ',v1=' || sigtest.hex(secret, ts || '.' || body)) $$;
CREATE FUNCTION sigtest.slack(secret text, ts bigint, body text) RETURNS jsonb LANGUAGE sql
  AS $$ SELECT jsonb_build_object('X-Slack-Request-Timestamp', ts::text,
                                  'X-Slack-Signature', 'v0=' || sigtest.hex(secret, 'v0:' || ts || ':' || body)) $$;

-- ---- Standard Webhooks: the libraries' test vector (standard-webhooks/
-- standard-webhooks, libraries/*/tests: test_sign_function and friends)
\set sw_secret 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'
\set sw_body '{"test": 2432232314}'
\set sw_headers '{"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330", "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}'
SELECT webhook_ingest.verify_signature('standard-webhooks', :'sw_secret', :'sw_headers', :'sw_body', '100 years') AS published_vector;
-- the secret without its whsec_ prefix; the scheme as "svix", in capitals
SELECT webhook_ingest.verify_signature('standard-webhooks', 'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', :'sw_headers', :'sw_body', '100 years') AS without_prefix,
       webhook_ingest.verify_signature('SVIX', :'sw_secret', :'sw_headers', :'sw_body', '100 years') AS scheme_svix;
-- the same vector with the default tolerance of 5 minutes: expired (2021)
SELECT webhook_ingest.verify_signature('standard-webhooks', :'sw_secret', :'sw_headers', :'sw_body') AS expired_by_default;
-- tampered body, tampered signature (the libraries' "invalid signature" case), tampered id, tampered timestamp
SELECT webhook_ingest.verify_signature('standard-webhooks', :'sw_secret', :'sw_headers', '{"test": 2432232315}', '100 years') AS tampered_body,
       webhook_ingest.verify_signature('standard-webhooks', :'sw_secret',
         jsonb_set(:'sw_headers', '{webhook-signature}', '"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA="'), :'sw_body', '100 years') AS tampered_signature,
       webhook_ingest.verify_signature('standard-webhooks', :'sw_secret',
         jsonb_set(:'sw_headers', '{webhook-id}', '"msg_p5jXN8AQM9LWM0D4loKWxJeK"'), :'sw_body', '100 years') AS tampered_id,
       webhook_ingest.verify_signature('standard-webhooks', :'sw_secret',
         jsonb_set(:'sw_headers', '{webhook-timestamp}', '"1614265331"'), :'sw_body', '100 years') AS tampered_timestamp;
-- another secret
SELECT webhook_ingest.verify_signature('standard-webhooks', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSx', :'sw_headers', :'sw_body', '100 years') AS other_secret;
-- several signatures (the libraries' multi-signature case): other versions ignored, any v1 may match
SELECT webhook_ingest.verify_signature('standard-webhooks', :'sw_secret',
         jsonb_set(:'sw_headers', '{webhook-signature}',
                   '"v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="'),
         :'sw_body', '100 years') AS multi_signature,
       webhook_ingest.verify_signature('standard-webhooks', :'sw_secret',
         jsonb_set(:'sw_headers', '{webhook-signature}', '"v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="'),
         :'sw_body', '100 years') AS right_mac_wrong_version;
-- header names in any case; the svix-* names; a mix of the two families is not a request
SELECT webhook_ingest.verify_signature('standard-webhooks', :'sw_secret',
         '{"Webhook-Id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "WEBHOOK-TIMESTAMP": "1614265330", "webhook-Signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}',
         :'sw_body', '100 years') AS names_any_case,
       webhook_ingest.verify_signature('standard-webhooks', :'sw_secret',
         '{"svix-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "svix-timestamp": "1614265330", "Svix-Signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}',
         :'sw_body', '100 years') AS svix_names,
       webhook_ingest.verify_signature('standard-webhooks', :'sw_secret',
         '{"svix-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330", "svix-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}',
         :'sw_body', '100 years') AS mixed_families;
-- the signature header as an array (a repeated header): one element is the header, two are joined with ", "
SELECT webhook_ingest.verify_signature('standard-webhooks', :'sw_secret',
         jsonb_set(:'sw_headers', '{webhook-signature}', '["v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="]'), :'sw_body', '100 years') AS one_element_array,
       webhook_ingest.verify_signature('standard-webhooks', :'sw_secret',
         jsonb_set(:'sw_headers', '{webhook-timestamp}', '1614265330'), :'sw_body', '100 years') AS number_timestamp_skipped;
-- malformed: each header missing, empty, garbage; a huge signature header; a huge timestamp
SELECT webhook_ingest.verify_signature('standard-webhooks', :'sw_secret', :'sw_headers'::jsonb - 'webhook-id', :'sw_body', '100 years') AS no_id,
       webhook_ingest.verify_signature('standard-webhooks', :'sw_secret', :'sw_headers'::jsonb - 'webhook-timestamp', :'sw_body', '100 years') AS no_timestamp,
       webhook_ingest.verify_signature('standard-webhooks', :'sw_secret', :'sw_headers'::jsonb - 'webhook-signature', :'sw_body', '100 years') AS no_signature,
       webhook_ingest.verify_signature('standard-webhooks', :'sw_secret', '{}', :'sw_body', '100 years') AS no_headers;
SELECT webhook_ingest.verify_signature('standard-webhooks', :'sw_secret', jsonb_set(:'sw_headers', '{webhook-id}', '""'), :'sw_body', '100 years') AS empty_id,
       webhook_ingest.verify_signature('standard-webhooks', :'sw_secret', jsonb_set(:'sw_headers', '{webhook-timestamp}', '"soon"'), :'sw_body', '100 years') AS word_timestamp,
       webhook_ingest.verify_signature('standard-webhooks', :'sw_secret', jsonb_set(:'sw_headers', '{webhook-timestamp}', '"-1614265330"'), :'sw_body', '100 years') AS negative_timestamp,
       webhook_ingest.verify_signature('standard-webhooks', :'sw_secret', jsonb_set(:'sw_headers', '{webhook-timestamp}', to_jsonb(repeat('9', 40))), :'sw_body', '100 years') AS huge_timestamp,
       webhook_ingest.verify_signature('standard-webhooks', :'sw_secret', jsonb_set(:'sw_headers', '{webhook-signature}', '""'), :'sw_body', '100 years') AS empty_signature,
       webhook_ingest.verify_signature('standard-webhooks', :'sw_secret', jsonb_set(:'sw_headers', '{webhook-signature}', '"g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="'), :'sw_body', '100 years') AS no_version,
       webhook_ingest.verify_signature('standard-webhooks', :'sw_secret', jsonb_set(:'sw_headers', '{webhook-signature}', '"v1,g0hM9SsE+OTPJTGt"'), :'sw_body', '100 years') AS short_mac,
       webhook_ingest.verify_signature('standard-webhooks', :'sw_secret', jsonb_set(:'sw_headers', '{webhook-signature}', '"v1,!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!="'), :'sw_body', '100 years') AS not_base64;
SELECT webhook_ingest.verify_signature('standard-webhooks', :'sw_secret',
         jsonb_set(:'sw_headers', '{webhook-signature}', to_jsonb(repeat('v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= ', 100000))),
         :'sw_body', '100 years') AS huge_no_match,
       webhook_ingest.verify_signature('standard-webhooks', :'sw_secret',
         jsonb_set(:'sw_headers', '{webhook-signature}',
                   to_jsonb(repeat('v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= ', 100000) || 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=')),
         :'sw_body', '100 years') AS huge_match_last,
       webhook_ingest.verify_signature('standard-webhooks', :'sw_secret',
         jsonb_set(:'sw_headers', '{webhook-signature}', to_jsonb(repeat('x', 5000000))), :'sw_body', '100 years') AS huge_garbage;

-- fresh requests signed here: the window both ways, and rotation
\set key 'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'
SELECT webhook_ingest.verify_signature('standard-webhooks', 'whsec_' || :'key', sigtest.swh(:'key', 'msg_1', sigtest.now_s(), 'hello'), 'hello') AS fresh,
       webhook_ingest.verify_signature('standard-webhooks', 'whsec_' || :'key', sigtest.swh(:'key', 'msg_1', sigtest.now_s() - 240, 'hello'), 'hello') AS four_minutes_old,
       webhook_ingest.verify_signature('standard-webhooks', 'whsec_' || :'key', sigtest.swh(:'key', 'msg_1', sigtest.now_s() - 360, 'hello'), 'hello') AS six_minutes_old,
       webhook_ingest.verify_signature('standard-webhooks', 'whsec_' || :'key', sigtest.swh(:'key', 'msg_1', sigtest.now_s() + 360, 'hello'), 'hello') AS six_minutes_ahead,
       webhook_ingest.verify_signature('standard-webhooks', 'whsec_' || :'key', sigtest.swh(:'key', 'msg_1', sigtest.now_s() - 360, 'hello'), 'hello', '10 minutes') AS six_old_within_ten,
       webhook_ingest.verify_signature('standard-webhooks', 'whsec_' || :'key', sigtest.swh(:'key', 'msg_1', sigtest.now_s() - 60, 'hello'), 'hello', '0') AS zero_tolerance;
-- rotation: the sender signs with the old and the new key; either secret verifies
SELECT webhook_ingest.verify_signature('standard-webhooks', 'whsec_' || key, h, 'hello') AS rotated
  FROM (SELECT (sigtest.swh(:'key', 'msg_2', ts, 'hello') ->> 'webhook-signature') || ' ' ||
               (sigtest.swh('c2Vjb25kIGtleQ==', 'msg_2', ts, 'hello') ->> 'webhook-signature') AS sigs, ts
          FROM (SELECT sigtest.now_s() AS ts) n) s,
       LATERAL (SELECT jsonb_build_object('webhook-id', 'msg_2', 'webhook-timestamp', ts::text, 'webhook-signature', sigs) AS h) hh,
       unnest(ARRAY[:'key', 'c2Vjb25kIGtleQ==', 'c2Vjb25kIGtleQ', 'dGhpcmQga2V5']) WITH ORDINALITY AS k(key, n)
 ORDER BY n;

-- ---- GitHub: the docs' example ("Validating webhook deliveries": secret
-- "It's a Secret to Everybody", payload "Hello, World!")
\set gh_sig 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17'
SELECT webhook_ingest.verify_signature('github', 'It''s a Secret to Everybody', jsonb_build_object('X-Hub-Signature-256', :'gh_sig'), 'Hello, World!') AS published_vector,
       webhook_ingest.verify_signature('GitHub', 'It''s a Secret to Everybody', jsonb_build_object('x-hub-signature-256', upper(:'gh_sig')), 'Hello, World!') AS upper_hex_wrong_prefix,
       webhook_ingest.verify_signature('github', 'It''s a Secret to Everybody', jsonb_build_object('x-hub-signature-256', 'sha256=' || upper(substr(:'gh_sig', 8))), 'Hello, World!') AS upper_hex,
       webhook_ingest.verify_signature('github', 'It''s a Secret to Everybody', jsonb_build_object('X-HUB-SIGNATURE-256', ' ' || :'gh_sig' || ' '), 'Hello, World!') AS spaces_around;
SELECT webhook_ingest.verify_signature('github', 'It''s a Secret to Everybody', jsonb_build_object('X-Hub-Signature-256', :'gh_sig'), 'Hello, World?') AS tampered_body,
       webhook_ingest.verify_signature('github', 'It''s a Secret to Everybody', jsonb_build_object('X-Hub-Signature-256', overlay(:'gh_sig' placing '8' from 8)), 'Hello, World!') AS tampered_signature,
       webhook_ingest.verify_signature('github', 'It''s a secret to everybody', jsonb_build_object('X-Hub-Signature-256', :'gh_sig'), 'Hello, World!') AS other_secret,
       webhook_ingest.verify_signature('github', 'It''s a Secret to Everybody', jsonb_build_object('X-Hub-Signature', 'sha1=' || repeat('0', 40)), 'Hello, World!') AS sha1_only,
       webhook_ingest.verify_signature('github', 'It''s a Secret to Everybody', jsonb_build_object('X-Hub-Signature-256', substr(:'gh_sig', 8)), 'Hello, World!') AS no_prefix,
       webhook_ingest.verify_signature('github', 'It''s a Secret to Everybody', jsonb_build_object('X-Hub-Signature-256', :'gh_sig' || '00'), 'Hello, World!') AS too_long,
       webhook_ingest.verify_signature('github', 'It''s a Secret to Everybody', jsonb_build_object('X-Hub-Signature-256', jsonb_build_array(:'gh_sig', :'gh_sig')), 'Hello, World!') AS repeated_header;
-- no timestamp: any tolerance does
SELECT webhook_ingest.verify_signature('github', 'It''s a Secret to Everybody', jsonb_build_object('X-Hub-Signature-256', :'gh_sig'), 'Hello, World!', '0') AS zero_tolerance;

-- ---- Slack: the docs' example ("Verifying requests from Slack")
\set sl_secret '8f742231b10e8888abcd99yyyzzz85a5'
\set sl_body 'token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c'
\set sl_headers '{"X-Slack-Request-Timestamp": "1531420618", "X-Slack-Signature": "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"}'
SELECT webhook_ingest.verify_signature('slack', :'sl_secret', :'sl_headers', :'sl_body', '100 years') AS published_vector,
       webhook_ingest.verify_signature('slack', :'sl_secret', :'sl_headers', :'sl_body') AS expired_by_default,
       webhook_ingest.verify_signature('slack', :'sl_secret', jsonb_set(:'sl_headers', '{X-Slack-Request-Timestamp}', '"1531420619"'), :'sl_body', '100 years') AS tampered_timestamp,
       webhook_ingest.verify_signature('slack', :'sl_secret', :'sl_headers', :'sl_body' || '&x=1', '100 years') AS tampered_body,
       webhook_ingest.verify_signature('slack', :'sl_secret', :'sl_headers'::jsonb - 'X-Slack-Request-Timestamp', :'sl_body', '100 years') AS no_timestamp,
       webhook_ingest.verify_signature('slack', :'sl_secret', jsonb_set(:'sl_headers', '{X-Slack-Signature}', '"v1=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"'), :'sl_body', '100 years') AS v1_prefix;
SELECT webhook_ingest.verify_signature('slack', 's3cret', sigtest.slack('s3cret', sigtest.now_s(), 'a=b'), 'a=b') AS fresh,
       webhook_ingest.verify_signature('slack', 's3cret', sigtest.slack('s3cret', sigtest.now_s() - 360, 'a=b'), 'a=b') AS six_minutes_old,
       webhook_ingest.verify_signature('slack', 's3cret', sigtest.slack('s3cret', sigtest.now_s() + 360, 'a=b'), 'a=b') AS six_minutes_ahead;

-- ---- Stripe: Stripe publishes no fixed vector (its libraries' tests sign
-- at test time); this one was signed at t=1600000000 with Python's hmac
-- module when the test was written, and pgcrypto agrees
\set st_secret 'whsec_test_secret'
\set st_body '{"id": "evt_test_webhook", "object": "event"}'
\set st_v1 'ff5e34f675feda29d20aa8c342f4418db467551b8e6a1c002339267f80ebb893'
\set st_old '834554c4412b6d04d265386e60e1754a36a491aeb34fbc822429fd68407fe10d'
SELECT sigtest.stripe(:'st_secret', 1600000000, :'st_body') = jsonb_build_object('Stripe-Signature', 't=1600000000,v1=' || :'st_v1') AS pgcrypto_agrees;
SELECT webhook_ingest.verify_signature('stripe', :'st_secret', jsonb_build_object('Stripe-Signature', 't=1600000000,v1=' || :'st_v1'), :'st_body', '100 years') AS fixed_vector,
       webhook_ingest.verify_signature('stripe', :'st_secret', jsonb_build_object('stripe-signature', 't=1600000000,v1=' || :'st_v1'), :'st_body') AS expired_by_default,
       webhook_ingest.verify_signature('stripe', :'st_secret', jsonb_build_object('Stripe-Signature', 't=1600000000,v1=' || :'st_v1'), :'st_body' || ' ', '100 years') AS tampered_body,
       webhook_ingest.verify_signature('stripe', :'st_secret', jsonb_build_object('Stripe-Signature', 't=1600000001,v1=' || :'st_v1'), :'st_body', '100 years') AS tampered_timestamp,
       webhook_ingest.verify_signature('stripe', 'test_secret', jsonb_build_object('Stripe-Signature', 't=1600000000,v1=' || :'st_v1'), :'st_body', '100 years') AS secret_without_whsec;
-- several v1 (rotation: Stripe signs with each active secret), v0 and unknown schemes ignored, order free
SELECT webhook_ingest.verify_signature('stripe', s, jsonb_build_object('Stripe-Signature', h), :'st_body', '100 years') AS verified, s AS secret, h AS header
  FROM (VALUES ('v1=' || :'st_old' || ',t=1600000000,v0=' || repeat('a', 64) || ',v1=' || :'st_v1'),
               ('t=1600000000,v0=' || :'st_v1'),
               ('t=1600000000,v1=' || :'st_old' || ',v2=' || :'st_v1'),
               ('t=1600000000, v1=' || :'st_v1' || ' ')) AS hh(h),
       (VALUES (:'st_secret'), ('whsec_old_secret')) AS ss(s)
 ORDER BY h, s;
-- malformed
SELECT webhook_ingest.verify_signature('stripe', :'st_secret', jsonb_build_object('Stripe-Signature', h), :'st_body', '100 years') AS verified, h AS header
  FROM (VALUES ('v1=' || :'st_v1'), ('t=,v1=' || :'st_v1'), ('t=soon,v1=' || :'st_v1'),
               ('t=1600000000,t=1600000000,v1=' || :'st_v1'), ('t=1600000000,v1' || :'st_v1'),
               ('t=1600000000,v1=' || substr(:'st_v1', 2)), ('t=1600000000,v1=' || 'g' || substr(:'st_v1', 2)),
               ('t=1600000000'), (''), (',,,')) AS hh(h)
 ORDER BY h;
SELECT webhook_ingest.verify_signature('stripe', :'st_secret', '{"Stripe-Signature": null}', :'st_body', '100 years') AS null_header_skipped,
       webhook_ingest.verify_signature('stripe', :'st_secret',
         jsonb_build_object('Stripe-Signature', 't=1600000000,' || repeat('v1=' || :'st_old' || ',', 50000) || 'v1=' || :'st_v1'), :'st_body', '100 years') AS huge_match_last;
SELECT webhook_ingest.verify_signature('stripe', 'sk', sigtest.stripe('sk', sigtest.now_s(), 'x'), 'x') AS fresh,
       webhook_ingest.verify_signature('stripe', 'sk', sigtest.stripe('sk', sigtest.now_s() - 360, 'x'), 'x') AS six_minutes_old,
       webhook_ingest.verify_signature('stripe', 'sk', sigtest.stripe('sk', sigtest.now_s() + 360, 'x'), 'x') AS six_minutes_ahead,
       webhook_ingest.verify_signature('stripe', 'sk', sigtest.stripe('sk', sigtest.now_s() + 360, 'x'), 'x', '1 hour') AS ahead_within_an_hour;

-- ---- Shopify: no published vector either; signed with Python's hmac,
-- checked against pgcrypto
\set sh_body '{"id":820982911946154508,"email":"jon@doe.ca"}'
SELECT sigtest.b64('hush', :'sh_body') = 'fp5HwmAHEVGQQwJU1KRpk57Ts2YHF6/TLOCczCtB5bs=' AS pgcrypto_agrees;
SELECT webhook_ingest.verify_signature('shopify', 'hush', '{"X-Shopify-Hmac-Sha256": "fp5HwmAHEVGQQwJU1KRpk57Ts2YHF6/TLOCczCtB5bs="}', :'sh_body') AS fixed_vector,
       webhook_ingest.verify_signature('shopify', 'hush', '{"x-shopify-hmac-sha256": "fp5HwmAHEVGQQwJU1KRpk57Ts2YHF6/TLOCczCtB5bs="}', :'sh_body', '0') AS lower_case_name,
       webhook_ingest.verify_signature('shopify', 'hush', '{"X-Shopify-Hmac-Sha256": "fp5HwmAHEVGQQwJU1KRpk57Ts2YHF6/TLOCczCtB5bs="}', :'sh_body' || ' ') AS tampered_body,
       webhook_ingest.verify_signature('shopify', 'hush', '{"X-Shopify-Hmac-Sha256": "fp5HwmAHEVGQQwJU1KRpk57Ts2YHF6/TLOCczCtB5bS="}', :'sh_body') AS tampered_signature,
       webhook_ingest.verify_signature('shopify', 'hush', '{"X-Shopify-Hmac-Sha256": "fp5HwmAHEVGQQwJU1KRpk57Ts2YHF6/TLOCczCtB5bs"}', :'sh_body') AS unpadded,
       webhook_ingest.verify_signature('shopify', 'hush', '{"X-Shopify-Hmac-Sha256": "7e9e47c2600711519043025"}', :'sh_body') AS garbage,
       webhook_ingest.verify_signature('shopify', 'hush', '{"X-Shopify-Hmac-Sha256": ""}', :'sh_body') AS empty,
       webhook_ingest.verify_signature('shopify', 'hush', '{"X-Shopify-Topic": "orders/create"}', :'sh_body') AS missing;

-- ---- NULLs: no headers or no body is no valid request; no scheme, secret or tolerance is an error
SELECT webhook_ingest.verify_signature('github', 'It''s a Secret to Everybody', NULL, 'Hello, World!') AS null_headers,
       webhook_ingest.verify_signature('github', 'It''s a Secret to Everybody', jsonb_build_object('X-Hub-Signature-256', :'gh_sig'), NULL) AS null_body;
SELECT webhook_ingest.verify_signature(NULL, 's', '{}', '');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT webhook_ingest.verify_signature('github', NULL, '{}', '');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT webhook_ingest.verify_signature('github', 's', '{}', '', NULL);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;

-- ---- errors: unknown scheme (clipped), headers not an object, unusable secrets, negative tolerance
SELECT webhook_ingest.verify_signature('gitlab', 's', '{}', '');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT webhook_ingest.verify_signature(repeat('x', 300), 's', '{}', '');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT webhook_ingest.verify_signature('github', 's', '["X-Hub-Signature-256", "sha256=00"]', '');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT webhook_ingest.verify_signature('github', 's', '"sha256=00"', '');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT webhook_ingest.verify_signature('standard-webhooks', 'whsec_', :'sw_headers', :'sw_body');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT webhook_ingest.verify_signature('standard-webhooks', 'whsec_not base64!', :'sw_headers', :'sw_body');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT webhook_ingest.verify_signature('standard-webhooks', 'whsec_' || repeat('QUFB', 400), :'sw_headers', :'sw_body');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT webhook_ingest.verify_signature('github', '', '{}', '');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT webhook_ingest.verify_signature('github', 's', '{}', '', '-1 second');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT webhook_ingest.verify_signature('github', 's', '{}', '', '1 day -25 hours');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
-- the same checks come before the headers are looked at: a bad secret fails even with no request
SELECT webhook_ingest.verify_signature('standard-webhooks', 'whsec_', NULL, NULL);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;

-- ---- an app role may call it (pure: no table read); declared as the lead's 0.4.0 script has it
CREATE ROLE sig_app IN ROLE webhook_ingest_enqueue;
SET ROLE sig_app;
SELECT webhook_ingest.verify_signature('github', 'It''s a Secret to Everybody', jsonb_build_object('X-Hub-Signature-256', :'gh_sig'), 'Hello, World!') AS as_app_role;
RESET ROLE;
SELECT provolatile, proparallel, proisstrict FROM pg_proc WHERE oid = 'webhook_ingest.verify_signature'::regproc;
DROP ROLE sig_app;

SET client_min_messages = warning;
DROP SCHEMA sigtest CASCADE;
DROP EXTENSION pgcrypto;
RESET client_min_messages;
