#!/usr/bin/env bash
# The main job: build the in-browser search demo from the bundled English + Chinese sample
# corpus (RESTRICTED samples excluded and checked for) and serve it on 127.0.0.1.
#   bash scripts/demo.sh [--port N]        (the command-line search demo: ragspine-lite demo)
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
if [ ! -d node_modules/pyodide ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
if ! python -c "import build" 2>/dev/null; then
  python -m pip install -q --disable-pip-version-check build >/dev/null
fi
ragspine-lite build-site ragspine_lite/samples --out site --canary ZEPHYRCANARY \
  --title "ragspine_lite demo"
exec python build_wasm.py serve site --quiet "$@"
