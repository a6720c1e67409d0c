# sql/pre14.awk: install and update scripts for PostgreSQL 13, which has
# neither SQL-standard function bodies nor date_bin() (both 14+).  Used by the
# Makefile only when building against a major below 14 (the landed scripts
# stay as they are):
# - each "RETURN expr;" body of a LANGUAGE sql function (they start a line)
#   becomes "AS $$ SELECT expr $$;": the same result, parsed at each call
#   instead of at creation;
# - date_bin(stride, source, origin), each argument free of commas and
#   parentheses, becomes origin + floor((source - origin) / stride) * stride,
#   in seconds (the strides used are whole minutes, hours or days).
function date_bin(line,    out, i, rest, j, args, n) {
	out = ""
	while ((i = index(line, "date_bin(")) > 0) {
		rest = substr(line, i + 9)
		j = index(rest, ")")
		n = split(substr(rest, 1, j - 1), args, ", ")
		if (j == 0 || n != 3) {
			print "sql/pre14.awk: cannot rewrite: " line > "/dev/stderr"
			exit 1
		}
		out = out substr(line, 1, i - 1) "(" args[3] " + floor(extract(epoch FROM (" args[2] " - " args[3] \
			")) / extract(epoch FROM " args[1] ")) * " args[1] ")"
		line = substr(rest, j + 1)
	}
	return out line
}
/date_bin\(/ { $0 = date_bin($0) }
/^RETURN / { in_return = 1; sub(/^RETURN /, "AS $$ SELECT ") }
in_return && /;[ \t]*$/ { sub(/;[ \t]*$/, " $$;"); in_return = 0 }
{ print }
