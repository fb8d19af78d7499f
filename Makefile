# Makefile for the remora extension (PGXS, PostgreSQL 15)
#
# The SQL scripts are built from parts (sql/README.md); the C module is the
# PostgreSQL-facing part (src/pg) linked with the transfer engine
# (src/engine), which knows nothing of PostgreSQL.  Warnings as errors come
# from the caller (COPT=-Werror), not from here.

EXTENSION = remora
EXTVERSION = 0.6.0

MODULE_big = remora
PG_OBJS = \
	src/pg/remora.o \
	src/pg/guc.o \
	src/pg/submit.o \
	src/pg/shmem.o \
	src/pg/launcher.o \
	src/pg/bgworker.o \
	src/pg/spi_host.o \
	src/pg/xact.o \
	src/pg/launcher_sql.o \
	src/pg/presign.o \
	src/pg/sweep.o \
	src/pg/jobdef.o \
	src/pg/leases.o \
	src/pg/export_call.o \
	src/pg/worker_settings.o \
	src/pg/bgw_common.o \
	src/pg/httpd.o \
	src/pg/metricsd.o
ENGINE_OBJS = \
	src/engine/common/source_uri.o \
	src/engine/common/names.o \
	src/engine/common/netpolicy.o \
	src/engine/common/hash.o \
	src/engine/common/util.o \
	src/engine/common/http_headers.o \
	src/engine/common/json.o \
	src/engine/net/loop.o \
	src/engine/net/egress.o \
	src/engine/s3/sigv4_check.o \
	src/engine/s3/sigv4_canon.o \
	src/engine/s3/sigv4_sign.o \
	src/engine/s3/creds_cache.o \
	src/engine/s3/creds_chain.o \
	src/engine/s3/creds_fetch.o \
	src/engine/s3/s3xml_parse.o \
	src/engine/s3/s3xml_list.o \
	src/engine/s3/s3xml_body.o \
	src/engine/s3/s3.o \
	src/engine/s3/s3_sse.o \
	src/engine/s3/s3_etag.o \
	src/engine/s3/multipart.o \
	src/engine/s3/partsize.o \
	src/engine/core/engine.o \
	src/engine/transfer/object.o \
	src/engine/transfer/ranges.o \
	src/engine/transfer/subranges.o \
	src/engine/transfer/adapt.o \
	src/engine/transfer/ranges_adapt.o \
	src/engine/transfer/parts.o \
	src/engine/transfer/reuse.o \
	src/engine/transfer/assemble.o \
	src/engine/transfer/manifest.o \
	src/engine/sets/set.o \
	src/engine/sets/list_s3.o \
	src/engine/sets/list_hf.o \
	src/engine/sets/set_window.o \
	src/engine/sets/set_members.o \
	src/engine/sets/set_manifest.o \
	src/engine/export/export.o \
	src/engine/export/export_pages.o \
	src/engine/export/export_parts.o \
	src/engine/export/export_answers.o \
	src/engine/chores/cleanup.o \
	src/engine/chores/sweep.o \
	src/engine/chores/webhook.o
# the runner: the attempts of a worker, its round, the protocol's calls
# and documents, for both hosts (the background worker, remora-worker)
RUNNER_OBJS = \
	src/runner/state.o \
	src/runner/decode.o \
	src/runner/encode.o \
	src/runner/calls.o \
	src/runner/attempts.o \
	src/runner/start.o \
	src/runner/webhooks.o \
	src/runner/round.o
# the web client and API, run in libmicrohttpd's threads of the worker
# "remora http" (src/pg/httpd.o); nothing here is PostgreSQL-facing
HTTP_OBJS = \
	src/http/config.o \
	src/http/server.o \
	src/http/respond.o \
	src/http/auth.o \
	src/http/session.o \
	src/http/signin_throttle.o \
	src/http/forwarded.o \
	src/http/api.o \
	src/http/api_query.o \
	src/http/api_session.o \
	src/http/api_jobs.o \
	src/http/api_exports.o \
	src/http/api_events.o \
	src/http/api_admin.o \
	src/http/assets.o
OBJS = $(PG_OBJS) $(RUNNER_OBJS) $(ENGINE_OBJS) $(HTTP_OBJS)

# The scripts of the version under way are made from parts, each folder's
# in the order of their names (sql/README.md): the install script from
# the catalog, sql/schema/, then every function, trigger, view and
# privilege, sql/functions/; the upgrade from the last release from the
# changes to the catalog since, sql/upgrade/$(UPGRADE)/, then the same
# sql/functions/, so that each function is written once.  At a release
# both are built once more, committed and frozen: the upgrade moves to
# DATA and its folder goes.
PREVIOUS = 0.5.0
UPGRADE = $(PREVIOUS)--$(EXTVERSION)
DATA_built = sql/$(EXTENSION)--$(EXTVERSION).sql sql/$(EXTENSION)--$(UPGRADE).sql
# the upgrade path from every earlier release; their install scripts are
# in the repository's history (test/e2e/upgrade.sh installs 0.1.0 from it)
DATA = sql/$(EXTENSION)--0.1.0--0.2.0.sql sql/$(EXTENSION)--0.2.0--0.3.0.sql \
	sql/$(EXTENSION)--0.3.0--0.4.0.sql sql/$(EXTENSION)--0.4.0--0.5.0.sql
EXTRA_CLEAN = results regression.diffs regression.out output_iso \
	$(addsuffix .tmp,$(DATA_built)) \
	$(WORKER_OBJS) $(WORKER_PROGRAM) \
	test/unit/obj $(UNIT_TESTS) test/engine/fetch \
	src/http/assets.c

PKG_LIBS = libcurl openssl libxml-2.0
HTTP_PKG_LIBS = libmicrohttpd libpq
PG_CPPFLAGS = -I$(srcdir)/src -DREMORA_VERSION='"$(EXTVERSION)"' $(shell pkg-config --cflags $(PKG_LIBS) $(HTTP_PKG_LIBS))
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers
SHLIB_LINK = $(shell pkg-config --libs $(PKG_LIBS) $(HTTP_PKG_LIBS)) -lpthread

# pg_regress finds test/regress/sql/<name>.sql and ./expected/<name>.out
REGRESS = submit protocol commit_many commit_verdict security coordination retention views \
	source_grants hardening export worker_privileges role_limits fair_claim rate_limits events \
	time_slices credentials mirrors dry_run retry metrics
REGRESS_OPTS = --inputdir=test/regress --load-extension=remora
# pg_isolation_regress finds test/isolation/specs/<name>.spec and, as
# ./expected/ holds no <name>.out (it looks there first),
# test/isolation/expected/<name>.out: each suite's outputs in one place
ISOLATION = claim-race claim-order claim-turns fair-claim lease-limit cancel-commit stale-token \
	repeat-commit idempotent-submit renew-reconcile user-locks lease-loss \
	export-cancel export-replace export-keys commit-many queue-limit \
	events-notify webhook-claim webhook-turns
ISOLATION_OPTS = --inputdir=test/isolation --outputdir=. --load-extension=remora

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# A script depends on its folder as well, so that a part removed or
# renamed makes it again.
SCHEMA_PARTS = $(sort $(wildcard $(srcdir)/sql/schema/*.sql))
FUNCTION_PARTS = $(sort $(wildcard $(srcdir)/sql/functions/*.sql))
UPGRADE_PARTS = $(sort $(wildcard $(srcdir)/sql/upgrade/$(UPGRADE)/*.sql))
sql/$(EXTENSION)--$(EXTVERSION).sql: $(SCHEMA_PARTS) $(FUNCTION_PARTS) \
	$(srcdir)/sql/schema $(srcdir)/sql/functions
sql/$(EXTENSION)--$(UPGRADE).sql: $(UPGRADE_PARTS) $(FUNCTION_PARTS) \
	$(srcdir)/sql/upgrade/$(UPGRADE) $(srcdir)/sql/functions
$(DATA_built):
	@test -n "$(filter %.sql,$^)" || { echo "no parts for $@" >&2; exit 1; }
	cat $(filter %.sql,$^) >$@.tmp
	mv $@.tmp $@

# PGXS knows no header dependencies: an object built against an older
# struct layout would link and corrupt memory.  Every object depends on
# the headers of the subsystems it may include.
$(PG_OBJS): $(wildcard src/pg/*.h src/runner/*.h src/engine/*.h src/engine/*/*.h src/http/*.h)
$(RUNNER_OBJS): $(wildcard src/runner/*.h src/engine/*.h src/engine/*/*.h)
$(ENGINE_OBJS): $(wildcard src/engine/*.h src/engine/*/*.h)
$(HTTP_OBJS): $(wildcard src/http/*.h src/engine/*.h src/engine/*/*.h)

# remora-worker, the external worker (src/worker): the engine plus libpq,
# no PostgreSQL server code; installed into PostgreSQL's bindir.  PGXS's
# PROGRAM cannot go with MODULE_big, hence a rule and an install hook.
WORKER_OBJS = src/worker/main.o src/worker/log.o src/worker/conn.o \
	src/worker/settings.o src/worker/pq_host.o
WORKER_PROGRAM = src/worker/remora-worker
$(WORKER_OBJS): $(wildcard src/worker/*.h src/runner/*.h src/engine/*.h src/engine/*/*.h)
$(WORKER_OBJS): CPPFLAGS += -I$(shell $(PG_CONFIG) --includedir)
$(WORKER_PROGRAM): $(WORKER_OBJS) $(RUNNER_OBJS) $(ENGINE_OBJS)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ \
		$(shell pkg-config --libs $(PKG_LIBS) libpq)
all: $(WORKER_PROGRAM)
install: install-worker
.PHONY: install-worker
install-worker: $(WORKER_PROGRAM)
	$(MKDIR_P) '$(DESTDIR)$(bindir)'
	$(INSTALL_PROGRAM) $(WORKER_PROGRAM) '$(DESTDIR)$(bindir)/remora-worker'
uninstall: uninstall-worker
.PHONY: uninstall-worker
uninstall-worker:
	rm -f '$(DESTDIR)$(bindir)/remora-worker'

# the web client, compiled into the library (src/http/embed.sh)
WEB_FILES = $(sort $(wildcard $(srcdir)/web/*.html $(srcdir)/web/*.js \
	$(srcdir)/web/*.css $(srcdir)/web/*.svg $(srcdir)/web/api/*.json))
src/http/assets.c: $(WEB_FILES) src/http/embed.sh
	sh src/http/embed.sh $@ $(WEB_FILES)

# Engine unit tests: plain C, no PostgreSQL, built with the sanitizers.
UNIT_CFLAGS = -g -O1 -Wall -Wextra -Werror -fsanitize=address,undefined \
	-fno-omit-frame-pointer -I$(srcdir)/src \
	$(shell pkg-config --cflags $(PKG_LIBS))
UNIT_LIBS = $(shell pkg-config --libs $(PKG_LIBS))
ENGINE_UNIT_TESTS = test/unit/source_uri_test test/unit/sigv4_vectors_test \
	test/unit/sigv4_rules_test test/unit/s3xml_documents_test \
	test/unit/s3xml_hostile_test test/unit/engine_s3_test \
	test/unit/engine_egress_test test/unit/engine_lookups_test \
	test/unit/engine_export_test test/unit/json_test test/unit/ranges_test \
	test/unit/reuse_resume_test test/unit/reuse_zombie_test \
	test/unit/adapt_test test/unit/partsize_test \
	test/unit/subranges_test test/unit/parts_memory_test \
	test/unit/set_manifest_test test/unit/creds_test
UNIT_TESTS = $(ENGINE_UNIT_TESTS) test/unit/http_test \
	test/unit/runner_codec_test test/unit/runner_test
ENGINE_SRCS = $(ENGINE_OBJS:.o=.c)

# The engine's objects once more, with the sanitizers, in an archive: each
# test links what it uses of the same list the module is built from.
UNIT_OBJS = $(patsubst src/engine/%.o,test/unit/obj/%.o,$(ENGINE_OBJS))
UNIT_LIB = test/unit/obj/libengine.a

test/unit/obj/%.o: src/engine/%.c $(wildcard src/engine/*.h src/engine/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(UNIT_CFLAGS) -c -o $@ $<

$(UNIT_LIB): $(UNIT_OBJS)
	rm -f $@
	$(AR) rcs $@ $^

$(ENGINE_UNIT_TESTS): %: %.c test/unit/unit.h test/unit/wait.h $(UNIT_LIB)
	$(CC) $(UNIT_CFLAGS) -o $@ $(filter %.c,$^) $(UNIT_LIB) $(UNIT_LIBS)

# fixtures that more than one test program includes or links
test/unit/sigv4_vectors_test test/unit/sigv4_rules_test: \
	test/unit/sigv4_fixtures.h
test/unit/s3xml_documents_test test/unit/s3xml_hostile_test: \
	test/unit/s3xml_fixtures.h
test/unit/engine_s3_test test/unit/engine_lookups_test \
		test/unit/engine_export_test test/unit/reuse_resume_test \
		test/unit/reuse_zombie_test test/unit/set_manifest_test: \
		test/unit/engine_fixtures.c \
		test/unit/engine_fixtures.h
test/unit/reuse_resume_test test/unit/reuse_zombie_test: \
	test/unit/reuse_fixtures.c test/unit/reuse_fixtures.h

# the HTTP server's threads, without PostgreSQL (src/http)
test/unit/http_test: test/unit/http_test.c $(HTTP_OBJS:.o=.c) \
		$(wildcard src/http/*.h) $(UNIT_LIB)
	$(CC) $(UNIT_CFLAGS) -Wno-unused-parameter $(shell pkg-config --cflags $(HTTP_PKG_LIBS)) \
		-o $@ $(filter %.c,$^) $(UNIT_LIB) $(UNIT_LIBS) \
		$(shell pkg-config --libs $(HTTP_PKG_LIBS)) -lpthread

# the runner's codec, and its state machine over a host of the test's own
# (src/runner), without PostgreSQL
test/unit/runner_codec_test: test/unit/runner_codec_test.c test/unit/unit.h test/unit/wait.h \
		src/runner/decode.c src/runner/encode.c src/runner/codec.h $(UNIT_LIB)
	$(CC) $(UNIT_CFLAGS) -o $@ $(filter %.c,$^) $(UNIT_LIB) $(UNIT_LIBS)
RUNNER_SRCS = $(RUNNER_OBJS:.o=.c)
test/unit/runner_test: test/unit/runner_test.c test/unit/runner_fixtures.h \
		test/unit/unit.h test/unit/wait.h $(RUNNER_SRCS) $(wildcard src/runner/*.h) \
		test/unit/engine_fixtures.c test/unit/engine_fixtures.h $(UNIT_LIB)
	$(CC) $(UNIT_CFLAGS) -DREMORA_VERSION='"$(EXTVERSION)"' -o $@ $(filter %.c,$^) $(UNIT_LIB) $(UNIT_LIBS)

# the engine driver for end-to-end tests and benchmarks
test/engine/fetch: test/engine/fetch.c $(ENGINE_SRCS)
	$(CC) -O2 -g -Wall -Wextra -Werror -I$(srcdir)/src \
		$(shell pkg-config --cflags $(PKG_LIBS)) -o $@ $^ $(UNIT_LIBS)

# the engine's sources, for a script that builds them its own way
# (test/fuzz/run.sh)
.PHONY: print-engine-srcs
print-engine-srcs:
	@echo $(ENGINE_SRCS)

.PHONY: unit-test
unit-test: $(UNIT_TESTS)
	@for t in $(UNIT_TESTS); do ./$$t || exit 1; done

# make deb: the Debian package postgresql-15-remora_$(EXTVERSION)_amd64.deb
# (debian/: PostgreSQL's packaging helpers, pg_buildext), built by
# dpkg-buildpackage in a copy of the checkout's files under DEB_BUILD_DIR,
# outside the tree, where the .deb is left.  debian/changelog's version
# is the extension's.
DEB_BUILD_DIR ?= /tmp/remora-deb
DEB_FILE = $(DEB_BUILD_DIR)/postgresql-15-$(EXTENSION)_$(EXTVERSION)_$(shell dpkg --print-architecture).deb
.PHONY: deb
deb:
	@v=$$(dpkg-parsechangelog -l $(srcdir)/debian/changelog -S Version) && \
		test "$$v" = "$(EXTVERSION)" || \
		{ echo "debian/changelog says $$v, the extension is $(EXTVERSION)" >&2; exit 1; }
	@git -C $(srcdir) rev-parse --git-dir >/dev/null 2>&1 || \
		{ echo "make deb copies the files of a git checkout: none here" >&2; exit 1; }
	rm -rf '$(DEB_BUILD_DIR)/$(EXTENSION)-$(EXTVERSION)'
	mkdir -p '$(DEB_BUILD_DIR)/$(EXTENSION)-$(EXTVERSION)'
	cd $(srcdir) && git ls-files -z --cached --others --exclude-standard | \
		xargs -0 sh -c 'for f; do [ -f "$$f" ] && printf "%s\0" "$$f"; done' sh | \
		tar --null -T - -cf - | tar -xf - -C '$(DEB_BUILD_DIR)/$(EXTENSION)-$(EXTVERSION)'
	cd '$(DEB_BUILD_DIR)/$(EXTENSION)-$(EXTVERSION)' && \
		dpkg-buildpackage -b -us -uc -J2 >'$(DEB_BUILD_DIR)/build.log' 2>&1 || \
		{ tail -40 '$(DEB_BUILD_DIR)/build.log' >&2; exit 1; }
	@echo '$(DEB_FILE)'
