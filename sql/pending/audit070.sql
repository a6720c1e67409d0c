-- sql/pending/audit070.sql: for the 0.7.0 -> 0.8.0 update script (audit 0.7.0,
-- second pass, finding P1, test/audit/FINDINGS-0.7.0-second.md, TAP 117).
--
-- Only a superuser may give a source its own proxy (or '' for none), because
-- it goes around webhook_ingest.proxy.  But a webhook_ingest_admin could
-- still change the url_template of a source a superuser had given one, and
-- so send fetches to any host through it (with proxy '': directly, past the
-- egress proxy the superuser meant as the SSRF barrier).  _guard_source now
-- refuses that (42501) unless the same change clears the proxy.  The
-- function is 0.7.0's with one block added before the client certificate
-- check.

CREATE OR REPLACE FUNCTION webhook_ingest._guard_source()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    owner oid;
BEGIN
    IF TG_OP = 'INSERT' OR
       (NEW.name, NEW.url_template, NEW.handler, NEW.headers, NEW.timeout_ms, NEW.max_attempts)
       IS DISTINCT FROM (OLD.name, OLD.url_template, OLD.handler, OLD.headers, OLD.timeout_ms, OLD.max_attempts) THEN
        PERFORM webhook_ingest._check_source(NEW.name, NEW.url_template, NEW.handler, NEW.headers,
                                             NEW.timeout_ms, NEW.max_attempts);
    END IF;
    -- (jsonpath has no equality: compared as text)
    IF TG_OP = 'INSERT' OR
       (NEW.signature_scheme, NEW.signing_secrets, NEW.signature_tolerance,
        NEW.external_id_path::text, NEW.event_id_path::text)
       IS DISTINCT FROM (OLD.signature_scheme, OLD.signing_secrets, OLD.signature_tolerance,
                         OLD.external_id_path::text, OLD.event_id_path::text) THEN
        PERFORM webhook_ingest._check_intake(NEW.signature_scheme, NEW.signing_secrets, NEW.signature_tolerance,
                                             NEW.external_id_path, NEW.event_id_path);
    END IF;
    IF TG_OP = 'INSERT' OR
       (NEW.weight, NEW.rate_limit, NEW.rate_burst, NEW.max_in_flight)
       IS DISTINCT FROM (OLD.weight, OLD.rate_limit, OLD.rate_burst, OLD.max_in_flight) THEN
        PERFORM webhook_ingest._check_limits(NEW.weight, NEW.rate_limit, NEW.rate_burst, NEW.max_in_flight);
    END IF;
    IF TG_OP = 'INSERT' OR NEW.tls_ca IS DISTINCT FROM OLD.tls_ca THEN
        PERFORM webhook_ingest._check_tls_ca(NEW.tls_ca);
    END IF;
    IF TG_OP = 'INSERT' OR NEW.proxy IS DISTINCT FROM OLD.proxy THEN
        PERFORM webhook_ingest._check_proxy(NEW.proxy);
        -- A source's own proxy (or '' for none) goes around webhook_ingest.proxy, the superuser's
        -- egress policy: only a superuser sets one; anyone who may write sources can clear it.
        IF NEW.proxy IS NOT NULL AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
            RAISE EXCEPTION 'permission denied to set the proxy of source "%"', webhook_ingest._clip(NEW.name)
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = 'A source''s proxy overrides webhook_ingest.proxy, which only a superuser sets.',
                      HINT = 'Ask a superuser to set it, or leave it NULL to use webhook_ingest.proxy.';
        END IF;
    END IF;
    -- The same policy for where such a source points: its proxy was chosen by a superuser for
    -- its url_template, and a non-superuser who points it elsewhere would take that way out
    -- (proxy '' : direct) to any host, around webhook_ingest.proxy.  Clearing the proxy in the
    -- same change (alter_source(..., reset_proxy => true)) is fine.
    IF TG_OP = 'UPDATE' AND NEW.proxy IS NOT NULL AND NEW.url_template IS DISTINCT FROM OLD.url_template
       AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
        RAISE EXCEPTION 'permission denied to change the url_template of source "%"', webhook_ingest._clip(NEW.name)
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'The source has its own proxy, which only a superuser sets: its fetches would go to the new URL that way, around webhook_ingest.proxy.',
                  HINT = 'Ask a superuser to change it, or reset its proxy in the same call (reset_proxy => true) to use webhook_ingest.proxy.';
    END IF;
    -- (its key is checked with it by _set_tls_client: a restore loads the key after the source)
    IF TG_OP = 'INSERT' OR NEW.tls_client_cert IS DISTINCT FROM OLD.tls_client_cert THEN
        PERFORM webhook_ingest._check_tls_client(NEW.tls_client_cert, NULL, false);
    END IF;
    IF NEW.handler IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.handler IS DISTINCT FROM OLD.handler) THEN
        SELECT p.proowner INTO owner FROM pg_catalog.pg_proc p WHERE p.oid = NEW.handler;
        IF NOT pg_catalog.pg_has_role(current_user, owner, 'USAGE') THEN
            RAISE EXCEPTION 'permission denied to register handler %: it is owned by role %',
                            NEW.handler, owner::regrole
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = format('Handlers run as their owner, and role %s does not have the privileges of role %s.',
                                      current_user, owner::regrole),
                      HINT = 'Register it as a role that has them (a member of the owner role), or as a superuser.';
        END IF;
    END IF;
    -- Any change of the row is one for the worker too (it ends a throttle of the source).
    IF TG_OP = 'UPDATE' THEN
        NEW.updated_at := now();
    END IF;
    IF NEW.enqueue_roles IS NOT NULL
       AND (TG_OP = 'INSERT' OR NEW.enqueue_roles::oid[] IS DISTINCT FROM OLD.enqueue_roles::oid[]) THEN
        IF pg_catalog.cardinality(NEW.enqueue_roles) = 0 THEN
            RAISE EXCEPTION 'enqueue_roles must not be empty'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'NULL (reset_enqueue_roles => true in alter_source) lets every member of webhook_ingest_enqueue enqueue.';
        END IF;
        IF pg_catalog.array_position(NEW.enqueue_roles, NULL) IS NOT NULL THEN
            RAISE EXCEPTION 'enqueue_roles must not contain NULL' USING ERRCODE = 'null_value_not_allowed';
        END IF;
    END IF;
    RETURN NEW;
END
$fn$;
