# Sourced by the scripts: a project virtualenv with ragspine-lite installed (editable).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
# Install quietly; show the log only when something fails.
if ! python -m pip install --disable-pip-version-check -e ".${RAGSPINE_EXTRAS:-}" \
    >.venv/install.log 2>&1; then
  cat .venv/install.log >&2
  echo "install of ragspine-lite${RAGSPINE_EXTRAS:-} failed (log above)" >&2
  exit 1
fi
