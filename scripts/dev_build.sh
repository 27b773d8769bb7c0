#!/usr/bin/env bash
# Builds the extension of *this* checkout into python/foo_rs/_C*.so without installing it, so
# several working trees can share one venv: run their tests with PYTHONPATH=python.
# (`make build` = `maturin develop --release` installs the main checkout instead.)
set -euo pipefail
cd "$(dirname "$0")/.."
venv="$(scripts/venv.sh)"
export FOO_RS_PYTHON="$venv/bin/python"
cargo build --release --features python --lib
suffix="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
cp "${CARGO_TARGET_DIR:-target}/release/libfoo_rs.so" "python/foo_rs/_C$suffix"
echo "built python/foo_rs/_C$suffix (use PYTHONPATH=$(pwd)/python)"
