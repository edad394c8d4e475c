// ragspine_lite in the browser: the public ES-module API.
//
//   import { RagSpineLite } from "./ragspine-lite.mjs";
//   const rs = await RagSpineLite.open({ bundle: "./", onProgress: (p) => console.log(p) });
//   const results = await rs.search("how to install", { filters: { language: "en" }, topK: 5 });
//
// A bundle built with `--embeddings minilm` is searched hybrid (BM25 + MiniLM → RRF) by
// default once its model is in; pass { mode: "bm25" } to a search for BM25 alone.
//
// Everything runs in a module Web Worker (ragspine-worker.mjs, next to this file): Pyodide,
// the ragspine_lite wheel and the bundle's index. open() resolves as soon as the worker's
// instant lane (ragspine-instant.mjs: the index read in JavaScript) can answer: plain BM25
// searches (no filters, no page documents, no reranker, LLM layers or postprocessing) get
// exactly the Python path's results from it while Pyodide boots in the background; anything
// else waits for the full engine (`await rs.fullEngine()`). On a hybrid bundle the model
// joins after that: until then a search in the default mode is answered with BM25 (its
// `mode` says so), and `await rs.denseReady()` waits for it. `rs.engine` says which is up
// ("instant", "full", "hybrid"); the "engine" event says when it changes.
// Opening downloads only the manifest and the index header; a
// search fetches the term shards and text fragments it needs (call prefetch(query) while the
// visitor types to have them before the search runs). Results are the snippet dicts of
// Python's agent link (text, doc_id, title, source_locator, chunk_id, metadata, sensitivity,
// scores) plus library_id ("bundle" or "page"). Types: ragspine-lite.d.ts.

import { DEFAULT_TOP_K, FORMAT_VERSION, PREFETCH_OPTIONS, RRF_K, SEARCH_DEFAULTS, VERSION } from "./ragspine-contract.mjs";

// The bundle format this runtime reads (= manifest.format_version), the package version and
// RRF's k, as Python declares them (ragspine-contract.mjs is generated from it).
export { FORMAT_VERSION, RRF_K, VERSION };
const DEFAULT_OPEN_TIMEOUT_MS = 180000;
const ENGINE_RANK = { instant: 0, full: 1, hybrid: 2 };

/** An error from the search runtime; `phase` says where it happened when known. */
export class RagSpineLiteError extends Error {
  constructor(message, { name = "RagSpineLiteError", phase = undefined } = {}) {
    super(message);
    this.name = name === "Error" ? "RagSpineLiteError" : name;
    this.phase = phase;
  }
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

// `given` over the defaults of the options `names` (an undefined value keeps the default);
// a name that is not an option is refused, named.
function withDefaults(given, names = Object.keys(SEARCH_DEFAULTS)) {
  const out = {};
  for (const name of names) out[name] = SEARCH_DEFAULTS[name];
  for (const [name, value] of Object.entries(given ?? {})) {
    if (!names.includes(name)) {
      throw new RagSpineLiteError(`unknown search option ${JSON.stringify(name)}; valid options: ${names.join(", ")}`);
    }
    if (value !== undefined) out[name] = value;
  }
  return out;
}

async function toDocument(doc, index) {
  if (typeof Blob !== "undefined" && doc instanceof Blob) {
    const name = doc.name || `document-${index + 1}.txt`;
    let text;
    try {
      text = strictUtf8.decode(await doc.arrayBuffer());
    } catch {
      throw new RagSpineLiteError(`${name} is not valid UTF-8 text`);
    }
    return { name, text };
  }
  if (doc && typeof doc === "object" && typeof doc.name === "string" && typeof doc.text === "string") {
    return { name: doc.name, text: doc.text };
  }
  throw new RagSpineLiteError(`document ${index + 1} must be a File or {name, text}`);
}

function bundleURLOf(bundle) {
  const base = globalThis.location ? globalThis.location.href : import.meta.url;
  let url = new URL(bundle || "./", base).href;
  if (!url.endsWith("/")) url += "/";
  return url;
}

// manifest.json, then the index header, fetched here while the worker's modules load (two
// round trips fewer before the first answer) and posted to it; the worker checks them as if it
// had fetched them, and fetches what did not come (null). A header the worker's runtime cache
// holds (a return visit) is left to it.
async function fetchEarly(worker, bundleURL, cache) {
  const post = (args, transfer = []) => worker.postMessage({ op: "early", args }, transfer);
  let manifest = null;
  try {
    const response = await fetch(bundleURL + "manifest.json", { cache: "no-cache" });
    if (response.ok) manifest = await response.text();
  } catch {
    // the worker fetches it and says what failed
  }
  post({ manifest });
  let header = null;
  try {
    const path = JSON.parse(manifest).entry.index;
    const kept = cache && globalThis.caches && (await (await caches.open(`ragspine-lite:${bundleURL}`)).match(bundleURL + path));
    const response = kept ? null : await fetch(bundleURL + path);
    if (response && response.ok) header = { path, bytes: await response.arrayBuffer() };
  } catch {
    header = null;
  }
  post({ header }, header ? [header.bytes] : []);
}

export class RagSpineLite extends EventTarget {
  /**
   * Start the worker, boot Pyodide, install ragspine_lite and open the bundle.
   * Rejects with a RagSpineLiteError that says what failed to load.
   */
  static async open({
    bundle = "./",
    onProgress = null,
    onLog = null,
    workerURL = null,
    timeoutMs = DEFAULT_OPEN_TIMEOUT_MS,
    embeddings = true,
    jspi = true,
    cache = true,
    install = "unpack",
    snapshot = true,
    instant = true,
  } = {}) {
    const url = workerURL ? new URL(workerURL, bundleURLOf("./")) : new URL("./ragspine-worker.mjs", import.meta.url);
    let worker;
    try {
      worker = new Worker(url, { type: "module", name: "ragspine-lite" });
    } catch (err) {
      throw new RagSpineLiteError(`could not start the search worker ${url}: ${err && err.message ? err.message : err}`, { phase: "worker" });
    }
    const rs = new RagSpineLite(worker, { onProgress, onLog, workerURL: String(url) });
    rs.#timeoutMs = timeoutMs;
    const bundleURL = bundleURLOf(bundle);
    try {
      const opening = rs.#call(
        "open", { bundle: bundleURL, formatVersion: FORMAT_VERSION, embeddings, jspi, cache, install, snapshot, instant, early: true },
        timeoutMs,
      );
      fetchEarly(worker, bundleURL, cache);
      const info = await opening;
      rs.manifest = info.manifest;
      rs.#engineUp(info);
      return rs;
    } catch (err) {
      rs.close();
      throw err;
    }
  }

  #worker;
  #pending = new Map();
  #nextId = 1;
  #closed = false;
  #failure = null;
  #phase = "worker";
  #onProgress;
  #onLog;
  #timeoutMs = 0;
  #full = null; // the full engine's latest info, once ready

  constructor(worker, { onProgress, onLog, workerURL }) {
    super();
    this.#worker = worker;
    this.#onProgress = onProgress;
    this.#onLog = onLog;
    /** The bundle's manifest.json (after open). */
    this.manifest = null;
    /** What open() reported: timings, versions, persistence, restored documents. */
    this.info = null;
    worker.addEventListener("message", (event) => this.#receive(event.data));
    worker.addEventListener("error", (event) => {
      event.preventDefault();
      const detail = event.message || `could not load ${workerURL} (missing file or wrong MIME type?)`;
      this.#fail(new RagSpineLiteError(`the search worker failed: ${detail}`, { phase: this.#phase }));
    });
    worker.addEventListener("messageerror", () => {
      this.#fail(new RagSpineLiteError("the search worker sent a message that could not be read"));
    });
  }

  #receive(message) {
    if (!message || typeof message !== "object") return;
    if (message.type === "progress") {
      this.#phase = message.phase;
      if (this.#onProgress) {
        try {
          this.#onProgress({
            phase: message.phase, message: message.message, loaded: message.loaded, total: message.total,
            overall: message.overall,
          });
        } catch {
          // a failing progress callback must not break the runtime
        }
      }
      return;
    }
    if (message.type === "engine") {
      if (message.info) this.#engineUp(message.info);
      else this.#engineFailed(message.error);
      return;
    }
    if (message.type === "log") {
      if (this.#onLog) this.#onLog(message.level, message.message);
      else if (message.level === "error") console.error(`ragspine-lite: ${message.message}`);
      else if (message.level === "warn") console.warn(`ragspine-lite: ${message.message}`);
      return;
    }
    if (message.type === "reply") {
      const waiter = this.#pending.get(message.id);
      if (!waiter) return;
      this.#pending.delete(message.id);
      clearTimeout(waiter.timer);
      if (message.ok) waiter.resolve(message.result);
      else {
        const { name, message: text } = message.error || {};
        waiter.reject(new RagSpineLiteError(text || "unknown error in the search worker", { name, phase: waiter.op === "open" ? this.#phase : waiter.op }));
      }
    }
  }

  #fail(error) {
    if (this.#failure) return;
    this.#failure = error;
    for (const waiter of this.#pending.values()) {
      clearTimeout(waiter.timer);
      waiter.reject(error);
    }
    this.#pending.clear();
  }

  #call(op, args = {}, timeoutMs = 0) {
    if (this.#closed) return Promise.reject(new RagSpineLiteError("this RagSpineLite instance is closed"));
    if (this.#failure) return Promise.reject(this.#failure);
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const waiter = { resolve, reject, op, timer: 0 };
      if (timeoutMs > 0) {
        waiter.timer = setTimeout(() => {
          this.#pending.delete(id);
          reject(new RagSpineLiteError(`${op} timed out after ${Math.round(timeoutMs / 1000)} s (during ${this.#phase})`, { phase: this.#phase }));
        }, timeoutMs);
      }
      this.#pending.set(id, waiter);
      this.#worker.postMessage({ id, op, args });
    });
  }

  // A newer engine info (never back to an older engine); an "engine" event when it changed.
  #engineUp(info) {
    const before = this.info;
    if (before && ENGINE_RANK[info.engine] < ENGINE_RANK[before.engine]) return;
    this.info = info;
    if (info.engine !== "instant") this.#full = info;
    if (before && (before.engine !== info.engine || before.dense !== info.dense)) {
      this.dispatchEvent(new CustomEvent("engine", { detail: { engine: info.engine, info } }));
    }
  }

  // The full engine could not start: the instant lane goes on answering, no model will join.
  #engineFailed(error) {
    if (this.info && this.info.dense === "loading") {
      this.info = { ...this.info, dense: "failed", embeddingsError: error ? error.message : null };
    }
    this.dispatchEvent(new CustomEvent("engine", { detail: { engine: "failed", error, info: this.info } }));
  }

  /** Which engine answers now: "instant" (JavaScript) until Pyodide is up, then "full"; a
   * hybrid bundle's becomes "hybrid" once its model joined (searches default to hybrid). */
  get engine() {
    return this.info ? this.info.engine : "instant";
  }

  /** Resolves to the full engine's info once Pyodide is up (starts its boot now). */
  async fullEngine() {
    if (this.#full) return this.#full;
    const info = await this.#call("ready", {}, this.#timeoutMs);
    this.#engineUp(info);
    return this.info;
  }

  /** Resolves to the engine's info once the bundle's model joined it (engine "hybrid"), or
   * could not (info.dense "failed", info.embeddingsError); on a BM25 bundle once the full
   * engine is up. Starts the boot now. */
  async denseReady() {
    if (this.#full && this.#full.dense !== "loading") return this.#full;
    const info = await this.#call("dense", {}, this.#timeoutMs);
    this.#engineUp(info);
    return this.info;
  }

  /** Search with everything the demo page shows: hits with sections and highlight spans. */
  async searchDetailed(query, options = {}) {
    if (typeof query !== "string") throw new RagSpineLiteError(`query must be a string, got ${typeof query}`);
    const out = await this.#call("search", { query, ...withDefaults(options) });
    return {
      query,
      results: out.hits.map((hit) => hit.snippet),
      hits: out.hits,
      tookMs: out.took_ms,
      rerank: out.rerank ?? null,
      semantic: out.semantic ?? null,
      queryLayers: out.query_layers ?? null,
      worker: out.worker ?? null,
      lane: out.worker && out.worker.lane === "instant" ? "instant" : "full",
      mode: out.semantic ? out.semantic.mode : "bm25",
    };
  }

  /** Sentence vectors from the bundle's embedding model (onnxruntime-web in the worker). */
  async embed(texts) {
    const list = Array.from(texts, String);
    return (await this.#call("embed", { texts: list })).vectors;
  }

  /**
   * Rerank every later search with a remote endpoint (`ragspine-lite serve-remote`):
   * `reranker` is "cross_encoder", "colbert", "splade", "llm" (or "remote:<method>"), or
   * "none" to switch it off. Only texts of visible hits are sent (RESTRICTED never is); a
   * failing endpoint keeps the fused order. Resolves to {spec, url, enabled, models?, error?}.
   */
  async configureReranker({ reranker = "none", url = null, token = null, timeoutS = null, check = true } = {}) {
    const name = String(reranker || "none").trim();
    const spec = name === "none" || name.includes(":") ? name : `remote:${name}`;
    return this.#call("configure", { reranker: spec, url, token, timeout: timeoutS, check });
  }

  /**
   * Rewrite every later search's query with the remote endpoint's LLM (`POST /v1/chat` of
   * `ragspine-lite serve-remote` with an LLM configured): `transform` "none" | "hyde" |
   * "rag_fusion" | "step_back", `decompose` "none" | "llm", `adaptive` "none" | "heuristic" |
   * "llm". Only the query is sent, never a chunk; a failing endpoint gives the plain search.
   * No `url` switches it off. Resolves to {transform, decompose, adaptive, url, enabled,
   * models?, error?}.
   */
  async configureLLM({ url = null, token = null, timeoutS = null, transform = "none", decompose = "none", adaptive = "none", check = true } = {}) {
    return this.#call("configure_llm", { url, token, timeout: timeoutS, transform, decompose, adaptive, check });
  }

  /**
   * Fetch what a search for `query` will read (the term shards of its words and the text
   * fragments of its best `topK` BM25 results), so the search itself finds them in memory:
   * call it while the visitor types (debounced). Resolves to {paths, files, rounds, ms}: the
   * files fetched and how each was loaded (a hybrid search's fragments are not prefetched).
   */
  async prefetch(query, options = {}) {
    if (typeof query !== "string") throw new RagSpineLiteError(`query must be a string, got ${typeof query}`);
    return this.#call("prefetch", { query, ...withDefaults(options, PREFETCH_OPTIONS) });
  }

  /** Snippet objects for `query`, best first (at most `topK`). */
  async search(query, options = {}) {
    return (await this.searchDetailed(query, { ...options, highlight: false })).results;
  }

  /**
   * Add the visitor's documents (File objects or {name, text}; .txt, .md, .html).
   * They are stored in IndexedDB first (one transaction), then indexed; they come back
   * after a reload.
   */
  async ingest(docs) {
    const list = Array.isArray(docs) ? docs : docs && typeof docs.length === "number" ? Array.from(docs) : [docs];
    const prepared = [];
    for (let i = 0; i < list.length; i++) prepared.push(await toDocument(list[i], i));
    return this.#call("ingest", { docs: prepared });
  }

  /** The documents added in the page. */
  async documents() {
    return this.#call("documents");
  }

  /** Remove page documents (all of them without arguments); returns {removed}. */
  async forget(docIds = null) {
    return this.#call("forget", { docIds: docIds === null ? null : Array.from(docIds, String) });
  }

  /** Counts per library, facet values for filters, timings and the manifest. */
  async stats() {
    return this.#call("stats");
  }

  /** Stop the worker; later calls reject. */
  close() {
    if (this.#closed) return;
    this.#closed = true;
    this.#fail(new RagSpineLiteError("this RagSpineLite instance is closed"));
    this.#worker.terminate();
  }
}

/**
 * Several sites' hits in one ranking, fused exactly as Python's MultiIndexRetriever fuses
 * libraries: `sites` is [{libraryId, hits}] in search (and tie-break) order, each list best
 * first; a hit scores 1 / (k + rank) in its site's list (a chunk listed twice keeps its first
 * rank); ties go to the earlier site, then the site's own rank. Every hit comes back as a copy
 * whose snippet (and the hit) carry `library_id`; at most `topK` of them.
 */
export function fuseSites(sites, { topK = DEFAULT_TOP_K, k = RRF_K } = {}) {
  const fused = [];
  const seen = new Set();
  sites.forEach(({ libraryId, hits }, order) => {
    const id = String(libraryId);
    let rank = 0;
    hits.forEach((hit, i) => {
      const local = (hit.snippet && hit.snippet.chunk_id) || `idx${i}`;
      const key = `${String(order).padStart(6, "0")}\x1f${id}\x1f${local}`;
      if (seen.has(key)) return;
      seen.add(key);
      rank += 1;
      fused.push({ key, score: 1 / (k + rank), hit: { ...hit, library_id: id, snippet: { ...hit.snippet, library_id: id } } });
    });
  });
  // Python sorts by (-score, key); keys differ in their zero-padded site order first, so
  // comparing UTF-16 code units orders them as Python's code points do.
  fused.sort((a, b) => b.score - a.score || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return fused.slice(0, topK).map(({ hit, score }) => ({ ...hit, fused: score }));
}

export default RagSpineLite;
