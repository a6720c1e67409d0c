# webhook_ingest: PGXS build, test and demo entry points.
#
#   make              build the extension
#   make install      install it, and the router extension webhook_ingest_router
#                     (router/), into the PostgreSQL that PG_CONFIG names
#   make test         (as root on Debian 12) install what is missing, build,
#                     install and run every suite against throwaway clusters
#   make demo         (as root) the same set-up, then the intake end to end
#   make bench-enqueue   enqueue() against a bare INSERT ... ON CONFLICT
#   make fuzz         (as root) the libFuzzer targets, FUZZ_SECONDS each
#                     (default 600); not part of make test
#   make deb          (as root on Debian 12) the Debian package,
#                     build/deb/postgresql-15-webhook-ingest_$(EXTVERSION)_*.deb
#   make check-majors (as root on Debian 12) compile every src/ .c file with -Werror
#                     against the headers of 15, 17 and 18 (test/majors/check);
#                     not part of make test
#   make test-majors  (as root on Debian 12) run the suites against 17
#                     (trixie's packages in a chroot) and 18 (built from
#                     Debian's source package into build/majors)
#                     (test/majors/run); not part of make test
#   make deb-test     the package's test (test/deb/run; WI_DEB_INSTALL=1 also
#                     installs it in a private mount namespace); not part of make test

EXTENSION = webhook_ingest
# The one version source: webhook_ingest.control (generated from
# webhook_ingest.control.in), the library (-DEXTVERSION: WI_VERSION in
# src/base/webhook_ingest.h) and META.json, debian/changelog and CHANGELOG.md
# (checked: make version-check, TAP 009).  The newest install script must be
# this version's (sql/webhook_ingest--$(EXTVERSION).sql).
EXTVERSION = 0.10.0
MODULE_big = webhook_ingest
# src/ in wings (doc/design.md, "Source layout"): base below intake, net,
# worker, history and reconcile; webhook_ingest.c (_PG_init) above them.
WINGS = base intake net worker history reconcile
SRC_DIRS = src $(addprefix src/,$(WINGS))
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard $(addsuffix /*.c,$(SRC_DIRS)))))
# The install and update scripts.  CREATE EXTENSION runs the fresh-install
# script of a version.  The current version's is sql/webhook_ingest.sql,
# the hand-kept schema (each object once), copied; each landed version's
# (an upgrade source, which the tests install as it was) is generated from
# the landed chain up to it (sql/fresh_install.awk), as it was when it
# landed.  TAP 041 checks that a fresh install and an updated one agree.
CHAIN_0.3.0 = sql/webhook_ingest--0.1.0.sql sql/webhook_ingest--0.1.0--0.2.0.sql \
	sql/webhook_ingest--0.2.0--0.3.0.sql
CHAIN_0.4.0 = $(CHAIN_0.3.0) sql/webhook_ingest--0.3.0--0.4.0.sql
CHAIN_0.5.0 = $(CHAIN_0.4.0) sql/webhook_ingest--0.4.0--0.5.0.sql
CHAIN_0.6.0 = $(CHAIN_0.5.0) sql/webhook_ingest--0.5.0--0.6.0.sql
CHAIN_0.7.0 = $(CHAIN_0.6.0) sql/webhook_ingest--0.6.0--0.7.0.sql
CHAIN_0.8.0 = $(CHAIN_0.7.0) sql/webhook_ingest--0.7.0--0.8.0.sql
CHAIN_0.9.0 = $(CHAIN_0.8.0) sql/webhook_ingest--0.8.0--0.9.0.sql
FRESH_INSTALLS = sql/webhook_ingest--0.3.0.sql sql/webhook_ingest--0.4.0.sql sql/webhook_ingest--0.5.0.sql \
	sql/webhook_ingest--0.6.0.sql sql/webhook_ingest--0.7.0.sql sql/webhook_ingest--0.8.0.sql \
	sql/webhook_ingest--0.9.0.sql sql/webhook_ingest--0.10.0.sql
DATA = $(filter-out $(FRESH_INSTALLS),$(sort $(wildcard sql/webhook_ingest--*.sql)))
DATA_built = $(FRESH_INSTALLS)
# The companion extension for a router database in front of shards (router/, SQL only, PL/Proxy):
# its own control file and version, installed beside webhook_ingest by the same make install, with
# every install and update script (the landed ones are frozen: an upgrade source each).
ROUTER_EXTENSION = webhook_ingest_router
ROUTER_VERSION = 0.2.0
DATA += router/$(ROUTER_EXTENSION).control $(sort $(wildcard router/$(ROUTER_EXTENSION)--*.sql))

PG_CONFIG ?= pg_config

CURL_CONFIG ?= curl-config
SHLIB_LINK += $(shell $(CURL_CONFIG) --libs 2>/dev/null || echo -lcurl)
# OpenSSL's HMAC, base64 and CRYPTO_memcmp for src/intake/signature.c, PEM parsing for src/net/tls_check.c.
SHLIB_LINK += -lcrypto
# OpenSSL's SSL_CTX_set1_cert_store for src/net/http.c (a source's CAs parsed once).
SHLIB_LINK += -lssl
PG_CPPFLAGS += $(addprefix -I,$(SRC_DIRS)) $(shell $(CURL_CONFIG) --cflags 2>/dev/null)
PG_CPPFLAGS += -DEXTVERSION=\"$(EXTVERSION)\"
PG_CFLAGS += -Wall -Wextra -Werror -Wno-unused-parameter -Wno-missing-field-initializers -Wno-sign-compare

# Suites.  Each runs against a throwaway instance (test/webhook_ingest.conf
# preloads the library); test/run starts them as an unprivileged user.
TEST_TEMP_INSTANCE ?= $(CURDIR)/tmp_check
REGRESS = $(patsubst test/sql/%.sql,%,$(sort $(wildcard test/sql/*.sql)))
REGRESS_OPTS = --inputdir=test --outputdir=$(CURDIR)/test \
	--temp-instance=$(TEST_TEMP_INSTANCE) --temp-config=$(CURDIR)/test/webhook_ingest.conf \
	--temp-config=$(CURDIR)/test/regress.conf \
	--load-extension=$(EXTENSION)
ISOLATION = $(patsubst test/specs/%.spec,%,$(sort $(wildcard test/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test --outputdir=$(CURDIR)/test/output_iso \
	--temp-instance=$(TEST_TEMP_INSTANCE)_iso --temp-config=$(CURDIR)/test/webhook_ingest.conf \
	--temp-config=$(CURDIR)/test/isolation.conf \
	--load-extension=$(EXTENSION)
TAP_TESTS = 1
PROVE_TESTS = $(sort $(wildcard test/t/*.pl))

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# After the include: Makefile.global resets it.
PROVE_FLAGS = -v

sql/webhook_ingest--0.3.0.sql: $(CHAIN_0.3.0) sql/fresh_install.awk
	awk -f sql/fresh_install.awk $(CHAIN_0.3.0) > $@
sql/webhook_ingest--0.4.0.sql: $(CHAIN_0.4.0) sql/fresh_install.awk
	awk -f sql/fresh_install.awk $(CHAIN_0.4.0) > $@
sql/webhook_ingest--0.5.0.sql: $(CHAIN_0.5.0) sql/fresh_install.awk
	awk -f sql/fresh_install.awk $(CHAIN_0.5.0) > $@
sql/webhook_ingest--0.6.0.sql: $(CHAIN_0.6.0) sql/fresh_install.awk
	awk -f sql/fresh_install.awk $(CHAIN_0.6.0) > $@
sql/webhook_ingest--0.7.0.sql: $(CHAIN_0.7.0) sql/fresh_install.awk
	awk -f sql/fresh_install.awk $(CHAIN_0.7.0) > $@
sql/webhook_ingest--0.8.0.sql: $(CHAIN_0.8.0) sql/fresh_install.awk
	awk -f sql/fresh_install.awk $(CHAIN_0.8.0) > $@
sql/webhook_ingest--0.9.0.sql: $(CHAIN_0.9.0) sql/fresh_install.awk
	awk -f sql/fresh_install.awk $(CHAIN_0.9.0) > $@
sql/webhook_ingest--$(EXTVERSION).sql: sql/webhook_ingest.sql
	cp $< $@

# Every object depends on every header (PGXS tracks no header dependencies),
# and on the Makefile, which holds EXTVERSION.
$(OBJS): $(wildcard $(addsuffix /*.h,$(SRC_DIRS))) Makefile

# PGXS's all and install take $(EXTENSION).control; it is made here.
$(EXTENSION).control: $(EXTENSION).control.in Makefile
	sed -e "s/@EXTVERSION@/$(EXTVERSION)/g" $< > $@
EXTRA_CLEAN += $(EXTENSION).control

# The files that name the version by hand agree with EXTVERSION.
version-check:
	@echo '$(FRESH_INSTALLS)' | tr ' ' '\n' | grep -qxF 'sql/$(EXTENSION)--$(EXTVERSION).sql' \
		|| { echo "FRESH_INSTALLS: no sql/$(EXTENSION)--$(EXTVERSION).sql"; exit 1; }
	@test "$$(ls sql/$(EXTENSION)--*--*.sql | sed -e 's/.*--//' -e 's/\.sql$$//' | sort -V | tail -n 1)" = '$(EXTVERSION)' \
		|| { echo "the newest update script does not lead to $(EXTVERSION)"; exit 1; }
	@grep -q '"version": "$(EXTVERSION)"' META.json || { echo "META.json: version is not $(EXTVERSION)"; exit 1; }
	@test "$$(grep -c '"version": "$(EXTVERSION)"' META.json)" -eq 2 || { echo "META.json: version and provides' version are not both $(EXTVERSION)"; exit 1; }
	@head -n 1 debian/changelog | grep -qF '($(EXTVERSION))' || { echo "debian/changelog: top entry is not $(EXTVERSION)"; exit 1; }
	@grep -qE '^## \[?$(EXTVERSION)\]?' CHANGELOG.md || { echo "CHANGELOG.md: no $(EXTVERSION) section"; exit 1; }
	@grep -qx "default_version = '$(ROUTER_VERSION)'" router/$(ROUTER_EXTENSION).control \
		|| { echo "router/$(ROUTER_EXTENSION).control: default_version is not $(ROUTER_VERSION)"; exit 1; }
	@test -f router/$(ROUTER_EXTENSION)--$(ROUTER_VERSION).sql \
		|| { echo "no router/$(ROUTER_EXTENSION)--$(ROUTER_VERSION).sql"; exit 1; }
	@test "$$(ls router/$(ROUTER_EXTENSION)--*--*.sql | sed -e 's/.*--//' -e 's/\.sql$$//' | sort -V | tail -n 1)" = '$(ROUTER_VERSION)' \
		|| { echo "the newest router update script does not lead to $(ROUTER_VERSION)"; exit 1; }
	@grep -q '"version": "$(ROUTER_VERSION)"' META.json || { echo "META.json: $(ROUTER_EXTENSION) is not $(ROUTER_VERSION)"; exit 1; }
	@echo "version-check: $(EXTVERSION) everywhere ($(ROUTER_EXTENSION) $(ROUTER_VERSION))"

# Every source file's header names it (line 2) and ends with IDENTIFICATION
# src/<wing>/<file>.
header-check:
	@bad=0; for f in $(addsuffix /*.c,$(SRC_DIRS)) $(addsuffix /*.h,$(SRC_DIRS)); do \
		[ -e $$f ] || continue; n=$${f##*/}; \
		sed -n 2p $$f | grep -qxF " * $$n" || { echo "$$f: line 2 is not ' * $$n'"; bad=1; }; \
		sed -n '1,/^ \*\//p' $$f | grep -qx " \*		$$f" || { echo "$$f: no IDENTIFICATION $$f in its header"; bad=1; }; \
	done; [ $$bad -eq 0 ] && echo "header-check: every src/ file has its header ... ok"

# One suite at a time, so test/run can count and report each.
.PHONY: version-check header-check check-majors test-majors majors-flags deb deb-test unit-suite fuzz-replay-suite regress-suite isolation-suite tap-suite worker-suite examples-suite test demo bench-enqueue fuzz
# Pure functions on their own (test/unit), built against the server's headers; and every
# relative link and anchor of the documentation (test/links/check).
unit-suite: header-check
	$(CC) $(CFLAGS) $(CPPFLAGS) -o test/unit/redirect_test test/unit/redirect_test.c src/net/redirect.c \
		$(SHLIB_LINK) -L$(pkglibdir) -lpgcommon -lpgport
	test/unit/redirect_test
	$(CC) $(CFLAGS) -DWI_FRONTEND -Isrc/intake -o test/unit/signature_test test/unit/signature_test.c src/intake/signature.c -lcrypto
	test/unit/signature_test
	$(CC) $(CFLAGS) -DFRONTEND $(CPPFLAGS) -o test/unit/throttle_test test/unit/throttle_test.c src/net/retry_after.c \
		-L$(pkglibdir) -lpgcommon -lpgport -lcurl
	test/unit/throttle_test
	python3 test/links/check --self-test
	python3 test/links/check
	$(CC) $(CFLAGS) -Isrc/base -o test/unit/siphash_test test/unit/siphash_test.c src/base/siphash.c
	test/unit/siphash_test
# The fuzz targets (test/fuzz) run once on each committed seed and crash
# input, built with gcc's ASan and UBSan instead of libFuzzer: their
# invariants hold there.  make fuzz is the real fuzzing.
FUZZ_REPLAY = $(CC) -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all $(addprefix -I,$(SRC_DIRS)) test/fuzz/replay.c
FUZZ_REPLAY_PG = -DFRONTEND $(CPPFLAGS) -L$(pkglibdir) -lpgcommon -lpgport -lcurl
fuzz-replay-suite:
	$(FUZZ_REPLAY) -o test/fuzz/signature_replay test/fuzz/signature_fuzz.c src/intake/signature.c -lcrypto
	$(FUZZ_REPLAY) -o test/fuzz/url_template_replay test/fuzz/url_template_fuzz.c src/net/url_template.c $(FUZZ_REPLAY_PG)
	$(FUZZ_REPLAY) -o test/fuzz/retry_after_replay test/fuzz/retry_after_fuzz.c src/net/retry_after.c $(FUZZ_REPLAY_PG)
	for t in signature url_template retry_after; do \
		test/fuzz/$${t}_replay $$t test/fuzz/corpus/$$t/* $$(ls -d test/fuzz/crashes/$$t/* 2>/dev/null) || exit 1; \
	done
regress-suite:
	$(pg_regress_installcheck) $(REGRESS_OPTS) $(REGRESS)
isolation-suite:
	$(pg_isolation_regress_installcheck) $(ISOLATION_OPTS) $(ISOLATION)
# A C function that segfaults, for TAP 008 only: built here, never installed.
TEST_CRASH_MODULE = test/modules/wi_test_crash$(DLSUFFIX)
$(TEST_CRASH_MODULE): test/modules/wi_test_crash.c
	$(CC) $(CFLAGS) $(CFLAGS_SL) $(CPPFLAGS) -shared -o $@ $<
tap-suite: $(TEST_CRASH_MODULE)
	$(prove_installcheck)
# The worker against test/upstream.py (test/run starts it on 127.0.0.1:18080).
WORKER_REGRESS = $(patsubst test/worker/sql/%.sql,%,$(sort $(wildcard test/worker/sql/*.sql)))
worker-suite:
	$(pg_regress_installcheck) --inputdir=test/worker --outputdir=$(CURDIR)/test/worker \
		--temp-instance=$(TEST_TEMP_INSTANCE)_worker --temp-config=$(CURDIR)/test/worker/worker.conf \
		--dbname=webhook_worker --load-extension=$(EXTENSION) $(WORKER_REGRESS)
# The examples' own test suites (examples/django, examples/express) against a
# cluster of their own; test/run installs their dependencies first.
examples-suite:
	bash test/examples

test:
	bash test/run

demo:
	bash test/demo

bench-enqueue:
	bash bench/enqueue

# The Debian package (debian/, pg_buildext), built from a copy in build/deb.
deb:
	bash test/deb/build

deb-test:
	bash test/deb/run

# Every src/ .c file compiled against each major's headers (test/majors/check).
check-majors:
	bash test/majors/check
# The suites against 17 and 18, the other supported majors Debian carries (test/majors/run).
test-majors:
	bash test/majors/run
# The flags test/majors/check compiles with: this build's, less the
# installed server's include directories.
majors-flags:
	@echo 'CC=$(CC)'
	@echo 'CFLAGS=$(CFLAGS) $(CFLAGS_SL)'
	@echo 'CPPFLAGS=$(filter-out -I$(includedir_server) -I$(includedir_internal),$(CPPFLAGS))'

# libFuzzer, FUZZ_SECONDS (600) per target: test/fuzz/README.md.  Not part of make test.
fuzz:
	bash test/fuzz/run
