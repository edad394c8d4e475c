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
//                  {type: "log", level, message}
//                  {type: "engine", engine: "full" | "hybrid", info | engine: "failed", error}
// `overall` ({loaded, total} bytes) counts every file the boot downloads (sizes from the
// manifest), credited as the bytes arrive (streamed files) or as each file completes; an
// "engine" message says the full engine took over from the instant lane ("full"), that the
// bundle's model joined it ("hybrid"; info.dense "failed" when it could not), or that the
// full engine failed to start. Every request is answered; failures come back as
// {ok: false, error: {message, name}}.
//
// This module takes the requests and opens the runtime in three steps: the instant lane, the
// Pyodide boot (the full engine, BM25), then the bundle's model joining it (hybrid). The
// worker's other modules: ragspine-messages.mjs (progress, logs, errors), ragspine-files.mjs (fetching, checking, the Cache API), ragspine-boot.mjs (Pyodide, the
// wheel, the searcher), ragspine-embed.mjs (the model, the vector scan), ragspine-query.mjs
// (searches and prefetch), ragspine-documents.mjs (the visitor's documents, IndexedDB).

import { DEFAULT_TOP_K, FORMAT_VERSION } from "./ragspine-contract.mjs";
import { InstantLane, declines } from "./ragspine-instant.mjs";
import {
  BundleError, credit, describe, log, post, progress, stopTracking, trackBytes, withFiles,
} from "./ragspine-messages.mjs";
import { BundleFiles, RuntimeCache, fetchVerified, openRuntimeCache, readManifest } from "./ragspine-files.mjs";
import { countStored, forget, ingest, restoreDocuments } from "./ragspine-documents.mjs";

// The full engine's modules (Pyodide, the model, its searches), loaded when its boot starts:
// the instant lane needs none of them, so a first answer waits for fewer files.
let M = null;
async function fullModules() {
  const loaded = await Promise.all([
    import("./ragspine-boot.mjs"), import("./ragspine-embed.mjs"), import("./ragspine-query.mjs"),
  ]);
  M = Object.assign({}, ...loaded);
}

// The open full engine: {py, searcher, dispatch, call, manifest, bundleURL, files, idb, timings, ...}.
let state = null;
let openError = null;
let queue = Promise.resolve();
// The full engine (Pyodide): {start(), ready, dense}; `instant` answers plain BM25 searches
// until it is ready (ragspine-instant.mjs: {lane, pageDocuments, files}), on a hybrid bundle
// too (what Python answers in "bm25" mode). `dense`: the model joining the full engine.
let engine = null;
let instant = null;
// Python runs one job at a time: a request on the full engine, or the model joining it
// (which waits for the request in progress, and the next request for it).
let python = Promise.resolve();
const NOTHING_PREFETCHED = Object.freeze({ paths: [], files: [], rounds: 0, ms: 0 });

function withPython(work) {
  const run = python.then(work);
  python = run.catch(() => {});
  return run;
}
// With an instant lane, the full engine's downloads and boot start once the lane has been
// idle this long (since open or its last answer), or when something needs the full engine:
// the downloads would compete for the link, and the boot holds this thread, so a visitor
// still typing would wait seconds for the next answer.
const BOOT_IDLE_MS = 1000;
let bootTimer = 0;

function bootWhenIdle() {
  clearTimeout(bootTimer);
  bootTimer = setTimeout(() => engine && engine.start(), BOOT_IDLE_MS);
}

// manifest.json's text and the index header ({path, bytes}), fetched by the page's thread
// while this worker's modules loaded (ragspine-lite.mjs posts them, null when it could not):
// an open({early: true}) reads them instead of two round trips of its own.
function handedOver() {
  let resolve;
  const promise = new Promise((done) => { resolve = done; });
  return { promise, resolve };
}
const handed = { manifest: handedOver(), header: handedOver() };

self.onmessage = (event) => {
  const { id, op, args } = event.data || {};
  if (op === "early") {
    for (const [name, value] of Object.entries(args || {})) if (handed[name]) handed[name].resolve(value);
    return;
  }
  const run = () => handle(op, args || {}).then(
    (result) => post({ type: "reply", id, ok: true, result }),
    (err) => post({ type: "reply", id, ok: false, error: describe(err) }),
  );
  // One request at a time, in arrival order: Python runs on this single thread anyway. Waiting
  // for an engine ("ready", "dense") runs no Python and holds no other request.
  if (op === "ready" || op === "dense") run();
  else queue = queue.then(run);
};

self.addEventListener("unhandledrejection", (event) => {
  event.preventDefault();
  log("error", `unhandled failure in the search worker: ${describe(event.reason).message}`);
});

// ------------------------------------------------------------------ requests

async function handle(op, args) {
  if (op === "open") return open(args);
  if (op === "close") return close();
  if (!engine) {
    throw new BundleError(
      openError ? `the search runtime failed to open: ${openError}` : "the search runtime is not open",
    );
  }
  if (op === "ready") return fullEngine();
  if (op === "dense") return denseEngine();
  if (!engine.ready && instant) {
    const plain = declines(args, instant) === null;
    if (op === "search" && plain) {
      clearTimeout(bootTimer);
      try {
        return await instantSearch(args);
      } catch (err) { // e.g. a rebuilt site's gone file: the full engine retries on the new index
        log("warn", `the instant lane could not answer (${describe(err).message}); the full engine will`);
      } finally {
        bootWhenIdle();
      }
    }
    if (op === "prefetch" && plain) {
      clearTimeout(bootTimer);
      try {
        return await instantPrefetch(args);
      } finally {
        bootWhenIdle();
      }
    }
    if (op === "prefetch") return NOTHING_PREFETCHED;
  }
  await fullEngine();
  if (op === "prefetch" && args.mode === "hybrid" && joining()) return NOTHING_PREFETCHED;
  if (needsModel(op, args)) await denseEngine();
  return withPython(() => engineOp(op, args));
}

// Whether the bundle's model is still on its way to the full engine.
const joining = () => Boolean(state && state.model && !state.joined);

// Whether `op` waits for the model to join: an explicit hybrid search, the model itself, and
// the visitor's documents (restored, and embedded, once it is in). Everything else the full
// engine answers at once, a search in "bm25" mode (the default mode's answer until then).
function needsModel(op, args) {
  if (!joining()) return false;
  const stored = Boolean(instant && instant.pageDocuments);
  if (op === "search") return args.mode === "hybrid" || stored;
  if (op === "stats") return stored;
  return !["prefetch", "configure", "configure_llm"].includes(op);
}

// `op` on the full engine.
async function engineOp(op, args) {
  switch (op) {
    case "search":
      return M.searchOrRetry(state, args);
    case "prefetch":
      return M.prefetch(state, args);
    case "embed":
      return M.embedTexts(state, args.texts);
    case "configure":
      // A remote reranker is reached from Python (sync XHR in this worker, or fetch via JSPI).
      return state.call("configure", {
        reranker: args.reranker ?? "none", url: args.url ?? null, token: args.token ?? null,
        timeout: args.timeout ?? null, check: args.check !== false,
      });
    case "configure_llm":
      // The LLM query layers call the endpoint's /v1/chat from Python, like the reranker.
      return state.call("configure_llm", {
        url: args.url ?? null, token: args.token ?? null, timeout: args.timeout ?? null,
        transform: args.transform ?? "none", decompose: args.decompose ?? "none",
        adaptive: args.adaptive ?? "none", check: args.check !== false,
      });
    case "ingest":
      return ingest(state, args.docs || []);
    case "forget":
      return forget(state, args.docIds ?? null);
    case "documents":
      return state.call("documents");
    case "stats":
      return {
        ...state.call("stats"), timings: state.timings, persistence: Boolean(state.idb), manifest: state.manifest,
        files: state.files.totals,
      };
    default:
      throw new BundleError(`unknown operation ${JSON.stringify(op)}`);
  }
}

// ------------------------------------------------------------------ the instant lane

// The lane over the bundle's header (null: it cannot read it). On a hybrid bundle it answers
// what the Python path answers in "bm25" mode, until the full engine is up. A visitor with
// stored documents gets the full engine's answers only.
async function openInstant(prepared) {
  const entry = prepared.manifest.entry;
  try {
    const lane = await InstantLane.open((path) => (path === entry.index ? prepared.header : prepared.files.fetch(path)), entry.index);
    const pageDocuments = await prepared.stored;
    prepared.timings.instant = Math.round(performance.now() - prepared.t0);
    return { lane, pageDocuments, files: prepared.files };
  } catch (err) {
    log("warn", `searches wait for the full engine: the instant lane could not open (${describe(err).message})`);
    return null;
  }
}

async function instantSearch(args) {
  const result = await instant.lane.search(args.query, { topK: args.topK ?? DEFAULT_TOP_K, highlight: args.highlight !== false });
  return withFiles({ ...result, worker: { lane: "instant" } }, instant.files.report());
}

async function instantPrefetch({ query = "", topK = DEFAULT_TOP_K } = {}) {
  const started = performance.now();
  const paths = typeof query === "string" && query.trim() ? await instant.lane.prefetch(query, topK) : [];
  const files = instant.files.report();
  instant.files.totals.prefetched += files.length;
  return { paths, files, rounds: paths.length ? 2 : 0, ms: Math.round((performance.now() - started) * 100) / 100 };
}

// ------------------------------------------------------------------ open / close

async function open({
  bundle, formatVersion, embeddings = true, jspi = true, cache = true, install = "unpack", snapshot = true,
  instant: withInstant = true, early = false,
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
    const options = { embeddings, jspi, cache, install, snapshot, early };
    const prepared = await prepare(bundle, options);
    instant = withInstant ? await openInstant(prepared) : null;
    engine = deferredBoot(prepared, options);
    if (!instant) return await denseEngine(); // everything, as one step
    bootWhenIdle();
    return {
      engine: "instant", dense: hasModel(prepared.manifest, options) ? "loading" : "none", manifest: prepared.manifest,
      timings: prepared.timings, persistence: null, restored: 0, restoreErrors: [], versions: null, embeddings: null,
      embeddingsError: null, cache: null,
    };
  } catch (err) {
    openError = describe(err).message;
    engine = null;
    instant = null;
    stopTracking();
    throw err;
  }
}

const hasModel = (manifest, options) => Boolean(manifest.entry.embeddings && options.embeddings !== false);

// The Pyodide boot, started once (engine.start()); then, on a hybrid bundle, the model
// joining it (engine.dense, a promise).
function deferredBoot(prepared, options) {
  let run = null;
  const boot = {
    ready: false,
    dense: null,
    start() {
      if (!run) {
        run = bootFrom(prepared, options).then((opened) => {
          boot.dense = opened.model ? joinModel(opened) : Promise.resolve();
          boot.dense.catch(() => {});
          boot.ready = true;
        });
      }
      return run;
    },
  };
  return boot;
}

// The full engine's info once Pyodide is up (its boot starts now if it had not).
async function fullEngine() {
  await engine.start();
  return engineInfo(state);
}

// The engine's info once the bundle's model joined it (or failed to; at once without one).
async function denseEngine() {
  await engine.start();
  await engine.dense;
  return engineInfo(state);
}

async function bootFrom(prepared, options) {
  try {
    const opened = await boot(prepared, options);
    openError = null;
    const info = engineInfo(opened);
    post({ type: "engine", engine: info.engine, info });
    return opened;
  } catch (err) {
    openError = describe(err).message;
    stopTracking();
    if (instant) {
      log("error", `the full search engine failed to start (plain searches still work): ${openError}`);
      post({ type: "engine", engine: "failed", error: describe(err) });
    }
    throw new BundleError(`the search runtime failed to open: ${openError}`, describe(err).name);
  }
}

// The model's state: "none" (a BM25 bundle, or embeddings: false), "loading", "ready", "failed".
function denseState(opened) {
  if (!opened.model) return "none";
  if (opened.embeddings) return "ready";
  return opened.embeddingsError ? "failed" : "loading";
}

// What open() (or the "engine" message) says about the full engine.
function engineInfo(opened) {
  const emb = opened.embeddings;
  return {
    engine: emb ? "hybrid" : "full",
    dense: denseState(opened),
    manifest: opened.manifest,
    timings: opened.timings,
    persistence: Boolean(opened.idb),
    restored: opened.restored,
    restoreErrors: opened.restoreErrors,
    versions: opened.versions,
    embeddings: emb ? { name: emb.name, modelId: emb.modelId, dim: emb.dim, jspi: emb.jspi, loadMs: emb.loadMs } : null,
    embeddingsError: opened.embeddingsError,
    cache: opened.cache,
  };
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
  const stored = countStored(bundleURL); // the visitor's documents (IndexedDB), meanwhile
  const manifest = await readManifest(bundleURL, options.early ? await handed.manifest.promise : null);
  mark("manifest", t0);
  const { cache, reason } = await openRuntimeCache(bundleURL, options.cache !== false);
  if (!cache) log(options.cache === false ? "info" : "warn", `runtime files come from the network: ${reason}`);
  const files = new BundleFiles(manifest, bundleURL, cache);
  const origin = { header: null }; // where the header came from, for the runtime cache's report
  const path = manifest.entry.index;
  const header = (options.early ? handed.header.promise : Promise.resolve(null)).then((early) => {
    const given = early && early.path === path ? new Uint8Array(early.bytes) : null;
    return files.fetch(path, { counted: false, given, source: (from) => { origin.header = from; } });
  });
  header.catch(() => {});
  return { t0, timings, mark, bundleURL, manifest, cache, files, header, origin, stored };
}

// The files a boot downloads (counted for `overall`, served from the runtime cache).
function bootDownloads(entry, withModel, withMicropip, paths) {
  const model = withModel ? [entry.embeddings.model, entry.embeddings.vocab, entry.embeddings.config] : [];
  return paths.filter((path) =>
    path === entry.index || path.startsWith(entry.pyodide) || path === entry.wheels.ragspine_lite ||
    (withMicropip && path === entry.wheels.micropip) ||
    model.includes(path) ||
    (withModel && entry.embeddings.ort && path.startsWith(entry.embeddings.ort.dir)) ||
    (withModel && M.isVectorShard(path)));
}

async function boot(prepared, options = {}) {
  const { manifest, bundleURL, cache } = prepared;
  const entry = manifest.entry;
  if (!M) await fullModules();
  const withModel = hasModel(manifest, options);
  const downloads = bootDownloads(entry, withModel, options.install === "micropip", Object.keys(manifest.files || {}));
  trackBytes(manifest, bundleURL, downloads);
  credit(bundleURL + entry.index, manifest.files[entry.index].bytes); // read by prepare()
  const cached = new RuntimeCache(cache, manifest, bundleURL, downloads);
  // prepare() read the header before the cache hook was in place: report it the same way.
  if (cache) {
    prepared.header.then(() => {
      cached.stats[prepared.origin.header === "cache" ? "cached" : "fetched"].push(entry.index);
    }, () => {});
  }
  try {
    return await bootPython(prepared, cached, { ...options, withModel });
  } catch (err) {
    cached.restore();
    throw err;
  }
}

// The full engine's steps: the wheel's download, Pyodide, the install, the index (BM25); on
// a BM25 bundle the visitor's documents too. On a hybrid bundle the model, onnxruntime-web
// and the chunk vectors start downloading once Python is up (opened.model; joinModel() adds
// them). Returns the engine's state.
async function bootPython(prepared, cached, options) {
  const { t0, timings, mark, manifest, bundleURL } = prepared;
  let t = performance.now();
  const fetchChecked = (path, what, phase) => fetchVerified(manifest, bundleURL, path, what, phase);
  const wheel = fetchChecked(manifest.entry.wheels.ragspine_lite, "the ragspine_lite wheel", null);
  wheel.catch(() => {});

  progress("boot", "Starting Python (Pyodide)");
  const python = await M.startPyodide(manifest, bundleURL, cached, options.snapshot !== false);
  const py = python.py;
  cached.stats.snapshot = python.restored ? "restored" : python.key ? "taken" : "none";
  t = mark("boot", t);
  timings.bootEndedAt = performance.timeOrigin + performance.now(); // epoch ms, for benchmarks
  const model = options.withModel ? startModel(manifest, bundleURL, fetchChecked, options.jspi) : null;

  progress("install", "Installing ragspine_lite");
  await M.installRagspine(py, manifest, bundleURL, await wheel, options.install);
  if (python.key && !python.restored) M.takeSnapshot(py, cached, python.key);
  t = mark("install", t);

  progress("index", "Opening the search index");
  const opened = await openIndex(py, prepared);
  mark("index", t);
  Object.assign(opened, {
    manifest, bundleURL, timings, t0, cached, model, joined: !model, embeddings: null, embeddingsError: null,
    vectorScanner: null, idb: null, restored: 0, restoreErrors: [], runtimeCache: prepared.cache,
  });
  state = opened; // close() can release it from here on
  if (!model) await finishBoot(opened);
  return opened;
}

// The model and the chunk vectors, fetched and checked: {model, vectors, started}.
function startModel(manifest, bundleURL, fetchChecked, jspi) {
  // JSPI (WebAssembly.Suspending): Python can then block on onnxruntime-web's promises.
  const useJspi = jspi !== false && typeof WebAssembly.Suspending === "function";
  const model = M.loadModel(manifest, bundleURL, fetchChecked, useJspi);
  model.catch(() => {});
  // A hybrid search scans every chunk vector (a large bundle: its coarse centroids, the lists
  // come by need): their shards download with the model.
  const vectors = M.fetchVectors(manifest, fetchChecked);
  for (const bytes of vectors.values()) bytes.catch(() => {});
  return { model, vectors, started: performance.now() };
}

// The boot's last steps, once the engine has all it will have: the visitor's documents, the
// runtime cache settled, "ready".
async function finishBoot(opened) {
  const t = performance.now();
  await restoreDocuments(opened);
  opened.timings.restore = Math.round(performance.now() - t);
  opened.timings.total = Math.round(performance.now() - opened.t0);
  const indexPaths = opened.searcher.index_paths();
  opened.cache = await opened.cached.settle(indexPaths.toJs());
  indexPaths.destroy();
  opened.cached.restore();
  progress("ready", "Ready");
  stopTracking();
}

// The bundle's model joins the full engine, between two requests: from then on its default
// searches are hybrid. A model that cannot load or join leaves it BM25 (embeddingsError).
async function joinModel(opened) {
  const { embeddings, embeddingsError } = await modelStep(opened.py, opened.model.model);
  await withPython(async () => {
    if (embeddings) await attachModel(opened, embeddings);
    else opened.embeddingsError = embeddingsError;
    opened.timings.model = Math.round(performance.now() - opened.model.started);
    await finishBoot(opened);
    opened.joined = true;
  });
  const info = engineInfo(opened);
  post({ type: "engine", engine: info.engine, info });
}

async function attachModel(opened, embeddings) {
  try {
    if (!M.useModel(opened.py, opened.searcher, embeddings)) throw new BundleError("the bundle has no vectors");
  } catch (err) {
    opened.embeddingsError = describe(err).message;
    log("warn", `the embedding model could not join, searching with BM25 only: ${opened.embeddingsError}`);
    return;
  }
  opened.embeddings = embeddings;
  try {
    opened.vectorScanner = await M.useDenseScanner(opened.py, opened.searcher, opened.model.vectors, opened.files);
  } catch (err) {
    log("warn", `the chunk vectors are scanned in Python instead of JavaScript: ${describe(err).message}`);
  }
  // The model's first run is slow (compilation): warm it with a query vector, no search.
  await M.semanticCall(opened, "embed", { texts: ["warm up"] }, { texts: ["warm up"] })
    .catch((err) => log("warn", `the embedding model failed its first run: ${describe(err).message}`));
}

// The embedding model (null without one) with its vocabulary in Pyodide's file system; a
// model that fails to load leaves search BM25-only and says why (embeddingsError).
async function modelStep(py, model) {
  if (!model) return { embeddings: null, embeddingsError: null };
  progress("model", "Loading the embedding model (onnxruntime-web)");
  let embeddings;
  try {
    embeddings = await model;
  } catch (err) {
    const embeddingsError = describe(err).message;
    log("warn", `the embedding model could not be loaded, searching with BM25 only: ${embeddingsError}`);
    return { embeddings: null, embeddingsError };
  }
  py.FS.mkdirTree("/bundle/model");
  embeddings.vocabPath = `/bundle/model/${embeddings.vocabName}`;
  py.FS.writeFile(embeddings.vocabPath, embeddings.vocab);
  embeddings.vocab = null;
  return { embeddings, embeddingsError: null };
}

// The searcher over the header (BM25; the model joins later), warmed up.
async function openIndex(py, prepared) {
  const { files, manifest } = prepared;
  const entry = manifest.entry;
  files.held.set(entry.index, await prepared.header);
  const searcher = M.openSearcher(py, files, entry.index);
  const dispatch = searcher.dispatch;
  const versions = M.versionsOf(py);
  // The first query's imports and caches (tokenizer, glossary), without reading a shard.
  dispatch("files_for", JSON.stringify({ query: "warm up" }));
  const call = (op, args = {}) => JSON.parse(dispatch(op, JSON.stringify(args)));
  return { py, searcher, dispatch, call, files, versions };
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
