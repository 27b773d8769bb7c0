#!/usr/bin/env bash
# Builds the extension of *this* checkout into python/foo_rs/_C*.so without installing it, so
# several working trees can share one venv: run their tests with PYTHONPATH=python.
# (`make build` = `maturin develop --release` installs the main checkout instead.)
set -euo pipefail
cd "$(dirname "$0")/.."
venv="$(scripts/venv.sh)"
export FOO_RS_PYTHON="$venv/bin/python"
# Cargo names the cdylib alike for every checkout, and a fresh build of this one does not copy
# it out of deps/ again: after another checkout built into the same target dir, this one would
# get that checkout's library. So force a relink whenever the last build came from elsewhere.
target="${CARGO_TARGET_DIR:-target}"
stamp="$target/release/.dev_build_source"
if [ "$(cat "$stamp" 2>/dev/null)" != "$(pwd)" ]; then touch src/lib.rs; fi
cargo build --release --features python --lib
mkdir -p "$target/release" && pwd > "$stamp"
suffix="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
cp "$target/release/libfoo_rs.so" "python/foo_rs/_C$suffix"
echo "built python/foo_rs/_C$suffix (use PYTHONPATH=$(pwd)/python)"
