-- Sources: add, alter, drop, and every way to get one wrong.
\set VERBOSITY default
\set SHOW_CONTEXT never

CREATE FUNCTION public.store_post(external_id text, details jsonb, payload jsonb)
RETURNS void LANGUAGE sql AS $$ SELECT $$;
CREATE FUNCTION public.wrong_args(external_id text, details jsonb)
RETURNS void LANGUAGE sql AS $$ SELECT $$;
CREATE FUNCTION public.wrong_return(external_id text, details jsonb, payload jsonb)
RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;
CREATE PROCEDURE public.a_procedure(external_id text, details jsonb, payload jsonb)
LANGUAGE sql AS $$ SELECT $$;

SELECT webhook_ingest.add_source('blog', 'http://127.0.0.1:8080/posts/{external_id}',
                                 'public.store_post(text,jsonb,jsonb)',
                                 '{"Authorization": "Bearer s3cret"}');
SELECT webhook_ingest.add_source('shop', 'HTTPS://api.example.test/v1/orders/{external_id}?expand=items');
SELECT webhook_ingest.add_source(name => 'minimal', url_template => 'http://localhost/{external_id}');
SELECT name, url_template, handler, headers, timeout_ms, max_attempts
  FROM webhook_ingest.sources ORDER BY name;

-- a duplicate name
SELECT webhook_ingest.add_source('blog', 'http://127.0.0.1:8080/other/{external_id}');
\echo :SQLSTATE
-- names
SELECT webhook_ingest.add_source(NULL, 'http://h/{external_id}');
\echo :SQLSTATE
SELECT webhook_ingest.add_source('', 'http://h/{external_id}');
\echo :SQLSTATE
SELECT webhook_ingest.add_source('has space', 'http://h/{external_id}');
\echo :SQLSTATE
SELECT webhook_ingest.add_source(repeat('n', 64), 'http://h/{external_id}');
\echo :SQLSTATE
-- templates
SELECT webhook_ingest.add_source('t1', NULL);
\echo :SQLSTATE
SELECT webhook_ingest.add_source('t1', 'ftp://h/{external_id}');
\echo :SQLSTATE
SELECT webhook_ingest.add_source('t1', 'file:///etc/{external_id}');
\echo :SQLSTATE
SELECT webhook_ingest.add_source('t1', 'http://h/posts/');
\echo :SQLSTATE
SELECT webhook_ingest.add_source('t1', 'http:///{external_id}');
\echo :SQLSTATE
SELECT webhook_ingest.add_source('t1', 'http://{external_id}.example.test/');
\echo :SQLSTATE
SELECT webhook_ingest.add_source('t1', 'http://h/a b/{external_id}');
\echo :SQLSTATE
-- handlers
SELECT webhook_ingest.add_source('t1', 'http://h/{external_id}', 'public.wrong_args(text,jsonb)');
\echo :SQLSTATE
SELECT webhook_ingest.add_source('t1', 'http://h/{external_id}', 'public.wrong_return(text,jsonb,jsonb)');
\echo :SQLSTATE
SELECT webhook_ingest.add_source('t1', 'http://h/{external_id}', 'public.a_procedure(text,jsonb,jsonb)');
\echo :SQLSTATE
SELECT webhook_ingest.add_source('t1', 'http://h/{external_id}', 'public.no_such_function(text,jsonb,jsonb)');
\echo :SQLSTATE
-- headers
SELECT webhook_ingest.add_source('t1', 'http://h/{external_id}', NULL, '["Authorization"]');
\echo :SQLSTATE
SELECT webhook_ingest.add_source('t1', 'http://h/{external_id}', NULL, '{"Bad Name": "x"}');
\echo :SQLSTATE
SELECT webhook_ingest.add_source('t1', 'http://h/{external_id}', NULL, '{"X-Count": 1}');
\echo :SQLSTATE
SELECT webhook_ingest.add_source('t1', 'http://h/{external_id}', NULL, E'{"X-Evil": "a\\r\\nHost: other"}');
\echo :SQLSTATE
-- limits
SELECT webhook_ingest.add_source('t1', 'http://h/{external_id}', timeout_ms => 0);
\echo :SQLSTATE
SELECT webhook_ingest.add_source('t1', 'http://h/{external_id}', max_attempts => 0);
\echo :SQLSTATE
-- none of the failures above wrote anything
SELECT count(*) AS sources FROM webhook_ingest.sources;

-- alter: NULL keeps the current value
SELECT webhook_ingest.alter_source('shop', timeout_ms => 2500, headers => '{"X-Api-Key": "k"}');
SELECT webhook_ingest.alter_source('minimal', handler => 'public.store_post(text,jsonb,jsonb)');
SELECT name, url_template, handler, headers, timeout_ms, max_attempts
  FROM webhook_ingest.sources ORDER BY name;
SELECT webhook_ingest.alter_source('minimal', drop_handler => true);
SELECT handler FROM webhook_ingest.sources WHERE name = 'minimal';
SELECT webhook_ingest.alter_source('nope', timeout_ms => 1);
\echo :SQLSTATE
SELECT webhook_ingest.alter_source('shop', url_template => 'gopher://h/{external_id}');
\echo :SQLSTATE
SELECT webhook_ingest.alter_source('shop', handler => 'public.wrong_args(text,jsonb)');
\echo :SQLSTATE
SELECT webhook_ingest.alter_source('shop', handler => 'public.store_post(text,jsonb,jsonb)', drop_handler => true);
\echo :SQLSTATE
SELECT url_template, timeout_ms FROM webhook_ingest.sources WHERE name = 'shop';

-- url_for: the id is one percent-encoded path segment
SELECT webhook_ingest.url_for('blog', 'post-42_a.b~c');
-- (a "." or ".." segment, even one a '/' of the id makes, is refused: nginx, for one, decodes %2F and
-- %2E before it resolves dot segments, and would fetch /admin for ../../admin)
SELECT webhook_ingest.url_for('blog', '../../admin?x=1#frag');
\echo :SQLSTATE
SELECT webhook_ingest.url_for('blog', '..');
\echo :SQLSTATE
SELECT webhook_ingest.url_for('blog', '.');
\echo :SQLSTATE
SELECT webhook_ingest.url_for('blog', 'a\\..\\b');
\echo :SQLSTATE
SELECT webhook_ingest.url_for('blog', 'a/../b');
\echo :SQLSTATE
SELECT webhook_ingest.url_for('blog', '..x/.y/x..');
SELECT webhook_ingest.url_for('blog', '...');
SELECT webhook_ingest.url_for('blog', '100%/ü');
SELECT webhook_ingest.url_for('shop', 'a/b');
SELECT webhook_ingest.url_for('nope', 'x');
\echo :SQLSTATE

-- drop: refuses while jobs are active unless forced; takes jobs and event ids along
SELECT * FROM webhook_ingest.enqueue('minimal', 'obj-1', NULL, 'evt-1');
SELECT webhook_ingest.drop_source('minimal');
\echo :SQLSTATE
SELECT webhook_ingest.drop_source('minimal', force => true);
SELECT count(*) AS jobs_left FROM webhook_ingest.jobs WHERE source = 'minimal';
SELECT count(*) AS events_left FROM webhook_ingest.events WHERE source = 'minimal';
SELECT webhook_ingest.drop_source('minimal');
\echo :SQLSTATE
SELECT * FROM webhook_ingest.enqueue('minimal', 'obj-1');
\echo :SQLSTATE
SELECT name FROM webhook_ingest.sources ORDER BY name;
