// The search worker's embeddings: the bundle's ONNX model run by onnxruntime-web, Python
// calls that embed text (with or without JSPI), and the JS scanner of the chunk vectors.

import { CoarseScanner, DenseScanner } from "./ragspine-dense.mjs";
import { BundleError, describe, log } from "./ragspine-messages.mjs";

const VECTORS_DIR = "data/vectors/"; // the int8 vector shards of a hybrid bundle
const EMBED_SLICE = 256; // texts per embed call (below the backend's primed-vector cache)

// ------------------------------------------------------------------ the model

// The bundle's model, loaded: {name, modelId, dim, vocab, config, run, ...}. `fetchChecked(path,
// what, phase)` fetches a manifest file, checked.
export async function loadModel(manifest, bundleURL, fetchChecked, useJspi) {
  const spec = manifest.entry.embeddings;
  checkSpec(spec);
  const started = performance.now();
  const [modelBytes, vocab, configBytes] = await Promise.all([
    fetchChecked(spec.model, `the ${spec.name || "embedding"} model`, "model"),
    fetchChecked(spec.vocab, "the model vocabulary", null),
    fetchChecked(spec.config, "the model config", null),
  ]);
  const ort = await importOrt(bundleURL, spec);
  let session;
  try {
    session = await ort.InferenceSession.create(modelBytes, { executionProviders: ["wasm"] });
  } catch (err) {
    throw new BundleError(`onnxruntime-web could not load ${spec.model}: ${describe(err).message}`);
  }
  const config = JSON.parse(new TextDecoder().decode(configBytes));
  const run = modelRunner(ort, session, config.output || session.outputNames[0]);
  return {
    name: spec.name || "embeddings", modelId: spec.model_id, dim: spec.dim, vocab, config, run,
    vocabName: spec.vocab.split("/").pop(), jspi: useJspi, loadMs: Math.round(performance.now() - started),
  };
}

function checkSpec(spec) {
  for (const key of ["model", "vocab", "config"]) {
    if (typeof spec[key] !== "string") throw new BundleError(`manifest.json lacks entry.embeddings.${key}: rebuild the bundle`);
  }
  if (!spec.ort || typeof spec.ort.module !== "string" || typeof spec.ort.dir !== "string") {
    throw new BundleError("manifest.json lacks entry.embeddings.ort: rebuild the bundle");
  }
}

async function importOrt(bundleURL, spec) {
  const moduleURL = bundleURL + spec.ort.module;
  let ort;
  try {
    ort = await import(moduleURL);
  } catch (err) {
    throw new BundleError(`could not load onnxruntime-web from ${moduleURL}: ${describe(err).message}`);
  }
  ort.env.wasm.wasmPaths = bundleURL + spec.ort.dir;
  ort.env.wasm.numThreads = 1; // more threads need cross-origin isolation
  return ort;
}

// Row-major padded ids and attention mask (arrays from Python) → the model output as a
// Float32Array. One run at a time: an InferenceSession is not re-entrant.
function modelRunner(ort, session, outputName) {
  const inputs = new Set(session.inputNames);
  const int64 = (values) => BigInt64Array.from(values, (v) => BigInt(v));
  let busy = Promise.resolve();
  return (ids, mask, batch, seq) => {
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
}

// ------------------------------------------------------------------ Python calls that embed

// The embed operation: the vectors of `texts` (strings), a slice at a time.
export async function embedTexts(state, given) {
  if (!state.embeddings) throw new BundleError("this bundle has no embedding model (build it with --embeddings minilm)");
  const texts = Array.from(given || [], String);
  const vectors = [];
  for (let i = 0; i < texts.length || i === 0; i += EMBED_SLICE) {
    const part = texts.slice(i, i + EMBED_SLICE); // the no-JSPI cache holds DEFAULT_PRIMED_VECTORS
    vectors.push(...(await semanticCall(state, "embed", { texts: part }, { texts: part })).vectors);
  }
  return { vectors };
}

// A Python call that may embed text. With JSPI, Python awaits onnxruntime-web itself
// (run_sync inside callPromising); without it, the texts to embed are asked for first, run
// here, and handed to Python before the (synchronous) call.
export async function semanticCall(state, op, args, planArgs) {
  const emb = state.embeddings;
  if (!emb) return state.call(op, args);
  const started = performance.now();
  if (emb.jspi) {
    const result = JSON.parse(await state.dispatch.callPromising(op, JSON.stringify(args)));
    return withTiming(result, { path: "jspi", totalMs: performance.now() - started });
  }
  const modelMs = await primeEmbeddings(state, op, planArgs);
  const result = state.call(op, args);
  return withTiming(result, { path: "primed", modelMs, totalMs: performance.now() - started });
}

// Python hands out the texts to embed a batch at a time (bounded model memory). If the
// model fails, a search goes on without the vectors: Python then falls back to BM25 and
// says so (semantic.channel "bm25:embedding-failed"), an ingested document stays BM25-only
// (its embedding_error says why); an explicit embed() fails. Returns the model's time (ms).
async function primeEmbeddings(state, op, planArgs) {
  let modelMs = 0;
  let last = null;
  for (let plan = state.call("embed_plan", planArgs); plan.texts.length; plan = state.call("embed_plan", planArgs)) {
    if (plan.texts[0] === last) throw new BundleError("the embedding cache did not keep the vectors it was given");
    last = plan.texts[0];
    const t = performance.now();
    let output;
    try {
      output = await state.embeddings.run(plan.ids, plan.mask, plan.batch, plan.seq);
    } catch (err) {
      if (op !== "search" && op !== "ingest") throw err;
      log("warn", `the embedding model failed (${describe(err).message}); using BM25 only`);
      break;
    }
    modelMs += performance.now() - t;
    state.searcher.prime_embeddings(JSON.stringify(plan.texts), output);
  }
  return modelMs;
}

// The query vectors a search for `query` (in `mode`) will embed, computed now and handed to
// Python (the search then reads them from its embedding cache). Throws if the model fails.
export async function primeQuery(state, { query, mode = null }) {
  if (state.embeddings) await primeEmbeddings(state, "prefetch", { query, mode });
}

function withTiming(result, timing) {
  if (result && typeof result === "object" && !Array.isArray(result)) {
    result.worker = { ...timing, totalMs: Math.round(timing.totalMs * 100) / 100 };
  }
  return result;
}

// ------------------------------------------------------------------ the chunk vectors

// The vector shards' downloads, started now: path → promise of the checked bytes.
export function fetchVectors(manifest, fetchChecked) {
  const vectors = new Map();
  for (const path of Object.keys(manifest.files).filter((p) => p.startsWith(VECTORS_DIR))) {
    vectors.set(path, fetchChecked(path, "the chunk vectors", null));
  }
  return vectors;
}

// Whether `path` is one of the vector shards (a hybrid boot downloads them with the model).
export const isVectorShard = (path) => path.startsWith(VECTORS_DIR);

// A hybrid bundle's chunk vectors, scanned in JavaScript (ragspine-dense.mjs: one Int8Array,
// Int32 sums): Python's dense lane is handed the scanner (JsDenseScanner); same integers. A
// large bundle's coarse lists are read when a query probes them (the centroids came at boot),
// fetched ahead of the scan in two parallel rounds when Python can await (JSPI), or while the
// visitor types (ragspine-query.mjs). Returns that coarse scanner (null: the exact one).
export async function useDenseScanner(py, searcher, vectors, files) {
  const info = JSON.parse(searcher.dispatch("vector_shards", "{}"));
  if (!info.shards && !info.lists) return;
  const ahead = (path) => vectors.get(path) || Promise.reject(
    new BundleError(`manifest.json does not list ${path}: rebuild the bundle`));
  let scanner;
  if (info.lists) {
    files.held.set(info.centroids, await ahead(info.centroids));
    await files.learnCached(); // a question's lists and blocks not cached leave at once (begin)
    // Python's JsDenseScanner starts a query's lists once its vector exists (`begin`: they
    // come while Python ranks BM25), then awaits `prefetch` under JSPI: the blocks of its best
    // BM25 hits' rows (the block directory names them) with the lists, then the query's blocks,
    // each round fetched together, not one file after the other.
    scanner = new CoarseScanner(info, (path) => files.reader.read(path), undefined, undefined,
      (path) => files.fetch(path));
    scanner.directoryAhead().catch((err) => log("warn", `the block directory of the vectors: ${describe(err).message}`));
  } else {
    scanner = await DenseScanner.load(info, ahead);
  }
  const dense = py.pyimport("ragspine_lite.bundle.dense");
  const adapter = dense.JsDenseScanner(scanner.prefetch ? awaitedAsWaiting(scanner, files) : scanner);
  try {
    searcher.use_scanner(adapter);
  } finally {
    adapter.destroy();
    dense.destroy();
  }
  return scanner.prefetch ? scanner : null;
}

// The coarse scanner as Python sees it: the same calls, the time it awaits `prefetch` counted
// as the request's wait for files.
function awaitedAsWaiting(scanner, files) {
  return {
    begin: (query) => scanner.begin(query),
    prefetch: (...args) => files.waiting(scanner.prefetch(...args)),
    scan: (...args) => scanner.scan(...args),
    dots: (...args) => scanner.dots(...args),
  };
}
