# storqos: the two commands are `make demo` and `make test`; both install what they need.
#
#   make demo       build everything the demo needs and run `storqos demo` on the bundled WebSearch excerpt
#   make test       build everything, lint (rustfmt, clippy, ruff, mypy) and run all Rust and Python tests
#   make bench      run the benchmarks (slow; results go to BENCHMARKS.md by hand)
#   make reproduce  regenerate every examples/ experiment and docs/results/
#   make etcd       a local etcd in the foreground, to try a cluster of gateways (docs/cluster.md)
#   make nbd-client libnbd's Python bindings for `storqos replay` / `validate` (make test does it too)
#
# Everything Python lives in .venv (created here); Rust builds into target/. The extension
# (maturin) and the Rust tests build in the same `release` profile with the same features,
# so the dependency graph is compiled once.

PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
DEPS   := $(VENV)/.deps-installed
TDEPS  := $(VENV)/.test-deps-installed
CARGO  ?= cargo
export VIRTUAL_ENV := $(abspath $(VENV))
export PATH := $(abspath $(VENV))/bin:$(PATH)
# pip installs only uv into .venv; uv installs everything else (the dependencies, the
# test extra, maturin's wheel): 21 s and 25 CPU-seconds where pip took 38 and 37, with
# CPU that the Rust build beside it needs. uv compiles the bytecode as pip does: where
# PYTHONDONTWRITEBYTECODE is set (as on CI), every process would otherwise compile every
# module it imports (the Python tests took 227 s instead of 141). Say only what goes wrong.
export PIP_QUIET := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1
export UV_COMPILE_BYTECODE := 1
UV     := $(VENV)/bin/uv
# pip's settings on this kind of machine, under uv's names (uv does not read pip's).
ifdef PIP_CERT
export SSL_CERT_FILE ?= $(PIP_CERT)
endif
ifdef PIP_FIND_LINKS
export UV_FIND_LINKS ?= $(PIP_FIND_LINKS)
endif
ifdef PIP_DEFAULT_TIMEOUT
export UV_HTTP_TIMEOUT ?= $(PIP_DEFAULT_TIMEOUT)
endif
# PyO3's build script reruns, and pyo3 and storqos-py are rebuilt (25-30 s), whenever the
# Python it was configured with changes: maturin sets these two for its build, so every
# cargo run here sets them alike (and waits for .venv's Python to exist).
export PYO3_PYTHON := $(abspath $(VPY))
export PYO3_ENVIRONMENT_SIGNATURE := $(shell $(PYTHON) -c 'import sys; v = sys.version_info; print(f"cpython-{v[0]}.{v[1]}-{64 if sys.maxsize > 2**32 else 32}bit")' 2>/dev/null)
NEED_CARGO := command -v $(CARGO) >/dev/null || { echo "error: cargo (Rust) is required: https://rustup.rs" >&2; exit 2; }

.PHONY: etcd demo test lint lint-rust lint-python rust-tests test-rust test-python python-tests build setup test-setup system-deps nbd-client bench reproduce clean

demo: build
	$(VENV)/bin/storqos demo --out out/demo

# Two cores, three steps: one cargo build of the Rust tests, the examples and the
# extension's library, linted by clippy as it compiles (below), run while uv and
# apt-get install what is missing, then ruff and mypy; then maturin, which finds the
# extension built and only installs it, while the Rust tests run; then the Python
# tests, last and alone (the live ones measure time).
test:
	@$(MAKE) --no-print-directory -j3 --output-sync=target LINT_IN_BUILD=1 lint-rust rust-tests test-setup lint-python
	@$(MAKE) --no-print-directory -j2 --output-sync=target LINT_IN_BUILD=1 build test-rust
	@$(MAKE) --no-print-directory python-tests

# In `make test`, clippy lints the workspace's crates while they are built for the
# tests: clippy-driver is cargo's wrapper of the workspace's own crates (what `cargo
# clippy` does, with a full build instead of a check), and CLIPPY_ARGS makes its
# warnings errors. A separate `cargo clippy` would check every dependency a second time
# (about 90 crates; 54 CPU-seconds, 1 min 35 s on 2 busy cores), since a check build
# cannot reuse a release build's libraries. Every cargo run of `make test` (the build,
# nextest, maturin) has the same wrapper, so none rebuilds what another built.
CLIPPY_DRIVER := $(shell command -v clippy-driver 2>/dev/null)
ifdef LINT_IN_BUILD
ifneq ($(CLIPPY_DRIVER),)
export RUSTC_WORKSPACE_WRAPPER := $(CLIPPY_DRIVER)
export CLIPPY_ARGS := -D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
endif
endif

# rustfmt and clippy (warnings are errors), ruff over the Python, mypy over the package and the
# benchmarks.
lint: lint-rust lint-python

# rustfmt, then clippy over every target (in `make test`, clippy ran in the build).
lint-rust: | $(VPY)
	@if $(CARGO) fmt --version >/dev/null 2>&1; then \
	  $(CARGO) fmt --all --check || { echo "Rust code is not formatted: run cargo fmt (rustfmt.toml)" >&2; exit 1; }; \
	else echo "rustfmt not installed: format check not run"; fi
	@if [ -n "$(RUSTC_WORKSPACE_WRAPPER)" ]; then :; \
	elif $(CARGO) clippy --version >/dev/null 2>&1; then \
	  $(CARGO) clippy --release --workspace --all-targets -q -- -D warnings; \
	else echo "clippy not installed: Rust lint not run"; fi

lint-python: $(TDEPS)
	$(VENV)/bin/ruff check python tests benches scripts examples
	$(VPY) -m mypy python/storqos benches

# One cargo run builds the Rust tests' binaries without running them (the ones nextest
# and cargo test run: every target with `test = true`, which storqos-py's library is
# not) and the extension's library as maturin builds it (the feature pyproject.toml
# gives maturin, pyo3/extension-module, is storqos-py's own already): cargo schedules
# PyO3's chain of crates beside the rest, and maturin finds nothing left to compile.
# Under `make test` the examples and benchmarks' targets too (10 more CPU-seconds), so
# that clippy, which lints as they compile, sees every target.
RUST_TEST_TARGETS := --workspace --tests
rust-tests: | $(VPY)
	@$(NEED_CARGO)
	$(CARGO) build --release $(RUST_TEST_TARGETS) --lib $(if $(RUSTC_WORKSPACE_WRAPPER),--all-targets)

# Either runner builds what is missing first.
test-rust: test-setup
	@if $(CARGO) nextest --version >/dev/null 2>&1; then \
	  $(CARGO) nextest run --release $(RUST_TEST_TARGETS) --no-fail-fast; \
	else \
	  $(CARGO) test --release $(RUST_TEST_TARGETS); \
	fi

# The tests that measure live servers run after the others, which run on every core
# (pytest-xdist); tests/python/conftest.py says which are live.
test-python: build test-setup python-tests

# The Python tests alone, without (re)building and installing first (`make test` has).
# Four workers on two cores: many of these tests wait on subprocesses (the CLI, servers
# refusing bad settings), so two more workers fill the waits (157 s where -n auto's two
# took 176 s). `--dist loadgroup`: the tests of a module whose fixtures are costly (it
# says `xdist_group`) go to one worker, which computes them once, not once per worker.
# Then the live tests: three at a time, as each keeps under a CPU busy and most of their
# time is the rates they measure (61-71 s where one at a time took 137), but those that
# hold measured times to bounds a busy CPU would break (`alone`): last, one at a time.
python-tests:
	$(VPY) -m pytest -m "not live" -n 4 --dist loadgroup
	$(VPY) -m pytest -m "live and not alone" -n 3 --dist loadgroup
	$(VPY) -m pytest -m alone

# A one-member etcd on loopback in the foreground (Ctrl-C stops it), to try a cluster of
# gateways: `storqos serve --cluster etcd://127.0.0.1:2379/NAME ...` (docs/cluster.md).
etcd: system-deps
	etcd --data-dir out/etcd --listen-client-urls http://127.0.0.1:2379 \
	  --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380

setup: $(DEPS)

test-setup: $(DEPS) $(TDEPS) system-deps nbd-client

# libnbd's Python bindings, the NBD client of `storqos replay` (and of validate and
# calibrate's checks), come from Debian's python3-libnbd, built for Debian's CPython
# 3.11; they are linked into .venv, whose Python is a 3.11 too.
NBDPY := $(VENV)/.libnbd-linked
NBD_MODULE := /usr/lib/python3/dist-packages/nbd.py
nbd-client: $(NBDPY)
$(NBDPY): $(DEPS) | system-deps
	@test -f $(NBD_MODULE) || { echo "error: $(NBD_MODULE) missing after make system-deps (python3-libnbd)" >&2; exit 1; }
	@$(VPY) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "libnbd bindings need CPython 3.11 in .venv")'
	@mkdir -p $(VENV)/libnbd
	@ln -sf $(NBD_MODULE) /usr/lib/python3/dist-packages/libnbdmod.cpython-311-*.so $(VENV)/libnbd/
	@echo "$(abspath $(VENV))/libnbd" > "$$($(VPY) -c 'import site; print(site.getsitepackages()[0])')/libnbd.pth"
	@$(VPY) -c 'import nbd'
	@touch $@

# System packages (Debian): what pip/cargo cannot provide. python3-libnbd is the NBD
# client of `storqos replay`, validate and calibrate (linked into .venv above); the rest
# are for the tests only. Chromium renders the HTML report in the report test
# (headless); qemu-io (qemu-utils), nbdcopy and nbdinfo (libnbd-bin) and fio (its nbd
# engine) are the real NBD clients of the `storqos serve` tests; prometheus scrapes the
# gateway's metrics in its test; openssl makes the TLS tests' certificates; nbdkit and
# qemu-storage-daemon are the real QoS stacks the models are checked against; etcd
# (etcd-server) is the control plane of the cluster tests' gateways. Each entry
# is WHAT[,WHAT...]:PACKAGE, each WHAT a command or an absolute path, the package
# missing when none of them is there. What is missing comes in one apt-get run, without
# the recommended extras: on a fresh machine about 50 packages, where chromium's recommends
# (udev, printing, Mesa) made it 162.
SYSTEM_DEPS := $(NBD_MODULE):python3-libnbd chromium,chromium-browser:chromium qemu-io:qemu-utils \
	nbdcopy:libnbd-bin nbdinfo:libnbd-bin fio:fio openssl:openssl prometheus:prometheus nbdkit:nbdkit \
	qemu-storage-daemon:qemu-utils etcd:etcd-server
system-deps:
	@missing=""; for dep in $(SYSTEM_DEPS); do \
	  pkg=$${dep#*:}; found=""; \
	  for what in $$(echo "$${dep%%:*}" | tr , " "); do \
	    case $$what in /*) [ -e $$what ] ;; *) command -v $$what >/dev/null 2>&1 ;; esac && found=1; \
	  done; \
	  [ -n "$$found" ] || case " $$missing " in *" $$pkg "*) ;; *) missing="$$missing $$pkg" ;; esac; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing with apt-get:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(VPY):
	@$(NEED_CARGO)
	@$(PYTHON) -m venv --help >/dev/null 2>&1 || { \
	  echo "installing python3-venv with apt-get"; \
	  apt-get update -qq && apt-get install -y -qq python3-venv; }
	$(PYTHON) -m venv $(VENV)

# Python dependencies come from pyproject.toml (one list, read here): the run-time ones
# for the demo, the `test` extra on top for the tests.
$(UV): | $(VPY)
	$(VPY) -m pip install uv

# $(call pyproject-install,LIST,FILE): the requirements LIST names (a Python expression
# over p, pyproject.toml's tables) written to FILE, installed with uv, and the target
# touched.
define pyproject-install
	$(VPY) -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb')); print('\n'.join($(1)))" > $(2)
	$(UV) pip install -q --python $(VPY) -r $(2)
	touch $@
endef

$(DEPS): pyproject.toml | $(VPY) $(UV)
	$(call pyproject-install,p['build-system']['requires'] + p['project']['dependencies'],$(VENV)/requirements.txt)

$(TDEPS): pyproject.toml $(DEPS)
	$(call pyproject-install,p['project']['optional-dependencies']['test'],$(VENV)/requirements-test.txt)

# The compiled extension, rebuilt by cargo incrementally when the Rust changes.
build: setup
	$(VENV)/bin/maturin develop --release -q --uv

bench: build nbd-client
	$(VPY) benches/event_loop.py
	$(VPY) benches/trace_read.py
	$(VPY) benches/tenants_scale.py
	$(VPY) benches/capacity_table.py --requests 10000000
	$(CARGO) run --release -q -p storqos-core --example twolevel_rate -- 10000000 3
	$(VPY) benches/twolevel.py --requests 10000000 --repeats 3
	$(VPY) benches/advise.py
	$(VPY) benches/stacks_cost.py --repeats 5
	$(VPY) benches/cluster_scale.py --requests 10000000
	$(VPY) benches/cluster_live.py --iops 500 --seconds 40
	$(VPY) benches/sweep.py
	$(VPY) benches/side_by_side.py --policy wf2q
	$(VPY) benches/side_by_side.py --policy mclock
	$(VPY) benches/gateway.py
	$(VPY) benches/gateway_ops.py --seconds 4 --repeats 3
	$(VPY) benches/gateway_latency.py --seconds 6 --rounds 3
	$(VPY) benches/gateway_isolation.py
	$(VPY) benches/gateway_attacks.py
	$(VPY) benches/gateway_tiered.py --count 30000 --repeats 5
	@command -v tcpdump >/dev/null 2>&1 || { echo "installing tcpdump with apt-get (benches/replay_timing.py and replay_path.py measure on the wire)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tcpdump; }
	$(VPY) benches/replay_timing.py --seconds 3 --repeats 3
	$(VPY) benches/replay_path.py --rounds 2
	$(VPY) benches/at_rest_repeat.py --repeats 20
	$(VPY) benches/at_rest_repeat.py --direct --repeats 12 --pause 20
	$(VPY) benches/direct_trains.py
	$(CARGO) run --release -q -p storqos-core --example mclock_rate

# Regenerate every examples/ experiment and docs/results/*.md with numbers and plots.
reproduce: build nbd-client
	scripts/reproduce.sh

clean:
	rm -rf $(VENV) target out python/storqos/*.so
