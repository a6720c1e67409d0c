-- The network guard (webhook_ingest.denied_networks, allowed_networks), redirect
-- hygiene (webhook_ingest.cross_origin_redirects) and strict Retry-After.
-- Traffic goes to loopback only: test/upstream.py listens on 127.0.0.1:18080,
-- 127.0.0.1:18081 (another origin) and 127.0.0.3:18083 (the address the guard
-- must keep the worker away from: it has to see no request at all); nothing
-- listens on 127.0.0.4:18084, the probe that shows the worker applied a setting.
\set VERBOSITY terse
\set SHOW_CONTEXT never

\i test/worker/wait_until.sql

CREATE SEQUENCE IF NOT EXISTS net_seq;

-- Reload, then probe 127.0.0.4:18084 until a probe job ends with a last_error
-- like expect: then the worker runs with the new settings.
CREATE OR REPLACE PROCEDURE net_apply(expect text)
LANGUAGE plpgsql AS $$
DECLARE
    deadline timestamptz := clock_timestamp() + interval '30 s';
    probe bigint;
    err text;
BEGIN
    PERFORM pg_reload_conf();
    LOOP
        SELECT job_id INTO probe FROM webhook_ingest.enqueue('net_probe', 'probe-' || nextval('net_seq'));
        COMMIT;
        IF NOT wait_until(format('SELECT state = %L FROM webhook_ingest.jobs WHERE id = %s', 'dead', probe)) THEN
            RAISE EXCEPTION 'probe job % did not end', probe;
        END IF;
        SELECT last_error INTO err FROM webhook_ingest.jobs WHERE id = probe;
        EXIT WHEN err LIKE expect;
        IF clock_timestamp() > deadline THEN
            RAISE EXCEPTION 'the worker did not apply the settings: %', err;
        END IF;
        PERFORM pg_sleep(0.05);
    END LOOP;
END $$;

-- How many requests a listener of test/upstream.py has received (its /stats,
-- fetched by the worker into webhook_ingest.documents).
CREATE OR REPLACE PROCEDURE net_requests(listener text, INOUT requests int DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
    id text := 'stats-' || nextval('net_seq');
BEGIN
    PERFORM webhook_ingest.enqueue('net_stats', id);
    COMMIT;
    IF NOT wait_until(format('SELECT state = %L FROM webhook_ingest.jobs WHERE source = %L AND external_id = %L',
                                 'done', 'net_stats', id)) THEN
        RAISE EXCEPTION 'could not read the upstream''s counts';
    END IF;
    SELECT coalesce((details->>('listener ' || listener))::int, 0) INTO requests
      FROM webhook_ingest.documents WHERE source = 'net_stats' AND external_id = id;
END $$;

-- Wait until every job of these sources has ended (done or dead).
CREATE OR REPLACE FUNCTION net_settled(sources text[]) RETURNS boolean
LANGUAGE sql AS $$
    SELECT wait_until(format($q$SELECT count(*) = 0 FROM webhook_ingest.jobs
                                     WHERE source = ANY (%L) AND state NOT IN ('done', 'dead')$q$, sources))
$$;

CREATE OR REPLACE FUNCTION net_jobs(sources text[])
RETURNS TABLE (source text, external_id text, state text, attempts int, last_status int, last_error text)
LANGUAGE sql AS $$
    SELECT j.source, j.external_id, j.state::text, j.attempts, j.last_status,
           regexp_replace(j.last_error, 'after \d+ ms', 'after N ms')
      FROM webhook_ingest.jobs j WHERE j.source = ANY (sources) ORDER BY j.source, j.external_id
$$;

SELECT webhook_ingest.add_source('net_probe', 'http://127.0.0.4:18084/probe/{external_id}', max_attempts => 1,
                                 timeout_ms => 2000);
SELECT webhook_ingest.add_source('net_stats', 'http://127.0.0.1:18080/stats/{external_id}');
SELECT webhook_ingest.add_source('net_denied', 'http://127.0.0.3:18083/posts/{external_id}', max_attempts => 3);
SELECT webhook_ingest.add_source('net_mapped', 'http://[::ffff:127.0.0.3]:18083/posts/{external_id}', max_attempts => 3);
SELECT webhook_ingest.add_source('net_localhost', 'http://localhost:18080/posts/{external_id}', max_attempts => 3);
SELECT webhook_ingest.add_source('net_same', 'http://127.0.0.1:18080/sameredirect/{external_id}',
                                 headers => '{"X-Api-Key": "k-same", "Authorization": "Bearer same"}');
SELECT webhook_ingest.add_source('net_cross', 'http://127.0.0.1:18080/crossredirect/{external_id}',
                                 headers => '{"X-Api-Key": "k-cross", "Authorization": "Bearer cross"}',
                                 max_attempts => 3);
SELECT webhook_ingest.add_source('net_hop_denied', 'http://127.0.0.1:18080/deniedredirect/{external_id}',
                                 max_attempts => 3);
SELECT webhook_ingest.add_source('net_ftp', 'http://127.0.0.1:18080/redirect/{external_id}', max_attempts => 3);
SELECT webhook_ingest.add_source('net_loop', 'http://127.0.0.1:18080/redirectloop/{external_id}', max_attempts => 3);
SELECT webhook_ingest.add_source('net_retry_after', 'http://127.0.0.1:18080/retryafter/{external_id}',
                                 max_attempts => 3);
SELECT webhook_ingest.add_source('net_retry_date', 'http://127.0.0.1:18080/retrydate/{external_id}',
                                 max_attempts => 3);

-- settings that are not lists of CIDRs are refused, naming the bad entry
\set VERBOSITY default
ALTER SYSTEM SET webhook_ingest.denied_networks = 'not-a-cidr';
ALTER SYSTEM SET webhook_ingest.denied_networks = '127.0.0.3/33';
ALTER SYSTEM SET webhook_ingest.denied_networks = '127.0.0.0/8, 10.0.0.1/8';
ALTER SYSTEM SET webhook_ingest.denied_networks = '127.0.0.3/32,,::1';
ALTER SYSTEM SET webhook_ingest.allowed_networks = 'fe80::/129';
ALTER SYSTEM SET webhook_ingest.cross_origin_redirects = 'follow';
-- the defaults
SHOW webhook_ingest.denied_networks;
SHOW webhook_ingest.allowed_networks;
SHOW webhook_ingest.cross_origin_redirects;

-- a placeholder in the fragment is refused; in the query string it is fine
SELECT webhook_ingest.add_source('net_fragment', 'http://127.0.0.1:18080/posts/x#{external_id}');
SELECT webhook_ingest.add_source('net_query', 'http://127.0.0.1:18080/posts/x?id={external_id}#top');
SELECT webhook_ingest.alter_source('net_query', 'http://127.0.0.1:18080/posts/{external_id}#{external_id}');
SELECT webhook_ingest.drop_source('net_query');

-- error messages echo at most about 100 bytes of an input
SELECT webhook_ingest.add_source(repeat('n', 300), 'http://127.0.0.1:18080/posts/{external_id}');
SELECT webhook_ingest.add_source('net_long', 'gopher://' || repeat('h', 300) || '/{external_id}');
SELECT webhook_ingest.add_source('net_long', 'http://' || repeat('h', 300) || '/x');
SELECT webhook_ingest.add_source('net_long', 'http://127.0.0.1:18080/posts/{external_id}',
                                 headers => jsonb_build_object(repeat('é', 150) || ' ', 'v'));
SELECT webhook_ingest.url_for(repeat('s', 300), 'x');
\set VERBOSITY terse

-- with the defaults: a redirect to another origin is refused, and the other
-- origin sees nothing; ftp:// and endless redirects are refused
SELECT outcome FROM webhook_ingest.enqueue('net_cross', 'c1');
SELECT outcome FROM webhook_ingest.enqueue('net_ftp', 'f1');
SELECT outcome FROM webhook_ingest.enqueue('net_loop', 'l1');
SELECT net_settled('{net_cross,net_ftp,net_loop}');
SELECT * FROM net_jobs('{net_cross,net_ftp,net_loop}');
CALL net_requests('127.0.0.1:18081');
-- a same-origin redirect keeps the source's headers
SELECT outcome FROM webhook_ingest.enqueue('net_same', 's1');
SELECT net_settled('{net_same}');
SELECT state, attempts, last_error FROM webhook_ingest.jobs WHERE source = 'net_same';
SELECT details->>'listener' AS listener, details->'headers'->>'x-api-key' AS x_api_key,
       details->'headers'->>'authorization' AS authorization, details->'headers'->>'accept' AS accept
  FROM webhook_ingest.documents WHERE source = 'net_same';

-- Retry-After: 5abc is no delay of 5 s (the back-off, 50 ms here, applies);
-- an HTTP-date 2 s ahead is honoured
SELECT outcome FROM webhook_ingest.enqueue('net_retry_after', 'r1');
SELECT outcome FROM webhook_ingest.enqueue('net_retry_date', 'r1');
SELECT net_settled('{net_retry_after,net_retry_date}');
SELECT source, state, attempts,
       CASE WHEN source = 'net_retry_after' THEN finished_at - created_at < interval '2 s'
            ELSE finished_at - created_at >= interval '1 s' END AS as_expected
  FROM webhook_ingest.jobs WHERE source IN ('net_retry_after', 'net_retry_date') ORDER BY source;

-- denied_networks holds 127.0.0.3: refused at once, for the template's host,
-- for the same address written as IPv4-mapped IPv6, and for a redirect hop to
-- it; cross_origin_redirects = follow_without_headers follows a redirect to
-- another origin without the source's headers.  (An IPv4-mapped entry in the
-- list is the IPv4 network: the probe's refusal names 127.0.0.4/32.)
ALTER SYSTEM SET webhook_ingest.denied_networks = '127.0.0.3/32, ::ffff:127.0.0.4/128';
ALTER SYSTEM SET webhook_ingest.cross_origin_redirects = 'follow_without_headers';
CALL net_apply('%connection to 127.0.0.4 refused by webhook_ingest.denied_networks (127.0.0.4/32)');
SELECT outcome FROM webhook_ingest.enqueue('net_denied', 'd1');
SELECT outcome FROM webhook_ingest.enqueue('net_mapped', 'm1');
SELECT outcome FROM webhook_ingest.enqueue('net_hop_denied', 'h1');
SELECT outcome FROM webhook_ingest.enqueue('net_cross', 'c2');
SELECT net_settled('{net_denied,net_mapped,net_hop_denied,net_cross}');
SELECT * FROM net_jobs('{net_denied,net_mapped,net_hop_denied,net_cross}');
SELECT details->>'listener' AS listener, details->'headers'->>'x-api-key' AS x_api_key,
       details->'headers'->>'authorization' AS authorization, details->'headers'->>'accept' AS accept
  FROM webhook_ingest.documents WHERE source = 'net_cross';

-- a host name that resolves to a denied address is refused too
ALTER SYSTEM SET webhook_ingest.denied_networks = '127.0.0.0/8, ::1/128';
CALL net_apply('%connection to 127.0.0.4 refused by webhook_ingest.denied_networks (127.0.0.0/8)');
-- and so is a connection to 127.0.0.1:18080 that the worker opened before the
-- change and keeps in its connection cache
SELECT outcome FROM webhook_ingest.enqueue('net_localhost', 'lh1');
SELECT outcome FROM webhook_ingest.enqueue('net_same', 's3');
SELECT net_settled('{net_localhost,net_same}');
SELECT source, state, attempts,
       last_error ~ '^attempt 1/\d+ after \d+ ms: connection to (127\.0\.0\.1|::1) refused by webhook_ingest\.denied_networks \((127\.0\.0\.0/8|::1/128)\)$'
         AS refused
  FROM webhook_ingest.jobs WHERE source IN ('net_localhost', 'net_same') AND external_id IN ('lh1', 's3')
 ORDER BY source;

-- allowed_networks set: only those; 127.0.0.3 is not among them
ALTER SYSTEM SET webhook_ingest.denied_networks = '';
ALTER SYSTEM SET webhook_ingest.allowed_networks = '127.0.0.1/32';
CALL net_apply('%connection to 127.0.0.4 refused: not in webhook_ingest.allowed_networks');
SELECT outcome FROM webhook_ingest.enqueue('net_denied', 'd2');
SELECT outcome FROM webhook_ingest.enqueue('net_same', 's2');
SELECT net_settled('{net_denied,net_same}');
SELECT * FROM net_jobs('{net_denied,net_same}') WHERE external_id <> 's3';

-- back to the defaults
ALTER SYSTEM RESET webhook_ingest.denied_networks;
ALTER SYSTEM RESET webhook_ingest.allowed_networks;
ALTER SYSTEM RESET webhook_ingest.cross_origin_redirects;
-- (libcurl 7 says "Couldn't connect", libcurl 8 "Could not connect")
CALL net_apply('%Could%connect to server%');

-- 127.0.0.3 never saw a request
CALL net_requests('127.0.0.3:18083');

SELECT webhook_ingest.drop_source(name, force => true) FROM webhook_ingest.sources WHERE name LIKE 'net\_%' ORDER BY name;
DROP PROCEDURE net_apply(text);
DROP PROCEDURE net_requests(text, int);
DROP FUNCTION net_settled(text[]);
DROP FUNCTION net_jobs(text[]);
DROP FUNCTION wait_until(text, interval);
DROP SEQUENCE net_seq;
