// The search worker's Python: Pyodide started (from a memory snapshot when there is one), the
// ragspine_lite wheel installed, and the bundle's searcher opened.

import { sha256Hex } from "./ragspine-files.mjs";
import { BundleError, describe, log } from "./ragspine-messages.mjs";

// ------------------------------------------------------------------ starting Pyodide
//
// A cold boot takes a Pyodide memory snapshot right after the wheel is unpacked and the
// runtime's pure-Python modules are imported, before any file is opened, and keeps it in the
// Cache API; a return visit restores it instead of starting Python and importing again.
// Pyodide's snapshots are experimental (`_makeSnapshot` / `_loadSnapshot`) and tied to the
// exact build, so the key covers the sha256s of the Pyodide files and the wheel, the imports
// and the browser; failing to make, store or restore one falls back to a plain boot (logged).

const SNAPSHOT_IMPORTS = "import ragspine_lite.bundle.runtime\nimport ragspine_lite.vector.browser_backend";

// Pyodide from the bundle's copy; `cached` is the boot's RuntimeCache (it keeps the snapshot).
// Returns {py, restored, key}; `key` is set when a snapshot is (or was) taken.
export async function startPyodide(manifest, bundleURL, cached, snapshot) {
  const pyodideURL = bundleURL + manifest.entry.pyodide;
  let loadPyodide;
  try {
    ({ loadPyodide } = await import(pyodideURL + "pyodide.mjs"));
  } catch (err) {
    throw new BundleError(`could not load the Pyodide runtime from ${pyodideURL}pyodide.mjs: ${describe(err).message}`);
  }
  try {
    const config = { indexURL: pyodideURL, stdout: (line) => log("info", line), stderr: (line) => log("warn", line) };
    return await startPython(loadPyodide, config, manifest, cached, snapshot);
  } catch (err) {
    throw new BundleError(`Pyodide failed to start from ${pyodideURL}: ${describe(err).message}`);
  }
}

async function snapshotKey(manifest) {
  if (!(self.crypto && crypto.subtle)) return null;
  const entry = manifest.entry;
  const files = Object.keys(manifest.files).filter((path) => path.startsWith(entry.pyodide) || path === entry.wheels.ragspine_lite);
  const parts = [SNAPSHOT_IMPORTS, navigator.userAgent, ...files.sort().map((path) => `${path} ${manifest.files[path].sha256}`)];
  return sha256Hex(new TextEncoder().encode(parts.join("\n")));
}

// Pyodide, from the stored snapshot when there is a usable one, else a plain boot (which
// takes a snapshot when `snapshot` is on and the cache works).
async function startPython(loadPyodide, config, manifest, cached, snapshot) {
  const key = snapshot && cached.stats.enabled ? await snapshotKey(manifest) : null;
  const stored = key ? await cached.readSnapshot(key) : null;
  if (stored) {
    try {
      return { py: await loadPyodide({ ...config, _loadSnapshot: stored }), restored: true, key };
    } catch (err) {
      log("warn", `the saved Python snapshot could not be restored (${describe(err).message}); starting Python afresh`);
      cached.dropSnapshot();
    }
  }
  return { py: await loadPyodide({ ...config, _makeSnapshot: Boolean(key) }), restored: false, key };
}

export function takeSnapshot(py, cached, key) {
  try {
    py.runPython(SNAPSHOT_IMPORTS);
    cached.saveSnapshot(key, py.makeMemorySnapshot());
  } catch (err) {
    log("warn", `no Python snapshot for the next visit: ${describe(err).message}`);
  }
}

// ------------------------------------------------------------------ installing the wheel

// Installs the ragspine_lite wheel's bytes: unpacked, or with micropip (`how`).
export async function installRagspine(py, manifest, bundleURL, wheel, how) {
  const { wheels } = manifest.entry;
  const wheelName = wheels.ragspine_lite.split("/").pop();
  if (how === "micropip") await installWithMicropip(py, bundleURL + wheels.micropip, wheelName, wheel);
  else installWheel(py, wheelName, wheel);
}

// The wheel is pure Python (no dependencies, no scripts): unpacking it into site-packages is
// the whole install, and skips loading micropip and its resolver on every visit.
function installWheel(py, wheelName, wheel) {
  try {
    const sitePackages = py.runPython("import sysconfig\nsysconfig.get_path('purelib')");
    py.unpackArchive(wheel, "zip", { extractDir: sitePackages });
    py.runPython("import importlib\nimportlib.invalidate_caches()");
  } catch (err) {
    throw new BundleError(`could not install ${wheelName}: ${describe(err).message}`);
  }
}

// The former install path, kept for comparison (open({install: "micropip"}); bench/browser.py).
async function installWithMicropip(py, micropipURL, wheelName, wheel) {
  const loadErrors = [];
  const loaded = await py.loadPackage(micropipURL, {
    messageCallback: () => {},
    errorCallback: (message) => loadErrors.push(message),
  });
  if (!loaded || !loaded.length) {
    throw new BundleError(`could not load micropip from ${micropipURL}: ${loadErrors.join("; ") || "nothing was loaded"}`);
  }
  py.FS.mkdirTree("/bundle/wheels");
  py.FS.writeFile(`/bundle/wheels/${wheelName}`, wheel);
  py.globals.set("_ragspine_wheel", `emfs:/bundle/wheels/${wheelName}`);
  try {
    await py.runPythonAsync("import micropip\nawait micropip.install(_ragspine_wheel, deps=False)\ndel _ragspine_wheel");
  } catch (err) {
    throw new BundleError(`could not install ${wheelName} with micropip: ${describe(err).message}`);
  }
}

// ------------------------------------------------------------------ the searcher

// The BundleSearcher over the bundle's files (the JS reader is Python's BundleFiles: its
// Uint8Arrays reach Python as buffers), BM25 until the bundle's model joins (useModel).
export function openSearcher(py, files, header) {
  py.globals.set("_files", files.reader);
  py.globals.set("_header", header);
  try {
    return py.runPython("from ragspine_lite.bundle.runtime import BundleSearcher\nBundleSearcher.from_files(_files, header=_header)");
  } finally {
    py.runPython("for _n in ('_files', '_header'):\n    globals().pop(_n, None)\ndel _n");
  }
}

// The bundle's model (loaded by onnxruntime-web) joins `searcher` as its Python backend:
// hybrid searches from now on. Returns whether the bundle has vectors for it.
export function useModel(py, searcher, embeddings) {
  py.globals.set("_searcher", searcher);
  py.globals.set("_ragspine_run", embeddings.run);
  py.globals.set("_ragspine_config", JSON.stringify(embeddings.config));
  py.globals.set("_ragspine_vocab", embeddings.vocabPath);
  const lines = [
    "import json",
    "from ragspine_lite.vector.browser_backend import BrowserOnnxEmbeddingBackend",
    "_b = BrowserOnnxEmbeddingBackend.from_files(_ragspine_vocab, json.loads(_ragspine_config), runner=_ragspine_run)",
    "_searcher.use_embeddings(_b)",
  ];
  try {
    return Boolean(py.runPython(lines.join("\n")));
  } finally {
    const names = "('_searcher', '_ragspine_run', '_ragspine_config', '_ragspine_vocab', '_b')";
    py.runPython(`for _n in ${names}:\n    globals().pop(_n, None)\ndel _n`);
  }
}

// The versions the worker runs: {python, ragspine_lite, pyodide}.
export function versionsOf(py) {
  const versions = JSON.parse(
    py.runPython(
      "import json, sys, ragspine_lite\njson.dumps({'python': sys.version.split()[0], 'ragspine_lite': ragspine_lite.__version__})",
    ),
  );
  versions.pyodide = py.version;
  return versions;
}
