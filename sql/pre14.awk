# sql/pre14.awk: a fresh-install script for PostgreSQL 13, which has no
# SQL-standard function bodies (14+).  Each "RETURN expr;" body of a
# LANGUAGE sql function (they start a line) becomes "AS $$ SELECT expr $$;":
# the same result, parsed at each call instead of at creation.  Used by the
# Makefile only when building against a major below 14; the landed scripts,
# and so the update scripts from 0.5.0 on, keep their RETURN bodies, so on
# 13 only a fresh install of 0.6.0 or later works.
/^RETURN / { in_return = 1; sub(/^RETURN /, "AS $$ SELECT ") }
in_return && /;[ \t]*$/ { sub(/;[ \t]*$/, " $$;"); in_return = 0 }
{ print }
