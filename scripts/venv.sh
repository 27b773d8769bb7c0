#!/usr/bin/env bash
# Prints the path of the project's virtual environment, creating it first if needed.
#
# The venv lives outside the clone (torch with its CUDA libraries is several GB), keyed by a
# hash of requirements.txt, so every clone and CI run with the same pins reuses it and a change
# of pins makes a new one. FOO_RS_VENV_ROOT moves it (default ~/.cache/foo_rs).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
req="$here/requirements.txt"
root="${FOO_RS_VENV_ROOT:-$HOME/.cache/foo_rs}"
key="$(sha256sum "$req" | cut -c1-16)"
venv="$root/venv-$key"
mkdir -p "$root"
exec 9>"$root/.lock-$key"
flock 9
if [ ! -f "$venv/.complete" ]; then
  python="${PYTHON:-python3}"
  echo "foo_rs: creating $venv (torch is a large download; later runs reuse it)" >&2
  rm -rf "$venv"
  "$python" -m venv "$venv" >&2
  "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
  "$venv/bin/python" -m pip install --quiet -r "$req" >&2
  touch "$venv/.complete"
fi
echo "$venv"
