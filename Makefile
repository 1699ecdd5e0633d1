# hak — one plain Makefile. Two build flavours share the rules:
#   build/rel   optimised binaries (make all, make install, make bench, make demo)
#   build/asan  ASan+UBSan binaries used by make check
# Targets: all check demo install deb rpm fuzz bench deps format clean

PREFIX    ?= /usr/local
DESTDIR   ?=
# The Debian package puts the units in /lib/systemd/system (bookworm's place for packages).
UNITDIR   ?= $(PREFIX)/lib/systemd/system
COMPLETIONDIR ?= $(PREFIX)/share/bash-completion/completions
OCFDIR    ?= /usr/lib/ocf/resource.d/hak
BUILD     ?= build/rel
SAN       ?= 0
CC        ?= gcc

PKGS      := liburing openssl jansson libnl-3.0 libnl-genl-3.0 libnl-route-3.0 libsystemd
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null)
NBD_LIBS     := $(shell pkg-config --libs libnbd 2>/dev/null)

WARN      := -Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wwrite-strings -Wstrict-prototypes \
             -Wmissing-prototypes -Wformat=2 -Wno-format-nonliteral
CFLAGS    ?= -O2 -g
ifeq ($(SAN),1)
CFLAGS    := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
LDFLAGS   += -fsanitize=address,undefined
endif
# Includes name their folder: "lib/buf.h", "repl/ship.h" (daemon/), <hak/wire.h> (include/).
INCLUDES  := -I. -Idaemon -Iinclude
# CPPFLAGS: the packages' hardening (-D_FORTIFY_SOURCE) comes that way.
ALL_CFLAGS := -std=gnu11 $(WARN) -D_GNU_SOURCE $(INCLUDES) $(PKG_CFLAGS) $(CPPFLAGS) $(CFLAGS)
LIBS      := $(PKG_LIBS) -lev -lpthread -lm

# Quiet build lines ("CC daemon/repl/ship.o"); V=1 prints the full commands.
V ?= 0
ifeq ($(V),0)
Q    := @
echo_cmd = @printf '  %-6s %s\n' $(1) $(2);
else
Q    :=
echo_cmd =
endif

# lib/ (buffers, logging, clocks, error buffers, checksums, byte order, ranges, child processes,
# UNIX sockets) is shared by hakd, hakctl, hak-attach and the tests: libhak.a. Every daemon module
# except main goes into libhakd.a, which hakd, hakctl and the unit tests link.
LIB_SRC    := $(wildcard lib/*.c)
LIB_OBJ    := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRC))
LIBHAK     := $(BUILD)/libhak.a
DAEMON_SRC := $(filter-out daemon/main.c,$(sort $(shell find daemon -name '*.c')))
DAEMON_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(DAEMON_SRC))
LIBHAKD    := $(BUILD)/libhakd.a
# The RDMA transport needs rdma-core (librdmacm, libibverbs); without it the build leaves it out
# and a volume with 'transport rdma' is a configuration error.
RDMA_PKGS := librdmacm libibverbs
ifeq ($(shell pkg-config --exists $(RDMA_PKGS) && echo yes),yes)
ALL_CFLAGS += -DHAK_HAVE_RDMA
LIBS       += $(shell pkg-config --libs $(RDMA_PKGS))
else
DAEMON_SRC := $(filter-out daemon/transport/rdma.c,$(DAEMON_SRC))
DAEMON_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(DAEMON_SRC))
ifeq ($(MAKELEVEL),0)
$(info RDMA transport left out (librdmacm/libibverbs not found))
endif
endif

UNIT_SRC   := $(wildcard tests/unit/test_*.c)
UNIT_BIN   := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(UNIT_SRC))
TOOL_SRC   := $(wildcard tests/tools/*.c)
TOOL_BIN   := $(patsubst tests/tools/%.c,$(BUILD)/tests/tools/%,$(TOOL_SRC))

BINS := $(BUILD)/hakd $(BUILD)/hakctl $(BUILD)/hak-attach

.PHONY: all bins check check-kernel lint unit integration demo install deb rpm fuzz fuzz-replay \
	bench deps format clean

all: bins

bins: $(BINS) $(TOOL_BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(call echo_cmd,CC,$@)$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(LIBHAK): $(LIB_OBJ)
	@rm -f $@
	$(call echo_cmd,AR,$@)ar rcs $@ $^

$(LIBHAKD): $(DAEMON_OBJ)
	@rm -f $@
	$(call echo_cmd,AR,$@)ar rcs $@ $^

$(BUILD)/hakd: $(BUILD)/daemon/main.o $(LIBHAKD) $(LIBHAK)
	$(call echo_cmd,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

CLI_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard cli/*.c))
$(BUILD)/hakctl: $(CLI_OBJ) $(LIBHAKD) $(LIBHAK)
	$(call echo_cmd,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

# hakctl's modules but its main, for the unit tests of their pure parts (an archive: a test
# pulls in only what it calls).
LIBHAKCLI := $(BUILD)/libhakcli.a
$(LIBHAKCLI): $(filter-out $(BUILD)/cli/hakctl.o,$(CLI_OBJ))
	@rm -f $@
	$(call echo_cmd,AR,$@)ar rcs $@ $^

SHIM_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard kmod-shim/*.c))
$(BUILD)/hak-attach: $(SHIM_OBJ) $(LIBHAK)
	$(call echo_cmd,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

# Helpers only the unit tests link (tests/unit/support/: the in-memory transport), also an
# archive: a test pulls in only what it calls.
UNIT_SUPPORT_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard tests/unit/support/*.c))
LIBHAKTEST := $(BUILD)/libhaktest.a
$(LIBHAKTEST): $(UNIT_SUPPORT_OBJ)
	@rm -f $@
	$(call echo_cmd,AR,$@)ar rcs $@ $^

# The shim's objects come before the archives: they call into libhak too (errbuf).
$(BUILD)/tests/unit/%: tests/unit/%.c $(filter-out $(BUILD)/kmod-shim/main.o,$(SHIM_OBJ)) $(LIBHAKTEST) $(LIBHAKCLI) $(LIBHAKD) $(LIBHAK)
	@mkdir -p $(dir $@)
	$(call echo_cmd,CCLD,$@)$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) -Ikmod-shim -Icli -Itests/unit -o $@ $^ $(LDFLAGS) $(CHECK_LIBS) $(LIBS)

$(BUILD)/tests/tools/%: tests/tools/%.c $(LIBHAKD) $(LIBHAK)
	@mkdir -p $(dir $@)
	$(call echo_cmd,CCLD,$@)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDFLAGS) $(NBD_LIBS) $(LIBS)

-include $(LIB_OBJ:.o=.d) $(DAEMON_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(SHIM_OBJ:.o=.d) $(BUILD)/daemon/main.d \
	$(UNIT_SUPPORT_OBJ:.o=.d)

# ---- tests -------------------------------------------------------------------------------
# make check: install missing packages, build the sanitizer flavour, replay fuzz seeds, run unit
# and integration tests. The summary line at the end is "N passed, N failed, N skipped".
check: deps
	$(MAKE) lint
	$(MAKE) BUILD=build/asan SAN=1 bins unit-bins
	$(MAKE) fuzz-build
	HAK_BUILD=build/asan tests/run.sh $(TESTS)

unit-bins: $(UNIT_BIN)

unit: deps
	$(MAKE) BUILD=build/asan SAN=1 bins unit-bins
	HAK_BUILD=build/asan tests/run.sh unit

integration: deps
	$(MAKE) BUILD=build/asan SAN=1 bins
	HAK_BUILD=build/asan tests/run.sh integration

# make check-kernel: only the tests that need a stock Debian kernel (booted in QEMU: the nbd, tls
# and rdma_rxe modules this machine's kernel may lack), tests/guest/k_*.sh. make check runs them
# too, as t_kernel.
check-kernel: deps
	$(MAKE) BUILD=build/asan SAN=1 bins
	HAK_BUILD=build/asan tests/run.sh t_kernel

deps:
	@scripts/deps.sh

# ---- fuzzing (clang + libFuzzer) ---------------------------------------------------------
FUZZ_SRC  := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN  := $(patsubst tests/fuzz/%.c,build/fuzz/%,$(FUZZ_SRC))
# The in-memory transport plays the network for fuzz_peerauth (RDMA's verbs are not fuzzed).
FUZZ_OBJ    := $(patsubst %.c,build/fuzz/obj/%.o,$(LIB_SRC) \
                 $(filter-out daemon/transport/rdma.c,$(DAEMON_SRC)) \
                 tests/unit/support/memtransport.c)
FUZZ_BASE   := -std=gnu11 -g -O1 -D_GNU_SOURCE -DHAK_FUZZ $(INCLUDES) $(PKG_CFLAGS) \
               -fno-sanitize-recover=undefined
# The daemon's sources are compiled once for all harnesses (instrumented, without libFuzzer's
# main); only the harness itself links with -fsanitize=fuzzer.
FUZZ_CFLAGS := $(FUZZ_BASE) -fsanitize=fuzzer,address,undefined

fuzz-build: $(FUZZ_BIN)

build/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(call echo_cmd,CLANG,$@)clang $(FUZZ_BASE) -fsanitize=fuzzer-no-link,address,undefined -MMD -MP -c -o $@ $<

build/fuzz/%: tests/fuzz/%.c $(FUZZ_OBJ)
	@mkdir -p $(dir $@)
	$(call echo_cmd,CLANG,$@)clang $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_OBJ) $(LIBS)

# The objects are kept: without this make deletes them as intermediates and every fuzz-build
# compiles the whole daemon again.
.SECONDARY: $(FUZZ_OBJ)

-include $(FUZZ_OBJ:.o=.d)

# make fuzz: build the harnesses and run each for FUZZ_TIME seconds on a scratch corpus.
FUZZ_TIME ?= 60
fuzz: deps fuzz-build
	@for f in $(FUZZ_BIN); do n=$$(basename $$f); mkdir -p tests/fuzz/corpus-run/$$n; \
	  echo "fuzzing $$n for $(FUZZ_TIME)s"; \
	  $$f -max_total_time=$(FUZZ_TIME) tests/fuzz/corpus-run/$$n tests/fuzz/corpus/$$n || exit 1; done

# ---- demo, bench, install ----------------------------------------------------------------
demo: deps bins
	scripts/demo.sh

bench: deps bins
	bench/nbd.sh
	bench/replication.sh
	bench/failover.sh

# Every unit in packaging/ (hakd's, the witness's) and the Pacemaker agent when it is there. The
# test tools are not installed, so only the three binaries are built for it.
install: $(BINS)
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/share/man/man8 \
		$(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)/etc/hak $(DESTDIR)$(UNITDIR) \
		$(DESTDIR)$(COMPLETIONDIR)
	install -m 0755 $(BUILD)/hakd $(BUILD)/hakctl $(BUILD)/hak-attach $(DESTDIR)$(PREFIX)/sbin/
	install -m 0644 docs/*.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	install -m 0644 docs/*.5 $(DESTDIR)$(PREFIX)/share/man/man5/
	install -m 0644 etc/hak.conf $(DESTDIR)/etc/hak/hak.conf.example
	install -m 0644 $(wildcard packaging/*.service) $(DESTDIR)$(UNITDIR)/
	install -m 0644 packaging/completion/hakctl $(DESTDIR)$(COMPLETIONDIR)/hakctl
	# Pacemaker looks for OCF agents under /usr/lib/ocf whatever the PREFIX (OCFDIR).
	install -D -m 0755 packaging/ocf/hak $(DESTDIR)$(OCFDIR)/hak
	install -m 0755 packaging/ocf/hak-crm-fence-peer packaging/ocf/hak-crm-unfence-peer \
		$(DESTDIR)$(PREFIX)/sbin/

# ---- packages ----------------------------------------------------------------------------
# Both build from a copy of the source tree (the files git knows, committed or not), never
# from this one: make deb puts packaging/debian at the copy's top as debian/ and runs
# dpkg-buildpackage there (the release build, without the test suite), make rpm makes the
# tarball rpmbuild wants. Results: build/deb/hak_VERSION_ARCH.deb, build/rpm/RPMS/ARCH/.
VERSION := $(shell sed -n 's/^\#define HAK_VERSION "\(.*\)"/\1/p' include/hak/version.h)
DEB_SRC := build/deb/hak-$(VERSION)
RPM_TOP := $(CURDIR)/build/rpm
# copy_tree DIR: a clean copy of the source files in DIR: those git knows, committed or not,
# or, outside a git checkout, every file but build/.
copy_tree = rm -rf $(1) && mkdir -p $(1) && \
	{ git ls-files -co --exclude-standard -z 2>/dev/null || \
	  find . -path ./build -prune -o -path ./.git -prune -o -type f -printf '%P\0'; } | \
	grep -zv '^build/' | tar --null --ignore-failed-read -T - -cf - | tar -C $(1) -xf -

deb:
	@v=$$(dpkg-parsechangelog -l packaging/debian/changelog -S Version); \
	  [ "$$v" = "$(VERSION)" ] || { echo "deb: packaging/debian/changelog is at $$v but" \
	  "include/hak/version.h says $(VERSION); add a changelog entry." >&2; exit 1; }
	rm -rf build/deb
	$(call copy_tree,$(DEB_SRC))
	cp -r packaging/debian $(DEB_SRC)/debian
	cd $(DEB_SRC) && DEB_BUILD_OPTIONS="nocheck parallel=2" dpkg-buildpackage -us -uc -b
	@ls build/deb/*.deb

# Debian's rpm cannot see the BuildRequires, which name Fedora's packages: --nodeps.
rpm:
	rm -rf $(RPM_TOP)
	mkdir -p $(RPM_TOP)/SOURCES
	$(call copy_tree,$(RPM_TOP)/hak-$(VERSION))
	tar -C $(RPM_TOP) -czf $(RPM_TOP)/SOURCES/hak-$(VERSION).tar.gz hak-$(VERSION)
	rm -rf $(RPM_TOP)/hak-$(VERSION)
	rpmbuild -bb --nodeps --define "_topdir $(RPM_TOP)" --define "hak_version $(VERSION)" \
		packaging/rpm/hak.spec
	@ls $(RPM_TOP)/RPMS/*/*.rpm

FORMAT_SRC = $(sort $(shell find lib daemon cli kmod-shim include tests/unit tests/fuzz tests/tools \
	-name '*.[ch]'))
format:
	clang-format -i $(FORMAT_SRC)

# make lint (part of make check): the one-way doors between the source folders (no include
# cycle, lib/ includes only lib/, private headers stay home) and the formatting.
lint:
	@scripts/check-includes.sh
	@bad=$$(for f in $(FORMAT_SRC); do clang-format --dry-run -Werror $$f >/dev/null 2>&1 || \
	  echo $$f; done); if [ -n "$$bad" ]; then \
	  echo "lint: not formatted per .clang-format (make format fixes it):" $$bad >&2; exit 1; fi
	@echo "lint: $(words $(FORMAT_SRC)) source files follow .clang-format."

clean:
	rm -rf build
