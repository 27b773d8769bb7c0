# foo_rs: every target sets up what it needs (venv with the pinned torch, the extension).
#   make demo   - train a small model on the foo device next to the same run on CPU
#   make test   - Rust unit tests + the pytest suite (what .ci/run runs)
#   make bench  - cargo bench + benches/compare_cpu.py (foo/CPU ratios)
#   make bench-models - whole models (torchvision, transformers, LSTM, U-Net) on foo vs CPU; installs the
#                 optional requirements-bench.txt first. BENCH_MODELS_ARGS="--quick" for a smoke run
#   make lint   - cargo fmt --check, clippy -D warnings, ruff, stubtest of foo_rs._C against _C.pyi
#   make fuzz   - the differential fuzzer (foo vs CPU) for FUZZ_EXAMPLES examples per op family
#   make conformance - regenerate the OpInfo/ModuleInfo baselines under tests/conformance/
SHELL := /bin/bash
VENV := $(shell scripts/venv.sh)
PY := $(VENV)/bin/python
export VIRTUAL_ENV := $(VENV)
export PATH := $(VENV)/bin:$(PATH)
export FOO_RS_PYTHON := $(PY)

.PHONY: build demo test test-rust test-python bench bench-models lint info fuzz conformance

build:
	maturin develop --release --quiet

demo: build
	$(PY) -m foo_rs demo

info: build
	$(PY) -m foo_rs info

test-rust:
	cargo test --all-targets --quiet

test-python: build
	$(PY) -m pytest -q tests

test: test-rust test-python

bench: build
	cargo bench --bench kernels
	$(PY) benches/compare_cpu.py

# The constraint keeps the pinned torch (and numpy, ...) of requirements.txt in place; the venv's key
# (a hash of requirements.txt) does not change.
BENCH_MODELS_ARGS ?=
bench-models: build
	$(PY) -m pip install --quiet -r requirements-bench.txt -c requirements.txt
	$(PY) benches/models.py $(BENCH_MODELS_ARGS)

lint: build
	cargo fmt --check
	cargo clippy --all-targets -- -D warnings
	cargo clippy --all-targets --features python -- -D warnings
	$(VENV)/bin/ruff check python tests benches
	$(PY) -m pip install --quiet -r requirements-lint.txt -c requirements.txt
	$(PY) -m mypy.stubtest foo_rs._C

FUZZ_EXAMPLES ?= 2000
fuzz: build
	FOO_RS_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q -p no:cacheprovider tests/test_fuzz.py

conformance: build
	$(PY) tests/conformance.py --write
	$(PY) tests/conformance_checks_run.py --write
	$(PY) tests/module_conformance.py --write
