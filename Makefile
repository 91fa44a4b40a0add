# storqos: the two commands are `make demo` and `make test`; both install what they need.
#
#   make demo       build everything and run `storqos demo` on the bundled WebSearch excerpt
#   make test       build everything and run all Rust and Python tests
#   make bench      run the benchmarks (slow; results go to BENCHMARKS.md by hand)
#   make reproduce  regenerate every examples/ experiment and docs/results/
#
# Everything Python lives in .venv (created here); Rust builds into target/.

PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
DEPS   := $(VENV)/.deps-installed
EXT    := $(VENV)/.ext-built
CARGO  ?= cargo
export VIRTUAL_ENV := $(abspath $(VENV))
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: demo test test-rust test-python build setup system-deps bench reproduce clean

demo: build
	$(VENV)/bin/storqos demo --out out/demo

test: build test-rust test-python

test-rust: setup
	@if $(CARGO) fmt --version >/dev/null 2>&1; then \
	  $(CARGO) fmt --all --check || { echo "Rust code is not formatted: run cargo fmt (rustfmt.toml)" >&2; exit 1; }; \
	else echo "rustfmt not installed: format check not run"; fi
	@if $(CARGO) nextest --version >/dev/null 2>&1; then \
	  $(CARGO) nextest run --workspace --exclude storqos-py --no-fail-fast; \
	else \
	  $(CARGO) test --workspace --exclude storqos-py; \
	fi

test-python: build
	$(VPY) -m pytest
	$(VPY) -m mypy python/storqos

setup: $(DEPS) system-deps

# System packages (Debian): only what pip/cargo cannot provide. Chromium renders the
# HTML report in the report test (headless); qemu-io (qemu-utils), nbdcopy and nbdinfo
# (libnbd-bin) and fio (its nbd engine) are the real NBD clients of the `storqos serve`
# tests.
system-deps:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  echo "installing chromium with apt-get (headless report test)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }
	@command -v qemu-io >/dev/null 2>&1 || { \
	  echo "installing qemu-utils with apt-get (qemu-io, the NBD client of the serve test)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-utils; }
	@command -v nbdcopy >/dev/null 2>&1 && command -v nbdinfo >/dev/null 2>&1 || { \
	  echo "installing libnbd-bin with apt-get (nbdcopy, nbdinfo: NBD clients of the serve tests)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libnbd-bin; }
	@command -v fio >/dev/null 2>&1 || { \
	  echo "installing fio with apt-get (its nbd engine is an NBD client of the serve tests)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio; }

$(VPY):
	@command -v $(CARGO) >/dev/null || { echo "error: cargo (Rust) is required: https://rustup.rs" >&2; exit 2; }
	@$(PYTHON) -m venv --help >/dev/null 2>&1 || { \
	  echo "installing python3-venv with apt-get"; \
	  apt-get update -qq && apt-get install -y -qq python3-venv; }
	$(PYTHON) -m venv $(VENV)

# Python dependencies come from pyproject.toml (one list, read here).
$(DEPS): pyproject.toml | $(VPY)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb')); \
	  print('\n'.join(p['build-system']['requires'] + p['project']['dependencies'] \
	  + p['project']['optional-dependencies']['test']))" > $(VENV)/requirements.txt
	$(VPY) -m pip install -q -r $(VENV)/requirements.txt
	touch $@

# The compiled extension, rebuilt by cargo incrementally when the Rust changes.
build: setup
	$(VENV)/bin/maturin develop --release -q

bench: build
	$(VPY) benches/event_loop.py
	$(VPY) benches/trace_read.py
	$(VPY) benches/capacity_table.py
	$(VPY) benches/twolevel.py
	$(VPY) benches/sweep.py
	$(VPY) benches/gateway.py
	$(CARGO) run --release -q -p storqos-core --example mclock_rate

# Regenerate every examples/ experiment and docs/results/*.md with numbers and plots.
reproduce: build
	scripts/reproduce.sh

clean:
	rm -rf $(VENV) target out python/storqos/*.so
