// ragspine_lite search worker (module Web Worker).
//
// Boots Pyodide from the bundle's own files, unpacks the ragspine_lite wheel, opens the
// bundle from its header (the index's term and fragment directories; the term shards,
// text fragments and vectors are fetched when a search needs them), restores the visitor's
// documents from IndexedDB and then serves requests. Started by ragspine-lite.mjs; speaks
// only its message protocol:
//   page → worker  {id, op, args}
//   worker → page  {type: "reply", id, ok, result | error}
//                  {type: "progress", phase, message, loaded?, total?, overall?}
// `overall` ({loaded, total} bytes) counts every file the boot downloads (sizes from the
// manifest), credited as the bytes arrive (streamed files) or as each file completes.
//                  {type: "log", level, message}
// Every request is answered; failures come back as {ok: false, error: {message, name}}.

import { CoarseScanner, DenseScanner } from "./ragspine-dense.mjs";
import { InstantLane, declines } from "./ragspine-instant.mjs";
import { DEFAULT_TOP_K, FORMAT_VERSION } from "./ragspine-contract.mjs";

const VECTORS_DIR = "data/vectors/"; // the int8 vector shards of a hybrid bundle
// = CONTENT_NAMED_DIRS in ragspine_lite.bundle.manifest: index files the header lists, named
// `<kind>-<first 16 hex digits of their sha256>.bin`; manifest.json does not list them.
const CONTENT_NAMED_DIRS = ["data/terms/", "data/text/", "data/lists/"];
const MAX_DOCUMENT_BYTES = 5 * 1024 * 1024;
const EMBED_SLICE = 256; // texts per embed call (below the backend's primed-vector cache)
const PAGE_EXTENSIONS = [".txt", ".md", ".html", ".htm"];
const DB_STORE = "documents";

let state = null; // {py, dispatch, manifest, bundleURL, idb, timings, ...}
let tracker = null; // the boot's byte counter (trackBytes)
let openError = null;
let queue = Promise.resolve();
// The full engine (Pyodide): {start(), promise, ready, info}; `instant` answers plain BM25
// searches until it is ready (ragspine-instant.mjs: {lane, pageDocuments}).
let engine = null;
let instant = null;
// With an instant lane, the full engine's downloads start after its first answer (they would
// compete for the link) or this long after open, whichever comes first; or when asked for.
const BOOT_DELAY_MS = 2000;

const post = (message) => self.postMessage(message);
function progress(phase, message, extra = {}) {
  const overall = tracker ? tracker.overall() : undefined;
  if (tracker && extra.loaded === undefined) Object.assign(tracker, { phase, message });
  post({ type: "progress", phase, message, ...extra, ...(overall ? { overall } : {}) });
}

// Counts the boot's downloads against the manifest's file sizes: `credit(url, bytes)` from a
// streamed fetch, and a PerformanceObserver for the files Pyodide and micropip fetch.
function trackBytes(manifest, bundleURL, paths) {
  const sizes = new Map();
  for (const path of paths) if (manifest.files && manifest.files[path]) sizes.set(bundleURL + path, manifest.files[path].bytes);
  const done = new Map();
  let total = 0;
  for (const size of sizes.values()) total += size;
  const t = {
    phase: "manifest",
    message: "",
    credit(url, bytes) {
      if (!sizes.has(url)) return false;
      const before = done.get(url) || 0;
      const now = Math.min(sizes.get(url), Math.max(before, bytes));
      done.set(url, now);
      return now !== before;
    },
    overall() {
      let loaded = 0;
      for (const bytes of done.values()) loaded += bytes;
      return { loaded, total };
    },
    stop() {
      if (t.observer) t.observer.disconnect();
    },
  };
  if (typeof PerformanceObserver === "function") {
    t.observer = new PerformanceObserver((list) => {
      let changed = false;
      for (const entry of list.getEntries()) {
        const url = entry.name.split("#")[0];
        if (sizes.has(url)) changed = t.credit(url, sizes.get(url)) || changed;
      }
      if (changed) progress(t.phase, t.message);
    });
    try {
      t.observer.observe({ type: "resource", buffered: true });
    } catch {
      t.observer = null;
    }
  }
  return t;
}
const log = (level, message) => post({ type: "log", level, message });

class BundleError extends Error {
  constructor(message, name = "BundleError") {
    super(message);
    this.name = name;
  }
}

function describe(err) {
  if (err && err.constructor && err.constructor.name === "PythonError") {
    // The message is a whole traceback; its last line is "Type: what went wrong".
    const lines = String(err.message).trim().split("\n");
    const last = lines[lines.length - 1] || "Python error";
    const match = /^([A-Za-z_][\w.]*): (.*)$/s.exec(last);
    return match ? { name: match[1], message: match[2] } : { name: "PythonError", message: last };
  }
  if (err instanceof Error) return { name: err.name || "Error", message: err.message };
  return { name: "Error", message: String(err) };
}

self.onmessage = (event) => {
  const { id, op, args } = event.data || {};
  // One request at a time, in arrival order: Python runs on this single thread anyway.
  queue = queue.then(() =>
    handle(op, args || {}).then(
      (result) => post({ type: "reply", id, ok: true, result }),
      (err) => post({ type: "reply", id, ok: false, error: describe(err) }),
    ),
  );
};

self.addEventListener("unhandledrejection", (event) => {
  event.preventDefault();
  log("error", `unhandled failure in the search worker: ${describe(event.reason).message}`);
});

async function handle(op, args) {
  if (op === "open") return open(args);
  if (op === "close") return close();
  if (!engine) {
    throw new BundleError(
      openError ? `the search runtime failed to open: ${openError}` : "the search runtime is not open",
    );
  }
  if (op === "ready") return fullEngine();
  if (!engine.ready && instant) {
    const plain = declines(args, instant) === null;
    if (op === "search" && plain) {
      try {
        return await instantSearch(args);
      } catch (err) { // e.g. a rebuilt site's gone file: the full engine retries on the new index
        log("warn", `the instant lane could not answer (${describe(err).message}); the full engine will`);
      }
    }
    if (op === "prefetch") return plain ? instantPrefetch(args) : { paths: [], files: [], rounds: 0, ms: 0 };
  }
  await fullEngine();
  switch (op) {
    case "search":
      return searchOrRetry(args);
    case "prefetch":
      return prefetch(args);
    case "embed": {
      if (!state.embeddings) throw new BundleError("this bundle has no embedding model (build it with --embeddings minilm)");
      const texts = Array.from(args.texts || [], String);
      const vectors = [];
      for (let i = 0; i < texts.length || i === 0; i += EMBED_SLICE) {
        const part = texts.slice(i, i + EMBED_SLICE); // the no-JSPI cache holds DEFAULT_PRIMED_VECTORS
        vectors.push(...(await semanticCall("embed", { texts: part }, { texts: part })).vectors);
      }
      return { vectors };
    }
    case "configure":
      // A remote reranker is reached from Python (sync XHR in this worker, or fetch via JSPI).
      return call("configure", {
        reranker: args.reranker ?? "none", url: args.url ?? null, token: args.token ?? null,
        timeout: args.timeout ?? null, check: args.check !== false,
      });
    case "configure_llm":
      // The LLM query layers call the endpoint's /v1/chat from Python, like the reranker.
      return call("configure_llm", {
        url: args.url ?? null, token: args.token ?? null, timeout: args.timeout ?? null,
        transform: args.transform ?? "none", decompose: args.decompose ?? "none",
        adaptive: args.adaptive ?? "none", check: args.check !== false,
      });
    case "ingest":
      return ingest(args.docs || []);
    case "forget":
      return forget(args.docIds ?? null);
    case "documents":
      return call("documents");
    case "stats":
      return {
        ...call("stats"), timings: state.timings, persistence: Boolean(state.idb), manifest: state.manifest,
        files: state.files.totals,
      };
    default:
      throw new BundleError(`unknown operation ${JSON.stringify(op)}`);
  }
}

async function search(args) {
  const request = {
    query: args.query, filters: args.filters ?? null, topK: args.topK ?? DEFAULT_TOP_K, highlight: args.highlight !== false,
    rerank: args.rerank !== false, queryLayers: args.queryLayers !== false,
  };
  if (args.mode) request.mode = args.mode;
  if (args.postprocess) request.postprocess = args.postprocess;
  // What the query reads, fetched together (from the cache when there) before Python
  // searches; anything else it reads (a hybrid search's fragments, an LLM's rewritten
  // queries) is fetched synchronously.
  await loadFilesFor(request);
  const result = await semanticCall("search", request, { query: args.query, mode: args.mode ?? null });
  return withFiles(result, state.files.report());
}

// A tab opened before the site was rebuilt asks for content-named files that are gone (404):
// the search then re-reads the manifest, takes the rebuilt index in place and runs once more;
// if that cannot be done (or fails again) it says the site was updated.
async function searchOrRetry(args) {
  for (let attempt = 0; ; attempt++) {
    state.files.gone = null;
    try {
      return await search(args);
    } catch (err) {
      const gone = state.files.gone;
      if (!gone) throw err;
      if (attempt === 0 && (await takeRebuiltBundle())) continue;
      throw new BundleError(`${gone} is no longer on the site: the site was updated — reload the page`, "SiteUpdatedError");
    }
  }
}

// The rebuilt site's index, taken in place when only the index changed (same Pyodide, wheel
// and model): page documents and settings stay. Returns whether it was taken.
async function takeRebuiltBundle() {
  const { bundleURL } = state;
  let manifest;
  try {
    manifest = await readManifest(bundleURL);
  } catch (err) {
    log("warn", `the site's manifest could not be read again: ${describe(err).message}`);
    return false;
  }
  const header = manifest.entry.index;
  if (header === state.manifest.entry.index || !sameRuntime(state.manifest, manifest)) return false;
  const files = bundleFiles(manifest, bundleURL, state.runtimeCache);
  try {
    files.held.set(header, await fetchVerified(manifest, bundleURL, header, "the search index header"));
    state.searcher.replace_bundle(files.reader, header);
  } catch (err) {
    log("warn", `the rebuilt site's index could not be opened: ${describe(err).message}`);
    return false;
  }
  Object.assign(state, { manifest, files });
  if (state.embeddings) {
    const vectors = new Map();
    for (const path of Object.keys(manifest.files).filter((p) => p.startsWith(VECTORS_DIR))) {
      vectors.set(path, fetchVerified(manifest, bundleURL, path, "the chunk vectors"));
    }
    await useDenseScanner(state.py, state.searcher, vectors).catch((err) =>
      log("warn", `the chunk vectors are scanned in Python instead of JavaScript: ${describe(err).message}`));
  }
  log("info", "the site was rebuilt: searching its new index");
  return true;
}

// Whether two manifests name the same runtime (Pyodide, wheel, embedding model files).
function sameRuntime(a, b) {
  const pin = (m) => {
    const e = m.entry;
    const paths = [e.wheels.ragspine_lite, ...(e.embeddings ? [e.embeddings.model, e.embeddings.vocab, e.embeddings.config] : [])];
    return JSON.stringify([e.pyodide, ...paths.map((path) => [path, m.files[path] && m.files[path].sha256])]);
  };
  return pin(a) === pin(b);
}

function call(op, args = {}) {
  return JSON.parse(state.dispatch(op, JSON.stringify(args)));
}

// A Python call that may embed text. With JSPI, Python awaits onnxruntime-web itself
// (run_sync inside callPromising); without it, the texts to embed are asked for first, run
// here, and handed to Python before the (synchronous) call.
async function semanticCall(op, args, planArgs) {
  const emb = state.embeddings;
  if (!emb) return call(op, args);
  const started = performance.now();
  if (emb.jspi) {
    const result = JSON.parse(await state.dispatch.callPromising(op, JSON.stringify(args)));
    return withTiming(result, { path: "jspi", totalMs: performance.now() - started });
  }
  let modelMs = 0;
  // Python hands out the texts to embed a batch at a time (bounded model memory). If the
  // model fails, a search goes on without the vectors: Python then falls back to BM25 and
  // says so (semantic.channel "bm25:embedding-failed"), an ingested document stays BM25-only
  // (its embedding_error says why); an explicit embed() fails.
  let last = null;
  for (let plan = call("embed_plan", planArgs); plan.texts.length; plan = call("embed_plan", planArgs)) {
    if (plan.texts[0] === last) throw new BundleError("the embedding cache did not keep the vectors it was given");
    last = plan.texts[0];
    const t = performance.now();
    let output;
    try {
      output = await emb.run(plan.ids, plan.mask, plan.batch, plan.seq);
    } catch (err) {
      if (op !== "search" && op !== "ingest") throw err;
      log("warn", `the embedding model failed (${describe(err).message}); using BM25 only`);
      break;
    }
    modelMs += performance.now() - t;
    state.searcher.prime_embeddings(JSON.stringify(plan.texts), output);
  }
  const result = call(op, args);
  return withTiming(result, { path: "primed", modelMs, totalMs: performance.now() - started });
}

function withTiming(result, timing) {
  if (result && typeof result === "object" && !Array.isArray(result)) {
    result.worker = { ...timing, totalMs: Math.round(timing.totalMs * 100) / 100 };
  }
  return result;
}

function withFiles(result, files) {
  if (result && typeof result === "object" && !Array.isArray(result)) result.worker = { ...(result.worker || {}), files };
  return result;
}

// ------------------------------------------------------------------ the bundle's files
//
// Python reads the bundle (header, term shards, text fragments, vectors) through `reader.read`
// (its BundleFiles): bytes fetched ahead are handed over first, anything else comes from a
// synchronous XMLHttpRequest (allowed in workers; Python cannot await). Before a search the
// worker asks Python which files the query needs (`files_for`), fetches them together through
// the Cache API and provides them (`searcher.provide`). Python checks the sha256 in every file
// name; files read synchronously are added to the cache after the request, so a return visit
// reads them from the cache too. Names carry content hashes: a cached file never goes stale.

// Fetches `paths` together (cache first) and hands them to Python; returns the paths.
async function loadFiles(paths) {
  const wanted = [...new Set(paths)];
  const loaded = await Promise.all(wanted.map((path) => state.files.fetch(path)));
  for (const [i, path] of wanted.entries()) state.searcher.provide(path, loaded[i]);
  return wanted;
}

// What a search for `request` reads, loaded ahead: Python's `files_for` is asked until nothing
// is missing (first the term shards and the filter file, then, ranked from memory, the text
// fragments of the BM25 hits), a few rounds at most. Returns [paths, rounds].
const LOAD_ROUNDS = 3;

async function loadFilesFor({ query, mode = null, filters = null, topK = null }) {
  const ask = { query, mode, filters, topK };
  const paths = [];
  let rounds = 0;
  for (; rounds < LOAD_ROUNDS; rounds++) {
    const missing = call("files_for", ask).paths;
    if (!missing.length) break;
    paths.push(...(await loadFiles(missing)));
  }
  return [paths, rounds];
}

// Prefetch while typing: what a search for `query` will read, fetched now, so the search
// itself finds it in memory. Resolves to {paths, files, rounds, ms}.
async function prefetch({ query = "", mode = null, filters = null, topK = DEFAULT_TOP_K } = {}) {
  const started = performance.now();
  const [paths, rounds] = typeof query === "string" && query.trim()
    ? await loadFilesFor({ query, mode, filters, topK })
    : [[], 0];
  state.files.totals.prefetched += paths.length;
  return { paths, files: state.files.report(), rounds, ms: Math.round((performance.now() - started) * 100) / 100 };
}

// A file that answered 404 and is one of the index's content-named files: a rebuild renamed it.
function isGone(path, err) {
  return err && err.status === 404 && CONTENT_NAMED_DIRS.some((dir) => path.startsWith(dir));
}

function syncGet(url, what) {
  const xhr = new XMLHttpRequest();
  xhr.open("GET", url, false);
  xhr.responseType = "arraybuffer";
  try {
    xhr.send();
  } catch (err) {
    throw new BundleError(`could not load ${what} from ${url}: ${describe(err).message}`);
  }
  if (xhr.status !== 200) {
    throw httpError(`could not load ${what} from ${url}: HTTP ${xhr.status} ${xhr.statusText}`.trim(), xhr.status);
  }
  return new Uint8Array(xhr.response);
}

// The worker's side of the bundle's files: `reader` is what Python's BundleFiles wraps.
function bundleFiles(manifest, bundleURL, cache) {
  const held = new Map(); // path → bytes fetched ahead, until Python reads them
  const toStore = []; // [path, bytes] read synchronously, for the cache
  let loads = []; // what this request loaded: {path, bytes, from}
  const totals = { files: 0, bytes: 0, cache: 0, network: 0, sync: 0, prefetched: 0 };
  const record = (path, bytes, from) => {
    loads.push({ path, bytes: bytes.length, from });
    totals.files += 1;
    totals.bytes += bytes.length;
    totals[from] += 1;
  };
  const gone = (path, err) => {
    if (isGone(path, err)) files.gone = path;
    return err;
  };
  const files = {
    held,
    totals,
    gone: null, // a content-named file that answered 404 (see searchOrRetry)
    reader: {
      read(path) {
        const ahead = held.get(path);
        if (ahead) {
          held.delete(path);
          return ahead;
        }
        expectedSha(manifest, path); // a file of this bundle, or a clear error
        let bytes;
        try {
          bytes = syncGet(bundleURL + path, path);
        } catch (err) {
          throw gone(path, err);
        }
        record(path, bytes, "sync");
        if (cache) toStore.push([path, bytes]);
        return bytes;
      },
    },
    // Bytes of `path`: the Cache API's copy when it has this sha256, else the network's (checked);
    // `counted: false` leaves it out of the loads a search reports (the header); `source(from)`
    // hears where the bytes came from ("cache" or "network").
    async fetch(path, { counted = true, source = null } = {}) {
      const note = (p, bytes, from) => {
        if (counted) record(p, bytes, from);
        if (source) source(from);
      };
      const sha = expectedSha(manifest, path);
      const url = bundleURL + path;
      if (cache) {
        try {
          const hit = await cache.match(url);
          if (hit && hit.headers.get(SHA_HEADER) === sha) {
            const bytes = new Uint8Array(await hit.arrayBuffer());
            note(path, bytes, "cache");
            return bytes;
          }
        } catch (err) {
          log("warn", `the cache could not read ${path}: ${describe(err).message}`);
        }
      }
      const response = await fetchOrFail(url, path).catch((err) => Promise.reject(gone(path, err)));
      const bytes = new Uint8Array(await response.arrayBuffer());
      await verify(manifest, path, bytes);
      note(path, bytes, "network");
      if (cache) putCached(cache, url, sha, bytes).catch((err) => log("warn", `${path} was not cached: ${describe(err).message}`));
      return bytes;
    },
    // What the current request loaded ({path, bytes, from} each); starts the next request's list
    // and stores the synchronously read files in the cache (in the background, checked).
    report() {
      const done = loads;
      loads = [];
      for (const [path, bytes] of toStore.splice(0)) {
        verify(manifest, path, bytes)
          .then(() => putCached(cache, bundleURL + path, expectedSha(manifest, path), bytes))
          .catch((err) => log("warn", `${path} was not cached: ${describe(err).message}`));
      }
      return done;
    },
  };
  return files;
}

// ------------------------------------------------------------------ the embedding model

async function loadModel(manifest, bundleURL, fetchChecked, useJspi) {
  const spec = manifest.entry.embeddings;
  for (const key of ["model", "vocab", "config"]) {
    if (typeof spec[key] !== "string") throw new BundleError(`manifest.json lacks entry.embeddings.${key}: rebuild the bundle`);
  }
  if (!spec.ort || typeof spec.ort.module !== "string" || typeof spec.ort.dir !== "string") {
    throw new BundleError("manifest.json lacks entry.embeddings.ort: rebuild the bundle");
  }
  const started = performance.now();
  const [modelBytes, vocab, configBytes] = await Promise.all([
    fetchChecked(spec.model, `the ${spec.name || "embedding"} model`, "model"),
    fetchChecked(spec.vocab, "the model vocabulary", null),
    fetchChecked(spec.config, "the model config", null),
  ]);
  const moduleURL = bundleURL + spec.ort.module;
  let ort;
  try {
    ort = await import(moduleURL);
  } catch (err) {
    throw new BundleError(`could not load onnxruntime-web from ${moduleURL}: ${describe(err).message}`);
  }
  ort.env.wasm.wasmPaths = bundleURL + spec.ort.dir;
  ort.env.wasm.numThreads = 1; // more threads need cross-origin isolation
  let session;
  try {
    session = await ort.InferenceSession.create(modelBytes, { executionProviders: ["wasm"] });
  } catch (err) {
    throw new BundleError(`onnxruntime-web could not load ${spec.model}: ${describe(err).message}`);
  }
  const config = JSON.parse(new TextDecoder().decode(configBytes));
  const outputName = config.output || session.outputNames[0];
  const inputs = new Set(session.inputNames);
  let busy = Promise.resolve();
  const int64 = (values) => BigInt64Array.from(values, (v) => BigInt(v));
  // Row-major padded ids and attention mask (arrays from Python) → the model output as a
  // Float32Array. One run at a time: an InferenceSession is not re-entrant.
  const run = (ids, mask, batch, seq) => {
    const job = busy.then(async () => {
      const idData = int64(ids);
      const maskData = int64(mask);
      if (idData.length !== batch * seq || maskData.length !== batch * seq) {
        throw new BundleError(`model input of ${idData.length} ids / ${maskData.length} mask values is not ${batch}×${seq}`);
      }
      const feeds = {
        input_ids: new ort.Tensor("int64", idData, [batch, seq]),
        attention_mask: new ort.Tensor("int64", maskData, [batch, seq]),
      };
      if (inputs.has("token_type_ids")) feeds.token_type_ids = new ort.Tensor("int64", new BigInt64Array(batch * seq), [batch, seq]);
      const out = await session.run(feeds, [outputName]);
      return out[outputName].data;
    });
    busy = job.catch(() => {});
    return job;
  };
  return {
    name: spec.name || "embeddings", modelId: spec.model_id, dim: spec.dim, vocab, config, run,
    vocabName: spec.vocab.split("/").pop(), jspi: useJspi, loadMs: Math.round(performance.now() - started),
  };
}

// ------------------------------------------------------------------ the Python memory snapshot
//
// A cold boot takes a Pyodide memory snapshot right after the wheel is unpacked and the
// runtime's pure-Python modules are imported, before any file is opened, and keeps it in the
// Cache API; a return visit restores it instead of starting Python and importing again.
// Pyodide's snapshots are experimental (`_makeSnapshot` / `_loadSnapshot`) and tied to the
// exact build, so the key covers the sha256s of the Pyodide files and the wheel, the imports
// and the browser; failing to make, store or restore one falls back to a plain boot (logged).

const SNAPSHOT_IMPORTS = "import ragspine_lite.bundle.runtime\nimport ragspine_lite.vector.browser_backend";

async function snapshotKey(manifest) {
  if (!(self.crypto && crypto.subtle)) return null;
  const entry = manifest.entry;
  const files = Object.keys(manifest.files).filter((path) => path.startsWith(entry.pyodide) || path === entry.wheels.ragspine_lite);
  const parts = [SNAPSHOT_IMPORTS, navigator.userAgent, ...files.sort().map((path) => `${path} ${manifest.files[path].sha256}`)];
  return sha256Hex(new TextEncoder().encode(parts.join("\n")));
}

// Pyodide, from the stored snapshot when there is a usable one, else a plain boot (which
// takes a snapshot when `snapshot` is on and the cache works). Returns {py, restored, key}.
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

function takeSnapshot(py, cached, key) {
  try {
    py.runPython(SNAPSHOT_IMPORTS);
    cached.saveSnapshot(key, py.makeMemorySnapshot());
  } catch (err) {
    log("warn", `no Python snapshot for the next visit: ${describe(err).message}`);
  }
}

// ------------------------------------------------------------------ installing the wheel

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

// ------------------------------------------------------------------ fetching

function httpError(message, status) {
  return Object.assign(new BundleError(message), { status });
}

async function fetchOrFail(url, what, init = undefined) {
  let response;
  try {
    response = await fetch(url, init);
  } catch (err) {
    throw new BundleError(`could not load ${what} from ${url}: ${describe(err).message}`);
  }
  if (!response.ok) {
    throw httpError(`could not load ${what} from ${url}: HTTP ${response.status} ${response.statusText}`.trim(), response.status);
  }
  return response;
}

async function fetchBytes(url, what, phase) {
  const response = await fetchOrFail(url, what);
  // Content-Length is only a hint for the progress bar: with Content-Encoding (gzip on many
  // static hosts) it counts compressed bytes, while the body stream yields decoded ones.
  const hint = Number(response.headers.get("content-length")) || 0;
  if (!response.body || !phase) {
    const bytes = new Uint8Array(await response.arrayBuffer());
    if (tracker) tracker.credit(url, bytes.length);
    return bytes;
  }
  const reader = response.body.getReader();
  const parts = [];
  let loaded = 0;
  let lastReport = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    loaded += value.length;
    if (tracker) tracker.credit(url, loaded);
    if (loaded - lastReport > 256 * 1024) {
      lastReport = loaded;
      const total = Math.max(hint, loaded);
      progress(phase, `Downloading ${what}`, { loaded, total });
    }
  }
  progress(phase, `Downloaded ${what}`, { loaded, total: loaded });
  const out = new Uint8Array(loaded);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

// The bytes of the manifest's `path`, checked against its sha256.
async function fetchVerified(manifest, bundleURL, path, what, phase = null) {
  const bytes = await fetchBytes(bundleURL + path, what, phase);
  await verify(manifest, path, bytes);
  return bytes;
}

async function sha256Hex(bytes) {
  const digest = await crypto.subtle.digest("SHA-256", bytes);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

// The sha256 `path` must have: manifest.json's, or for a content-named index file the hex
// digits its name carries (a prefix of it). Throws for a file the bundle does not have.
function expectedSha(manifest, path) {
  const entry = manifest.files && manifest.files[path];
  if (entry) return entry.sha256;
  if (CONTENT_NAMED_DIRS.some((dir) => path.startsWith(dir))) {
    const name = /-([0-9a-f]{16})\.[a-z0-9]+$/.exec(path);
    if (name) return name[1];
  }
  throw new BundleError(`manifest.json does not list ${path}: rebuild the bundle`);
}

async function verify(manifest, path, bytes) {
  const expected = expectedSha(manifest, path);
  if (!(self.crypto && crypto.subtle)) return; // not a secure context: no digest API
  const found = await sha256Hex(bytes);
  if (!found.startsWith(expected)) {
    throw new BundleError(
      `${path} does not match manifest.json (sha256 ${found.slice(0, 12)}…, expected ` +
        `${String(expected).slice(0, 12)}…): the bundle was changed after it was built; rebuild it`,
    );
  }
}

function checkFormat(manifest, url) {
  if (!manifest || typeof manifest !== "object") {
    throw new BundleError(`${url} is not a bundle manifest (not a JSON object)`);
  }
  const found = manifest.format_version;
  if (!Number.isInteger(found)) {
    throw new BundleError(`${url} has no integer format_version: rebuild the bundle with 'python build_wasm.py build DOCS_DIR --out DIR'`, "BundleFormatError");
  }
  if (found < FORMAT_VERSION) {
    throw new BundleError(
      `bundle format version ${found} is older than this runtime reads (${FORMAT_VERSION}): ` +
        "rebuild the bundle with 'python build_wasm.py build DOCS_DIR --out DIR'",
      "BundleFormatError",
    );
  }
  if (found > FORMAT_VERSION) {
    throw new BundleError(
      `bundle format version ${found} is newer than this runtime reads (${FORMAT_VERSION}): ` +
        "update the web runtime (copy ragspine-lite.mjs and ragspine-worker.mjs from the same build as the bundle)",
      "BundleFormatError",
    );
  }
  const entry = manifest.entry || {};
  for (const key of ["index", "pyodide"]) {
    if (typeof entry[key] !== "string") throw new BundleError(`manifest.json lacks entry.${key}: rebuild the bundle`);
  }
  if (!entry.wheels || !entry.wheels.micropip || !entry.wheels.ragspine_lite) {
    throw new BundleError("manifest.json lacks entry.wheels: rebuild the bundle");
  }
}

// ------------------------------------------------------------------ the runtime cache
//
// A return visit reads the runtime files (Pyodide's wasm, stdlib and lock file, the wheel,
// the index header, the model and onnxruntime-web's wasm) and every shard a search fetched
// from the Cache API instead of the network, on any static host. Every entry carries the
// sha256 the manifest gave its file when it was stored, and is served only while the current
// manifest (always revalidated) names the same sha256: a rebuilt site fetches the changed
// files again and they replace the old entries, so an old index never meets a new runtime. Without a usable Cache API (file://,
// an insecure http origin, some private modes, a full quota) every file comes from the
// network and the worker logs why; search is never affected.

const CACHE_PREFIX = "ragspine-lite:";
const SHA_HEADER = "x-ragspine-sha256";
const SNAPSHOT_PATH = "ragspine-lite.snapshot"; // a Cache API key only, never a file on the host
const networkFetch = self.fetch.bind(self);

async function openRuntimeCache(bundleURL, enabled) {
  if (!enabled) return { cache: null, reason: "switched off (cache: false)" };
  if (!self.caches) return { cache: null, reason: "no Cache API in this context (file:// or an insecure origin)" };
  try {
    return { cache: await caches.open(CACHE_PREFIX + bundleURL), reason: null };
  } catch (err) {
    return { cache: null, reason: `the Cache API is unavailable: ${describe(err).message}` };
  }
}

// Stores checked `bytes` under `url`, tagged with their sha256 (what later visits compare).
function putCached(cache, url, sha256, bytes, type = null) {
  const headers = { [SHA_HEADER]: sha256, "content-type": type || "application/octet-stream" };
  return cache.put(url, new Response(bytes, { headers }));
}

function requestURL(input) {
  const raw = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
  return new URL(raw, self.location.href).href;
}

// Routes the worker's fetches of the manifest's files through `cache` while the boot runs
// (Pyodide and onnxruntime-web call the global fetch); returns {stats, settle, restore}.
function cacheRuntimeFiles(cache, manifest, bundleURL, paths) {
  const wanted = new Map(paths.map((path) => [bundleURL + path, { path, sha256: manifest.files[path].sha256 }]));
  const stats = { enabled: Boolean(cache), cached: [], fetched: [], errors: [], snapshot: "none" };
  const writes = [];
  const store = async (url, file, response) => {
    const bytes = await response.arrayBuffer();
    if (self.crypto && crypto.subtle && (await sha256Hex(bytes)) !== file.sha256) {
      throw new Error(`${file.path} does not match manifest.json; not cached`);
    }
    await putCached(cache, url, file.sha256, bytes, response.headers.get("content-type"));
  };
  const cachedFetch = async (input, init) => {
    const url = requestURL(input);
    const file = wanted.get(url);
    if (!file || (init && init.method && init.method !== "GET")) return networkFetch(input, init);
    try {
      const hit = await cache.match(url);
      if (hit && hit.headers.get(SHA_HEADER) === file.sha256) {
        stats.cached.push(file.path);
        return hit;
      }
    } catch (err) {
      stats.errors.push(`${file.path}: ${describe(err).message}`);
    }
    const response = await networkFetch(input, init);
    stats.fetched.push(file.path);
    if (response.status === 200) {
      const write = store(url, file, response.clone()).catch((err) => {
        stats.errors.push(`${file.path}: ${describe(err).message}`);
      });
      writes.push(write);
    }
    return response;
  };
  if (cache) self.fetch = cachedFetch;
  else stats.fetched.push(...paths);
  const snapshotURL = bundleURL + SNAPSHOT_PATH;
  return {
    stats,
    restore() {
      self.fetch = networkFetch;
    },
    // The Python memory snapshot stored under `key` (see startPython), or null.
    async readSnapshot(key) {
      if (!cache) return null;
      try {
        const hit = await cache.match(snapshotURL);
        if (hit && hit.headers.get(SHA_HEADER) === key) return new Uint8Array(await hit.arrayBuffer());
      } catch (err) {
        stats.errors.push(`the Python snapshot: ${describe(err).message}`);
      }
      return null;
    },
    saveSnapshot(key, bytes) {
      if (!cache) return;
      const headers = { [SHA_HEADER]: key, "content-type": "application/octet-stream" };
      writes.push(cache.put(snapshotURL, new Response(bytes, { headers })).catch((err) => {
        stats.errors.push(`the Python snapshot: ${describe(err).message}`);
      }));
    },
    dropSnapshot() {
      if (cache) writes.push(cache.delete(snapshotURL).catch(() => {}));
    },
    // Waits for the writes, drops entries of files neither this manifest nor the index
    // (`indexPaths`, the header's content-named files) names, logs failures.
    async settle(indexPaths = []) {
      if (!cache) return stats;
      await Promise.all(writes);
      const paths = [...Object.keys(manifest.files), ...indexPaths];
      const listed = new Set([snapshotURL, ...paths.map((path) => bundleURL + path)]);
      try {
        for (const request of await cache.keys()) if (!listed.has(request.url)) await cache.delete(request);
      } catch (err) {
        stats.errors.push(`pruning: ${describe(err).message}`);
      }
      if (stats.errors.length) log("warn", `the runtime cache failed for ${stats.errors.join("; ")}; those files come from the network`);
      return stats;
    },
  };
}

// ------------------------------------------------------------------ IndexedDB

function idbRequest(request) {
  return new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error || new Error("IndexedDB request failed"));
  });
}

function idbOpen(name) {
  return new Promise((resolve, reject) => {
    const request = indexedDB.open(name, 1);
    request.onupgradeneeded = () => {
      const db = request.result;
      if (!db.objectStoreNames.contains(DB_STORE)) db.createObjectStore(DB_STORE, { keyPath: "doc_id" });
    };
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error || new Error("cannot open IndexedDB"));
    request.onblocked = () => reject(new Error("IndexedDB is blocked by another tab"));
  });
}

// One readwrite transaction: either every write lands or none does (a reload mid-way aborts it).
function idbTransaction(db, work) {
  return new Promise((resolve, reject) => {
    const tx = db.transaction(DB_STORE, "readwrite");
    const store = tx.objectStore(DB_STORE);
    work(store);
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(tx.error || new Error("IndexedDB transaction failed"));
    tx.onabort = () => reject(tx.error || new Error("IndexedDB transaction aborted"));
  });
}

async function idbAll(db) {
  const tx = db.transaction(DB_STORE, "readonly");
  return idbRequest(tx.objectStore(DB_STORE).getAll());
}

// ------------------------------------------------------------------ open / close

async function open({
  bundle, formatVersion, embeddings = true, jspi = true, cache = true, install = "unpack", snapshot = true,
  instant: withInstant = true,
}) {
  if (engine) throw new BundleError("the search runtime is already open");
  if (formatVersion !== undefined && formatVersion !== FORMAT_VERSION) {
    throw new BundleError(
      `ragspine-lite.mjs speaks bundle format ${formatVersion} but ragspine-worker.mjs speaks ${FORMAT_VERSION}: ` +
        "copy both files from the same build",
      "BundleFormatError",
    );
  }
  try {
    if (install !== "unpack" && install !== "micropip") {
      throw new BundleError(`install must be "unpack" or "micropip", got ${JSON.stringify(install)}`);
    }
    const options = { embeddings, jspi, cache, install, snapshot };
    const prepared = await prepare(bundle, options);
    instant = withInstant ? await openInstant(prepared, options) : null;
    engine = deferredBoot(prepared, options);
    if (!instant) return await fullEngine();
    setTimeout(() => engine && engine.start(), BOOT_DELAY_MS);
    return {
      engine: "instant", manifest: prepared.manifest, timings: prepared.timings, persistence: null, restored: 0,
      restoreErrors: [], versions: null, embeddings: null, embeddingsError: null, cache: null,
    };
  } catch (err) {
    openError = describe(err).message;
    engine = null;
    instant = null;
    if (tracker) tracker.stop();
    tracker = null;
    throw err;
  }
}

// The Pyodide boot, started once (engine.start()); its promise resolves to open()'s info.
function deferredBoot(prepared, options) {
  let run = null;
  const boot = {
    ready: false,
    info: null,
    start() {
      if (!run) run = bootFrom(prepared, options).then((info) => Object.assign(boot, { ready: true, info }).info);
      return run;
    },
  };
  return boot;
}

async function fullEngine() {
  return engine.start();
}

async function bootFrom(prepared, options) {
  try {
    state = await boot(prepared, options);
    openError = null;
    const info = {
      engine: "full",
      manifest: state.manifest,
      timings: state.timings,
      persistence: Boolean(state.idb),
      restored: state.restored,
      restoreErrors: state.restoreErrors,
      versions: state.versions,
      embeddings: state.embeddings
        ? { name: state.embeddings.name, modelId: state.embeddings.modelId, dim: state.embeddings.dim,
            jspi: state.embeddings.jspi, loadMs: state.embeddings.loadMs }
        : null,
      embeddingsError: state.embeddingsError,
      cache: state.cache,
    };
    if (instant) post({ type: "engine", engine: "full", info });
    return info;
  } catch (err) {
    openError = describe(err).message;
    if (tracker) tracker.stop();
    tracker = null;
    if (instant) {
      log("error", `the full search engine failed to start (plain searches still work): ${openError}`);
      post({ type: "engine", engine: "failed", error: describe(err) });
    }
    throw new BundleError(`the search runtime failed to open: ${openError}`, describe(err).name);
  }
}

// The bundle's manifest, checked. Always revalidated (never a stale HTTP-cache copy): its
// sha256s decide what the cache serves.
async function readManifest(bundleURL) {
  const manifestURL = bundleURL + "manifest.json";
  const response = await fetchOrFail(manifestURL, "the bundle manifest", { cache: "no-cache" });
  let manifest;
  try {
    manifest = await response.json();
  } catch (err) {
    throw new BundleError(`${manifestURL} is not valid JSON: ${describe(err).message}`);
  }
  checkFormat(manifest, manifestURL);
  return manifest;
}


// ------------------------------------------------------------------ the instant lane

// The lane over the bundle's header (null: this bundle is searched hybrid by default, or the
// lane cannot read it). A visitor with stored documents gets the full engine's answers only.
async function openInstant(prepared, options) {
  const entry = prepared.manifest.entry;
  if (entry.embeddings && options.embeddings !== false) return null;
  try {
    const lane = await InstantLane.open((path) => (path === entry.index ? prepared.header : prepared.files.fetch(path)), entry.index);
    let pageDocuments = 0;
    try {
      const db = await idbOpen(`ragspine-lite:${prepared.bundleURL}`);
      pageDocuments = (await idbAll(db)).length;
      db.close();
    } catch {
      // no IndexedDB: the full engine will have no stored documents either
    }
    prepared.timings.instant = Math.round(performance.now() - prepared.t0);
    return { lane, pageDocuments, files: prepared.files };
  } catch (err) {
    log("warn", `searches wait for the full engine: the instant lane could not open (${describe(err).message})`);
    return null;
  }
}

async function instantSearch(args) {
  const result = await instant.lane.search(args.query, { topK: args.topK ?? DEFAULT_TOP_K, highlight: args.highlight !== false });
  engine.start();
  return withFiles({ ...result, worker: { lane: "instant" } }, instant.files.report());
}

async function instantPrefetch({ query = "", topK = DEFAULT_TOP_K } = {}) {
  const started = performance.now();
  const paths = typeof query === "string" && query.trim() ? await instant.lane.prefetch(query, topK) : [];
  const files = instant.files.report();
  instant.files.totals.prefetched += files.length;
  return { paths, files, rounds: paths.length ? 2 : 0, ms: Math.round((performance.now() - started) * 100) / 100 };
}

// The manifest, the runtime cache and the index header: what both lanes start from.
async function prepare(bundle, options) {
  const t0 = performance.now();
  const timings = {};
  const mark = (name, since) => {
    timings[name] = Math.round(performance.now() - since);
    return performance.now();
  };
  let bundleURL = new URL(bundle || "./", self.location.href).href;
  if (!bundleURL.endsWith("/")) bundleURL += "/";

  progress("manifest", "Reading the bundle manifest");
  const manifest = await readManifest(bundleURL);
  mark("manifest", t0);
  const { cache, reason } = await openRuntimeCache(bundleURL, options.cache !== false);
  if (!cache) log(options.cache === false ? "info" : "warn", `runtime files come from the network: ${reason}`);
  const files = bundleFiles(manifest, bundleURL, cache);
  const origin = { header: null }; // where the header came from, for the runtime cache's report
  const header = files.fetch(manifest.entry.index, { counted: false, source: (from) => { origin.header = from; } });
  header.catch(() => {});
  return { t0, timings, mark, bundleURL, manifest, cache, files, header, origin };
}

async function boot(prepared, options = {}) {
  const { manifest, bundleURL, cache } = prepared;
  const entry = manifest.entry;
  const withModel = Boolean(entry.embeddings && options.embeddings !== false);
  const withMicropip = options.install === "micropip";
  const downloads = Object.keys(manifest.files || {}).filter((path) =>
    path === entry.index || path.startsWith(entry.pyodide) || path === entry.wheels.ragspine_lite ||
    (withMicropip && path === entry.wheels.micropip) ||
    (withModel && [entry.embeddings.model, entry.embeddings.vocab, entry.embeddings.config].includes(path)) ||
    (withModel && entry.embeddings.ort && path.startsWith(entry.embeddings.ort.dir)) ||
    (withModel && path.startsWith(VECTORS_DIR)));
  tracker = trackBytes(manifest, bundleURL, downloads);
  tracker.credit(bundleURL + entry.index, manifest.files[entry.index].bytes); // read by prepare()
  const cached = cacheRuntimeFiles(cache, manifest, bundleURL, downloads);
  // prepare() read the header before the cache hook was in place: report it the same way.
  if (cache) {
    prepared.header.then(() => {
      cached.stats[prepared.origin.header === "cache" ? "cached" : "fetched"].push(entry.index);
    }, () => {});
  }
  try {
    return await bootPython(manifest, bundleURL, cached, { ...options, ...prepared, withModel, runtimeCache: cache });
  } finally {
    cached.restore();
  }
}

async function bootPython(manifest, bundleURL, cached, options) {
  const { t0, timings, mark, withModel } = options;
  const entry = manifest.entry;
  let t = performance.now();

  // Start the downloads and their sha256 checks now; they overlap with the Pyodide boot.
  const fetchChecked = (path, what, phase) => fetchVerified(manifest, bundleURL, path, what, phase);
  const headerBytes = options.header;
  const wheelBytes = fetchChecked(entry.wheels.ragspine_lite, "the ragspine_lite wheel", null);
  wheelBytes.catch(() => {});
  // JSPI (WebAssembly.Suspending): Python can then block on onnxruntime-web's promises.
  const useJspi = options.jspi !== false && typeof WebAssembly.Suspending === "function";
  const model = withModel
    ? loadModel(manifest, bundleURL, fetchChecked, useJspi)
    : null;
  if (model) model.catch(() => {});
  // A hybrid search scans every chunk vector (a large bundle: its coarse centroids, the lists
  // come by need): their shards download with the model.
  const vectors = new Map();
  for (const path of withModel ? Object.keys(manifest.files).filter((p) => p.startsWith(VECTORS_DIR)) : []) {
    vectors.set(path, fetchChecked(path, "the chunk vectors", null));
    vectors.get(path).catch(() => {});
  }

  progress("boot", "Starting Python (Pyodide)");
  const pyodideURL = bundleURL + entry.pyodide;
  let loadPyodide;
  try {
    ({ loadPyodide } = await import(pyodideURL + "pyodide.mjs"));
  } catch (err) {
    throw new BundleError(`could not load the Pyodide runtime from ${pyodideURL}pyodide.mjs: ${describe(err).message}`);
  }
  let python;
  try {
    const config = { indexURL: pyodideURL, stdout: (line) => log("info", line), stderr: (line) => log("warn", line) };
    python = await startPython(loadPyodide, config, manifest, cached, options.snapshot !== false);
  } catch (err) {
    throw new BundleError(`Pyodide failed to start from ${pyodideURL}: ${describe(err).message}`);
  }
  const py = python.py;
  cached.stats.snapshot = python.restored ? "restored" : python.key ? "taken" : "none";
  t = mark("boot", t);
  timings.bootEndedAt = performance.timeOrigin + performance.now(); // epoch ms, for benchmarks

  progress("install", "Installing ragspine_lite");
  const wheelName = entry.wheels.ragspine_lite.split("/").pop();
  const wheel = await wheelBytes;
  if (options.install === "micropip") await installWithMicropip(py, bundleURL + entry.wheels.micropip, wheelName, wheel);
  else installWheel(py, wheelName, wheel);
  if (python.key && !python.restored) takeSnapshot(py, cached, python.key);
  t = mark("install", t);

  let embeddings = null;
  let embeddingsError = null;
  if (model) {
    progress("model", "Loading the embedding model (onnxruntime-web)");
    try {
      embeddings = await model;
    } catch (err) {
      // Search still works without the model: BM25 only, and open() says why.
      embeddingsError = describe(err).message;
      log("warn", `the embedding model could not be loaded, searching with BM25 only: ${embeddingsError}`);
    }
    if (embeddings) {
      py.FS.mkdirTree("/bundle/model");
      embeddings.vocabPath = `/bundle/model/${embeddings.vocabName}`;
      py.FS.writeFile(embeddings.vocabPath, embeddings.vocab);
      embeddings.vocab = null;
    }
    t = mark("model", t);
  }

  progress("index", "Opening the search index");
  const files = options.files;
  files.held.set(entry.index, await headerBytes);
  const searcher = openSearcher(py, files, entry.index, embeddings);
  const dispatch = searcher.dispatch;
  if (embeddings) {
    try {
      await useDenseScanner(py, searcher, vectors, files);
    } catch (err) {
      log("warn", `the chunk vectors are scanned in Python instead of JavaScript: ${describe(err).message}`);
    }
  }
  const versions = JSON.parse(
    py.runPython(
      "import json, sys, ragspine_lite\njson.dumps({'python': sys.version.split()[0], 'ragspine_lite': ragspine_lite.__version__})",
    ),
  );
  versions.pyodide = py.version;
  // The first query's imports and caches (tokenizer, glossary), without reading a shard.
  dispatch("files_for", JSON.stringify({ query: "warm up" }));
  t = mark("index", t);

  const opened = {
    py, searcher, dispatch, manifest, bundleURL, timings, versions, embeddings, embeddingsError, files,
    idb: null, restored: 0, restoreErrors: [], runtimeCache: options.runtimeCache,
  };
  state = opened; // call() needs it while restoring
  // The model's first run is slow (compilation): warm it with a query vector, no search.
  if (embeddings) await semanticCall("embed", { texts: ["warm up"] }, { texts: ["warm up"] });
  try {
    opened.idb = await idbOpen(`ragspine-lite:${bundleURL}`);
  } catch (err) {
    log("warn", `documents added in this page will not persist: ${describe(err).message}`);
  }
  if (opened.idb) {
    const stored = await idbAll(opened.idb);
    stored.sort((a, b) => (a.added - b.added) || (a.doc_id < b.doc_id ? -1 : 1));
    const fresh = [];
    for (let i = 0; i < stored.length; i++) {
      progress("restore", `Restoring your documents (${i + 1}/${stored.length})`, { loaded: i + 1, total: stored.length });
      try {
        // Vectors stored with the document are reused; only a document without them is embedded.
        const info = await indexDocument(stored[i]);
        if (embeddings && !sameVectors(stored[i].vectors)) fresh.push({ ...stored[i], doc_id: info.doc_id });
        opened.restored += 1;
      } catch (err) {
        opened.restoreErrors.push(`${stored[i].name}: ${describe(err).message}`);
      }
    }
    await storeVectors(fresh);
  }
  mark("restore", t);
  timings.total = Math.round(performance.now() - t0);
  const indexPaths = searcher.index_paths();
  opened.cache = await cached.settle(indexPaths.toJs());
  indexPaths.destroy();
  progress("ready", "Ready");
  tracker.stop();
  tracker = null;
  return opened;
}

// The BundleSearcher over the bundle's files (the JS reader is Python's BundleFiles: its
// Uint8Arrays reach Python as buffers).
function openSearcher(py, files, header, embeddings) {
  py.globals.set("_files", files.reader);
  const lines = ["from ragspine_lite.bundle.runtime import BundleSearcher"];
  if (embeddings) {
    py.globals.set("_ragspine_run", embeddings.run);
    py.globals.set("_ragspine_config", JSON.stringify(embeddings.config));
    py.globals.set("_ragspine_vocab", embeddings.vocabPath);
    lines.push(
      "import json",
      "from ragspine_lite.vector.browser_backend import BrowserOnnxEmbeddingBackend",
      "_b = BrowserOnnxEmbeddingBackend.from_files(_ragspine_vocab, json.loads(_ragspine_config), runner=_ragspine_run)",
      "del _ragspine_run, _ragspine_config, _ragspine_vocab",
    );
  }
  py.globals.set("_header", header);
  lines.push(`BundleSearcher.from_files(_files, header=_header${embeddings ? ", embedding_backend=_b" : ""})`);
  try {
    return py.runPython(lines.join("\n"));
  } finally {
    py.runPython("for _n in ('_files', '_header', '_b'):\n    globals().pop(_n, None)\ndel _n");
  }
}

// A hybrid bundle's chunk vectors, scanned in JavaScript (ragspine-dense.mjs: one Int8Array,
// Int32 sums): Python's dense lane is handed the scanner (JsDenseScanner); same integers. A
// large bundle's coarse lists are read when a query probes them (the centroids came at boot).
async function useDenseScanner(py, searcher, vectors, files) {
  const info = JSON.parse(searcher.dispatch("vector_shards", "{}"));
  if (!info.shards && !info.lists) return;
  const ahead = (path) => vectors.get(path) || Promise.reject(
    new BundleError(`manifest.json does not list ${path}: rebuild the bundle`));
  let scanner;
  if (info.lists) {
    files.held.set(info.centroids, await ahead(info.centroids));
    scanner = new CoarseScanner(info, (path) => files.reader.read(path));
  } else {
    scanner = await DenseScanner.load(info, ahead);
  }
  const dense = py.pyimport("ragspine_lite.bundle.dense");
  const adapter = dense.JsDenseScanner(scanner);
  try {
    searcher.use_scanner(adapter);
  } finally {
    adapter.destroy();
    dense.destroy();
  }
}

function close() {
  if (state) {
    try {
      state.searcher.close();
      state.searcher.destroy();
      state.dispatch.destroy();
    } catch {
      // closing is best effort
    }
    if (state.idb) state.idb.close();
  }
  state = null;
  engine = null;
  instant = null;
  return true;
}

// ------------------------------------------------------------------ page documents

function checkIncoming(doc, index) {
  if (!doc || typeof doc !== "object") throw new BundleError(`document ${index} must be an object {name, text}`);
  const name = typeof doc.name === "string" ? doc.name.split(/[\\/]/).pop().trim() : "";
  if (!name) throw new BundleError(`document ${index} has no file name`);
  const lower = name.toLowerCase();
  if (!PAGE_EXTENSIONS.some((ext) => lower.endsWith(ext))) {
    throw new BundleError(`unsupported file type for ${JSON.stringify(name)}; supported: ${PAGE_EXTENSIONS.join(", ")}`);
  }
  if (typeof doc.text !== "string") throw new BundleError(`${name}: text must be a string`);
  if (doc.text.length > MAX_DOCUMENT_BYTES) {
    throw new BundleError(`${name} is larger than ${MAX_DOCUMENT_BYTES / (1024 * 1024)} MB`);
  }
  return { name, text: doc.text };
}

async function ingest(docs) {
  if (!Array.isArray(docs) || !docs.length) throw new BundleError("ingest needs a non-empty list of documents");
  const incoming = docs.map(checkIncoming);
  // Validate everything (front matter …) before anything is stored: all or nothing.
  const byId = new Map();
  for (const doc of incoming) {
    const checked = call("check", doc);
    byId.set(checked.doc_id, { doc_id: checked.doc_id, name: doc.name, text: doc.text, added: Date.now() });
  }
  const records = [...byId.values()];
  if (state.idb) {
    await idbTransaction(state.idb, (store) => {
      for (const record of records) store.put(record);
    });
  }
  const results = [];
  const verb = state.embeddings ? "Embedding and indexing" : "Indexing";
  for (let i = 0; i < records.length; i++) {
    progress("ingest", `${verb} ${records[i].name} (${i + 1}/${records.length})`, { loaded: i + 1, total: records.length });
    results.push(await indexDocument(records[i]));
  }
  if (state.embeddings) await storeVectors(records);
  progress("ready", "Ready");
  return { documents: results, persisted: Boolean(state.idb) };
}

// Index one page document; with the bundle's model its chunks are embedded too (vectors the
// record carries from an earlier visit are reused, so nothing is embedded twice).
async function indexDocument(record) {
  const args = { name: record.name, text: record.text };
  if (!state.embeddings) return call("ingest", args);
  if (sameVectors(record.vectors)) args.vectors = record.vectors;
  const info = await semanticCall("ingest", args, { document: { name: record.name, text: record.text } });
  delete info.worker;
  return info;
}

function sameVectors(vectors) {
  return Boolean(vectors && state.embeddings && vectors.model_id === state.embeddings.modelId);
}

// Keep each document's chunk vectors in its IndexedDB record, so a reload does not re-embed.
async function storeVectors(records) {
  if (!state.idb || !records.length) return;
  const updated = records.map((record) => ({ ...record, vectors: call("page_vectors", { docId: record.doc_id }) }));
  try {
    await idbTransaction(state.idb, (store) => {
      for (const record of updated) store.put(record);
    });
  } catch (err) {
    log("warn", `the vectors of your documents were not saved (they will be re-embedded): ${describe(err).message}`);
  }
}

async function forget(docIds) {
  const ids = docIds === null ? call("documents").map((d) => d.doc_id) : docIds.map(String);
  if (state.idb) {
    await idbTransaction(state.idb, (store) => {
      if (docIds === null) store.clear();
      else for (const id of ids) store.delete(id);
    });
  }
  return call("forget", { docIds: ids });
}
