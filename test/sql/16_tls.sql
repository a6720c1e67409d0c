-- A source's TLS settings and proxy (issue 15): every PEM is parsed when it
-- is set and refused with 22023 when it does not parse; a client key is
-- written by the admin and readable by no role but a superuser; no message
-- quotes a key.
\set VERBOSITY default
\set SHOW_CONTEXT never
-- test/: pg_regress 15+ names it in PG_ABS_SRCDIR; before, the suite runs from the tree's top
\set abs_srcdir `echo "${PG_ABS_SRCDIR:-$PWD/test}"`
SELECT set_config('wi.dir', :'abs_srcdir', false) IS NOT NULL AS dir_set;
SELECT pg_read_file(:'abs_srcdir' || '/data/tls/ca.pem') AS ca \gset
SELECT pg_read_file(:'abs_srcdir' || '/data/tls/client.pem') AS cert \gset
SELECT pg_read_file(:'abs_srcdir' || '/data/tls/client.key') AS key \gset
SELECT pg_read_file(:'abs_srcdir' || '/data/tls/other.key') AS other_key \gset
SELECT pg_read_file(:'abs_srcdir' || '/data/tls/encrypted.key') AS encrypted_key \gset

-- What does not parse is refused, and nothing is written
SELECT webhook_ingest.add_source('t1', 'https://127.0.0.1:9/x/{external_id}', tls_ca => 'not a certificate');
SELECT webhook_ingest.add_source('t1', 'https://127.0.0.1:9/x/{external_id}', tls_ca => :'key');
SELECT webhook_ingest.add_source('t1', 'https://127.0.0.1:9/x/{external_id}',
                                 tls_ca => :'ca' || '-----BEGIN CERTIFICATE-----' || chr(10) || 'AAAA' || chr(10) || '-----END CERTIFICATE-----' || chr(10));
SELECT webhook_ingest.add_source('t1', 'https://127.0.0.1:9/x/{external_id}', tls_ca => repeat(:'ca', 2000));
SELECT webhook_ingest.add_source('t1', 'https://127.0.0.1:9/x/{external_id}', tls_client_cert => :'cert');
SELECT webhook_ingest.add_source('t1', 'https://127.0.0.1:9/x/{external_id}', tls_client_key => :'key');
SELECT webhook_ingest.add_source('t1', 'https://127.0.0.1:9/x/{external_id}', tls_client_cert => 'x', tls_client_key => :'key');
SELECT webhook_ingest.add_source('t1', 'https://127.0.0.1:9/x/{external_id}', tls_client_cert => :'cert', tls_client_key => :'other_key');
SELECT webhook_ingest.add_source('t1', 'https://127.0.0.1:9/x/{external_id}', tls_client_cert => :'cert', tls_client_key => :'encrypted_key');
SELECT webhook_ingest.add_source('t1', 'https://127.0.0.1:9/x/{external_id}', tls_client_cert => :'cert', tls_client_key => 'not a key');
SELECT webhook_ingest.add_source('t1', 'https://127.0.0.1:9/x/{external_id}', proxy => 'socks5://127.0.0.1:1080');
SELECT webhook_ingest.add_source('t1', 'https://127.0.0.1:9/x/{external_id}', proxy => 'http://user:pw@127.0.0.1:3128');
SELECT webhook_ingest.add_source('t1', 'https://127.0.0.1:9/x/{external_id}', proxy => 'http://127.0.0.1:3128/path');
SELECT webhook_ingest.add_source('t1', 'https://127.0.0.1:9/x/{external_id}', proxy => 'not a url');
SELECT count(*) AS nothing_written FROM webhook_ingest.sources WHERE name = 't1';
-- no message, detail, hint or context of those quotes the key
DO $$
DECLARE
    key text := pg_read_file(current_setting('wi.dir') || '/data/tls/client.key');
    line text := split_part(key, chr(10), 2);
    m text; d text; h text; c text;
BEGIN
    FOR i IN 1..4 LOOP
        BEGIN
            CASE i
            WHEN 1 THEN PERFORM webhook_ingest.add_source('t1', 'https://127.0.0.1:9/x/{external_id}', tls_client_key => key);
            WHEN 2 THEN PERFORM webhook_ingest.add_source('t1', 'https://127.0.0.1:9/x/{external_id}', tls_ca => key);
            WHEN 3 THEN PERFORM webhook_ingest.add_source('t1', 'https://127.0.0.1:9/x/{external_id}',
                                                          tls_client_cert => key, tls_client_key => key);
            ELSE PERFORM webhook_ingest.add_source('t1', 'https://127.0.0.1:9/x/{external_id}', proxy => key);
            END CASE;
            RAISE EXCEPTION 'case % was accepted', i;
        EXCEPTION WHEN invalid_parameter_value THEN
            GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT,
                                    c = PG_EXCEPTION_CONTEXT;
            IF strpos(concat(m, d, h, c), line) > 0 OR strpos(concat(m, d, h, c), 'PRIVATE KEY-----' || chr(10)) > 0 THEN
                RAISE EXCEPTION 'case %: the error quotes the key', i;
            END IF;
        END;
    END LOOP;
    RAISE NOTICE 'no error quoted the key';
END
$$;

-- Good settings are taken; the key goes to source_tls_keys
SELECT webhook_ingest.add_source('t1', 'https://127.0.0.1:9/x/{external_id}', tls_ca => :'ca',
                                 tls_client_cert => :'cert', tls_client_key => :'key', proxy => 'http://127.0.0.1:3128');
SELECT webhook_ingest.add_source('t2', 'https://127.0.0.1:9/x/{external_id}', proxy => '');
SELECT name, tls_ca = :'ca' AS ca, tls_client_cert = :'cert' AS cert, proxy FROM webhook_ingest.sources
 WHERE name IN ('t1', 't2') ORDER BY 1;
SELECT source, tls_client_key = :'key' AS key FROM webhook_ingest.source_tls_keys;
-- alter_source: set and reset together is refused; a reset drops the key too
SELECT webhook_ingest.alter_source('t1', tls_ca => :'ca', reset_tls_ca => true);
SELECT webhook_ingest.alter_source('t1', tls_client_cert => :'cert', reset_tls_client => true);
SELECT webhook_ingest.alter_source('t1', proxy => '', reset_proxy => true);
SELECT webhook_ingest.alter_source('t1', tls_client_key => :'key');
SELECT webhook_ingest.alter_source('t1', tls_ca => 'nope');
SELECT webhook_ingest.alter_source('t1', reset_tls_client => true, reset_proxy => true);
SELECT name, tls_ca IS NOT NULL AS ca, tls_client_cert IS NULL AS no_cert, proxy IS NULL AS setting_proxy
  FROM webhook_ingest.sources WHERE name = 't1';
SELECT count(*) AS keys FROM webhook_ingest.source_tls_keys;
SELECT webhook_ingest.alter_source('t1', tls_client_cert => :'cert', tls_client_key => :'key', reset_tls_ca => true);
SELECT name, tls_ca IS NULL AS system_bundle, tls_client_cert IS NOT NULL AS cert FROM webhook_ingest.sources WHERE name = 't1';

-- Who can read the key: nobody but a superuser
CREATE ROLE tls_admin LOGIN IN ROLE webhook_ingest_admin;
CREATE ROLE tls_monitor LOGIN IN ROLE webhook_ingest_monitor;
CREATE ROLE tls_app LOGIN IN ROLE webhook_ingest_enqueue;
SET ROLE tls_admin;
SELECT count(*) AS admin_reads_sources FROM webhook_ingest.sources WHERE tls_client_cert IS NOT NULL;
SELECT * FROM webhook_ingest.source_tls_keys;
-- an admin sets a certificate only with its key (through alter_source), and cannot UPDATE it in
UPDATE webhook_ingest.sources SET tls_client_cert = :'cert' WHERE name = 't2';
UPDATE webhook_ingest.sources SET tls_ca = 'nope' WHERE name = 't2';
UPDATE webhook_ingest.sources SET proxy = 'gopher://x:1' WHERE name = 't2';
-- a source's own proxy goes around webhook_ingest.proxy: a superuser's to set, anyone's to clear
UPDATE webhook_ingest.sources SET proxy = 'https://127.0.0.1:3129' WHERE name = 't2';
UPDATE webhook_ingest.sources SET proxy = '' WHERE name = 't1';
SELECT webhook_ingest.add_source('t3', 'https://127.0.0.1:9/x/{external_id}', proxy => '');
SELECT webhook_ingest.alter_source('t2', proxy => 'http://127.0.0.1:3130');
UPDATE webhook_ingest.sources SET tls_ca = :'ca', proxy = NULL WHERE name = 't2';
SELECT name, proxy IS NULL AS setting_proxy FROM webhook_ingest.sources WHERE name = 't2';
SELECT webhook_ingest.alter_source('t2', tls_client_cert => :'cert', tls_client_key => :'key');
SELECT * FROM webhook_ingest.source_tls_keys;
SELECT webhook_ingest._set_tls_client('t2', NULL, NULL);
SET ROLE tls_monitor;
SELECT * FROM webhook_ingest.source_tls_keys;
SELECT count(*) FROM webhook_ingest.sources;
SET ROLE tls_app;
SELECT * FROM webhook_ingest.source_tls_keys;
SELECT webhook_ingest._set_tls_client('t2', NULL, NULL);
RESET ROLE;
SELECT source FROM webhook_ingest.source_tls_keys ORDER BY 1;

-- webhook_ingest.proxy: the same check as a source's
ALTER SYSTEM SET webhook_ingest.proxy = 'ftp://127.0.0.1:21';
ALTER SYSTEM SET webhook_ingest.proxy = 'http://127.0.0.1:3128';
ALTER SYSTEM RESET webhook_ingest.proxy;

-- drop_source takes the key with it
SELECT webhook_ingest.drop_source('t1');
SELECT webhook_ingest.drop_source('t2');
SELECT count(*) AS keys_left FROM webhook_ingest.source_tls_keys;
DROP ROLE tls_admin, tls_monitor, tls_app;
