\set ev random(1000000, 1000000000000000)
\set obj random(1, 1000000000000000)
SELECT pgq.insert_event('posts', 'post', :obj::text, :ev::text, NULL, NULL, NULL)
;
