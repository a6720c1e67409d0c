\set ev random(1000000, 1000000000000000)
\set obj random(1, 1000000000000000)

    WITH ins AS (
      
    INSERT INTO pgboss.job_common (
      id,
      name,
      data,
      priority,
      start_after,
      created_on,
      singleton_key,
      singleton_on,
      group_id,
      group_tier,
      expire_seconds,
      deletion_seconds,
      keep_until,
      retry_limit,
      retry_delay,
      retry_backoff,
      retry_delay_max,
      policy,
      dead_letter,
      heartbeat_seconds,
      blocked,
      blocking,
      pending_dependencies,
      trace_context
    )
    SELECT
      COALESCE(id, gen_random_uuid()) as id,
      'fetch_post' as name,
      data,
      COALESCE(priority, 0) as priority,
      j.start_after,
      pgboss.job_now() as created_on,
      "singletonKey",
      CASE
        
        WHEN "singletonSeconds" IS NOT NULL THEN 'epoch'::timestamp + '1s'::interval * ("singletonSeconds"::float8 * floor(( date_part('epoch', pgboss.job_now()) + COALESCE("singletonOffset",0)::float8) / "singletonSeconds"::float8 ))
        ELSE NULL
        END as singleton_on,
      "groupId" as group_id,
      "groupTier" as group_tier,
      COALESCE("expireInSeconds", q.expire_seconds, 900) as expire_seconds,
      COALESCE("deleteAfterSeconds", q.deletion_seconds, 604800) as deletion_seconds,
      j.start_after + (COALESCE("retentionSeconds", q.retention_seconds, 1209600) * interval '1s') as keep_until,
      COALESCE("retryLimit", q.retry_limit, 2) as retry_limit,
      COALESCE("retryDelay", q.retry_delay, 0) as retry_delay,
      COALESCE("retryBackoff", q.retry_backoff, false) as retry_backoff,
      COALESCE("retryDelayMax", q.retry_delay_max) as retry_delay_max,
      q.policy,
      COALESCE("deadLetter", q.dead_letter) as dead_letter,
      COALESCE("heartbeatSeconds", q.heartbeat_seconds) as heartbeat_seconds,
      COALESCE(blocked, false) as blocked,
      COALESCE(blocking, false) as blocking,
      COALESCE("pendingDependencies", 0) as pending_dependencies,
      "__traceContext" as trace_context
    FROM (
      SELECT *,
        CASE
          WHEN (right("startAfter", 1) = 'Z' OR "startAfter" ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}') THEN CAST("startAfter" as timestamp with time zone)
          ELSE pgboss.job_now() + CAST(COALESCE("startAfter",'0') as interval)
          END as start_after
      FROM json_to_recordset(replace(convert_from(decode('5b7b226964223a6e756c6c2c226e616d65223a2266657463685f706f7374222c2264617461223a7b226964223a224f424a227d2c227072696f72697479223a302c2273696e676c65746f6e4b6579223a224f424a222c2273696e676c65746f6e4f6666736574223a302c2267726f75704964223a6e756c6c2c2267726f757054696572223a6e756c6c2c22646561644c6574746572223a6e756c6c2c225f5f7472616365436f6e74657874223a6e756c6c7d5d', 'hex'), 'UTF8'), 'OBJ', :obj::text)::text::json) as x (
        id uuid,
        priority integer,
        data jsonb,
        "startAfter" text,
        "retryLimit" integer,
        "retryDelay" integer,
        "retryDelayMax" integer,
        "retryBackoff" boolean,
        "singletonKey" text,
        "singletonSeconds" integer,
        "singletonOffset" integer,
        
        "groupId" text,
        "groupTier" text,
        "expireInSeconds" integer,
        "deleteAfterSeconds" integer,
        "retentionSeconds" integer,
        "deadLetter" text,
        "heartbeatSeconds" integer,
        blocked boolean,
        blocking boolean,
        "pendingDependencies" integer,
        "__traceContext" jsonb
      )
    ) j
    LEFT JOIN pgboss.queue q ON q.name = 'fetch_post'
    ON CONFLICT DO NOTHING
    RETURNING id, start_after
  
    ),
    notified AS (
      SELECT pg_notify(('pgboss_' || left(encode(sha224('pgboss'::bytea), 'hex'), 24)), 'fetch_post')
      FROM ins WHERE start_after <= pgboss.job_now() LIMIT 1
    )
    SELECT id FROM ins WHERE (SELECT count(*) FROM notified) >= 0
  
;
