# webhook_ingest: PGXS build, test and demo entry points.
#
#   make              build the extension
#   make install      install it into the PostgreSQL that PG_CONFIG names
#   make test         (as root on Debian 12) install what is missing, build,
#                     install and run every suite against throwaway clusters
#   make demo         (as root) the same set-up, then the intake end to end
#   make bench-enqueue   enqueue() against a bare INSERT ... ON CONFLICT
#   make fuzz         (as root) the libFuzzer targets, FUZZ_SECONDS each
#                     (default 600); not part of make test

EXTENSION = webhook_ingest
MODULE_big = webhook_ingest
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c)))
# The install and update scripts.  CREATE EXTENSION runs the fresh-install
# script of a version, which is generated from the landed chain up to it
# (sql/fresh_install.awk), so each statement exists once: one for the
# current version and one for each landed version (an upgrade source, which
# the tests install as it was).
CHAIN_0.3.0 = sql/webhook_ingest--0.1.0.sql sql/webhook_ingest--0.1.0--0.2.0.sql \
	sql/webhook_ingest--0.2.0--0.3.0.sql
CHAIN_0.4.0 = $(CHAIN_0.3.0) sql/webhook_ingest--0.3.0--0.4.0.sql
CHAIN_0.5.0 = $(CHAIN_0.4.0) sql/webhook_ingest--0.4.0--0.5.0.sql
CHAIN_0.6.0 = $(CHAIN_0.5.0) sql/webhook_ingest--0.5.0--0.6.0.sql
CHAIN_0.7.0 = $(CHAIN_0.6.0) sql/webhook_ingest--0.6.0--0.7.0.sql
FRESH_INSTALLS = sql/webhook_ingest--0.3.0.sql sql/webhook_ingest--0.4.0.sql sql/webhook_ingest--0.5.0.sql \
	sql/webhook_ingest--0.6.0.sql sql/webhook_ingest--0.7.0.sql
DATA = $(filter-out $(FRESH_INSTALLS),$(sort $(wildcard sql/webhook_ingest--*.sql)))
DATA_built = $(FRESH_INSTALLS)

PG_CONFIG ?= pg_config

CURL_CONFIG ?= curl-config
SHLIB_LINK += $(shell $(CURL_CONFIG) --libs 2>/dev/null || echo -lcurl)
# OpenSSL's HMAC, base64 and CRYPTO_memcmp for src/signature.c, PEM parsing for src/tls_check.c.
SHLIB_LINK += -lcrypto
# OpenSSL's SSL_CTX_set1_cert_store for src/http.c (a source's CAs parsed once).
SHLIB_LINK += -lssl
PG_CPPFLAGS += -Isrc $(shell $(CURL_CONFIG) --cflags 2>/dev/null)
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

# Every object depends on every header (PGXS tracks no header dependencies).
$(OBJS): $(wildcard src/*.h)

# One suite at a time, so test/run can count and report each.
.PHONY: unit-suite fuzz-replay-suite regress-suite isolation-suite tap-suite worker-suite examples-suite test demo bench-enqueue fuzz
# Pure functions on their own (test/unit), built against the server's headers.
unit-suite:
	$(CC) $(CFLAGS) $(CPPFLAGS) -o test/unit/redirect_test test/unit/redirect_test.c src/redirect.c \
		$(SHLIB_LINK) -L$(pkglibdir) -lpgcommon -lpgport
	test/unit/redirect_test
	$(CC) $(CFLAGS) -DWI_FRONTEND -Isrc -o test/unit/signature_test test/unit/signature_test.c src/signature.c -lcrypto
	test/unit/signature_test
	$(CC) $(CFLAGS) -DFRONTEND $(CPPFLAGS) -o test/unit/throttle_test test/unit/throttle_test.c src/retry_after.c \
		-L$(pkglibdir) -lpgcommon -lpgport -lcurl
	test/unit/throttle_test
# The fuzz targets (test/fuzz) run once on each committed seed and crash
# input, built with gcc's ASan and UBSan instead of libFuzzer: their
# invariants hold there.  make fuzz is the real fuzzing.
FUZZ_REPLAY = $(CC) -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -Isrc test/fuzz/replay.c
FUZZ_REPLAY_PG = -DFRONTEND $(CPPFLAGS) -L$(pkglibdir) -lpgcommon -lpgport -lcurl
fuzz-replay-suite:
	$(FUZZ_REPLAY) -o test/fuzz/signature_replay test/fuzz/signature_fuzz.c src/signature.c -lcrypto
	$(FUZZ_REPLAY) -o test/fuzz/url_template_replay test/fuzz/url_template_fuzz.c src/url_template.c $(FUZZ_REPLAY_PG)
	$(FUZZ_REPLAY) -o test/fuzz/retry_after_replay test/fuzz/retry_after_fuzz.c src/retry_after.c $(FUZZ_REPLAY_PG)
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

# libFuzzer, FUZZ_SECONDS (600) per target: test/fuzz/README.md.  Not part of make test.
fuzz:
	bash test/fuzz/run
