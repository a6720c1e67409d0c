-- wait_until(condition, timeout): poll a boolean query every 20 ms until it is
-- true (true) or the timeout passes (false).  Included by every file of the
-- worker suite (psql \i, from the suite's top directory).
CREATE OR REPLACE FUNCTION wait_until(condition text, timeout interval DEFAULT '60 s') RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    deadline timestamptz := clock_timestamp() + timeout;
    ok boolean;
BEGIN
    LOOP
        PERFORM pg_stat_clear_snapshot();
        EXECUTE condition INTO ok;
        IF ok THEN RETURN true; END IF;
        IF clock_timestamp() > deadline THEN RETURN false; END IF;
        PERFORM pg_sleep(0.02);
    END LOOP;
END $$;
