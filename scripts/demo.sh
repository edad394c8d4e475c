#!/usr/bin/env bash
# The main job: build the in-browser search demo from the bundled English + Chinese sample
# corpus (RESTRICTED samples excluded and checked for) and serve it on 127.0.0.1. The page is
# the <ragspine-search> element (results link to the rendered pages; "/", Ctrl-K, ArrowDown/
# Enter; ?q= follows the box; see docs/browser.md) with the drop zone and reranker panel. It
# searches hybrid (BM25 + all-MiniLM-L6-v2 on onnxruntime-web); RAGSPINE_DEMO_EMBEDDINGS=none
# builds a BM25-only site without the [embed-onnx] extra.
#   bash scripts/demo.sh [--port N]        (the command-line search demo: ragspine-lite demo)
EMBEDDINGS=${RAGSPINE_DEMO_EMBEDDINGS:-minilm}
if [ "$EMBEDDINGS" != none ]; then
  RAGSPINE_EXTRAS=${RAGSPINE_EXTRAS:-[embed-onnx]}
fi
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
if [ ! -d node_modules/pyodide ] || [ ! -d node_modules/onnxruntime-web ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
ragspine-lite build-site ragspine_lite/samples --out site --canary ZEPHYRCANARY \
  --title "ragspine_lite demo" --demo --embeddings "$EMBEDDINGS"
exec python build_wasm.py serve site --quiet "$@"
