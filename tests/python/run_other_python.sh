#!/usr/bin/env bash
# Runs the Python suite with the other python3 on PATH (not Debian's; no
# numpy or torch there): the package itself must work in any interpreter.
# pytest comes from Debian's pure-Python packages, put on that
# interpreter's path for the run only. Modules that need numpy/torch skip;
# the release artifacts and several-user tests already ran with Debian's.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=$(command -v python3 || true)
if [ -z "$py" ] || [ "$(readlink -f "$py")" = "$(readlink -f /usr/bin/python3)" ]; then
  echo "run_other_python: no python3 on PATH besides Debian's; skipped"
  exit 0
fi
shim=$(mktemp -d)
trap 'rm -rf "$shim"' EXIT
for m in pytest _pytest pluggy iniconfig packaging py.py; do
  [ -e "/usr/lib/python3/dist-packages/$m" ] && ln -s "/usr/lib/python3/dist-packages/$m" "$shim/"
done
echo "run_other_python: $("$py" --version) ($py)"
PYTHONPATH="$shim:client/python" "$py" -m pytest -q -p no:cacheprovider -rs \
  --ignore=tests/python/test_dist.py --ignore=tests/python/test_service.py \
  --ignore=tests/python/test_hostile.py --ignore=tests/python/test_old_host.py \
  --ignore=tests/python/test_image.py \
  tests/python
