# Sourced by the scripts: a project virtualenv with ragspine-lite installed (editable).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
python -m pip install -q --disable-pip-version-check -e ".${RAGSPINE_EXTRAS:-}"
