// The search worker's searches on the full engine: what a query reads, fetched ahead (or while
// the visitor types), and a rebuilt site's index taken in place. `state` is the open engine
// (ragspine-worker.mjs).

import { DEFAULT_TOP_K } from "./ragspine-contract.mjs";
import { BundleError, describe, log, withFiles } from "./ragspine-messages.mjs";
import { BundleFiles, fetchVerified, readManifest } from "./ragspine-files.mjs";
import { fetchVectors, primeQuery, semanticCall, useDenseScanner } from "./ragspine-embed.mjs";

// A tab opened before the site was rebuilt asks for content-named files that are gone (404):
// the search then re-reads the manifest, takes the rebuilt index in place and runs once more;
// if that cannot be done (or fails again) it says the site was updated.
export async function searchOrRetry(state, args) {
  for (let attempt = 0; ; attempt++) {
    state.files.gone = null;
    try {
      return await search(state, args);
    } catch (err) {
      const gone = state.files.gone;
      if (!gone) throw err;
      if (attempt === 0 && (await takeRebuiltBundle(state))) continue;
      throw new BundleError(`${gone} is no longer on the site: the site was updated — reload the page`, "SiteUpdatedError");
    }
  }
}

async function search(state, args) {
  const request = {
    query: args.query, filters: args.filters ?? null, topK: args.topK ?? DEFAULT_TOP_K, highlight: args.highlight !== false,
    rerank: args.rerank !== false, queryLayers: args.queryLayers !== false,
  };
  if (args.mode) request.mode = args.mode;
  if (args.postprocess) request.postprocess = args.postprocess;
  // What the query reads, fetched together (from the cache when there) before Python
  // searches: its BM25 files (a hybrid search's vector files come with its vector, see
  // ragspine-embed.mjs); anything else it reads (the text of hits only the dense lane found,
  // an LLM's rewritten queries) is fetched as Python reads it.
  await loadFilesFor(state, { ...request, mode: "bm25" });
  state.files.waited(); // the count starts with the search
  const result = await semanticCall(state, "search", request, { query: args.query, mode: args.mode ?? null });
  return withFiles(result, state.files.report(), state.files.waited());
}


// Prefetch while typing: what a search for `query` will read, fetched now, so the search
// itself finds it in memory. Resolves to {paths, files, rounds, ms}.
export async function prefetch(state, { query = "", filters = null, topK = DEFAULT_TOP_K, mode = null } = {}) {
  const started = performance.now();
  let [paths, rounds] = [[], 0];
  if (typeof query === "string" && query.trim()) {
    // The BM25 files; then, for a hybrid search, its vector and vector files, and the text of
    // its fused hits (those of the BM25 hits are in by then).
    [paths, rounds] = await loadFilesFor(state, { query, filters, topK, mode: "bm25" });
    if (mode !== "bm25" && (await vectorsAhead(state, { query, filters, topK, mode }))) {
      const [more, asks] = await loadFilesFor(state, { query, filters, topK, mode });
      paths.push(...more);
      rounds += asks;
    }
  }
  state.files.totals.prefetched += paths.length;
  return { paths, files: state.files.report(), rounds, ms: Math.round((performance.now() - started) * 100) / 100 };
}

// What a search for `request` reads, loaded ahead: Python's `files_for` is asked until nothing
// is missing (first the term shards and the filter file, then, ranked from memory, the text
// fragments of the BM25 hits, or of the fused ones of a hybrid search whose vector is primed),
// a few rounds at most. Returns [paths, rounds].
const LOAD_ROUNDS = 3;

async function loadFilesFor(state, { query, filters = null, topK = null, mode = null }) {
  const ask = { query, filters, topK, mode };
  const paths = [];
  let rounds = 0;
  for (; rounds < LOAD_ROUNDS; rounds++) {
    const missing = state.call("files_for", ask).paths;
    if (!missing.length) break;
    paths.push(...(await loadFiles(state, missing)));
  }
  return [paths, rounds];
}

// A hybrid search's vectors, ahead: the query embedded now (the search takes the vector from
// Python's embedding cache); on a large site the coarse scanner's lists and blocks for it and
// for its best BM25 hits, each round fetched together. Returns whether the vector is primed;
// a failure leaves the rest to the search.
async function vectorsAhead(state, { query, filters, topK, mode }) {
  const scanner = state.vectorScanner;
  if (!state.embeddings) return false;
  try {
    await primeQuery(state, { query, mode });
    if (!scanner) return true; // the exact scan's vectors are all in memory
    let ahead = state.call("vectors_for", { query, filters, topK, mode });
    for (let round = 0; ahead.missing.length && round < LOAD_ROUNDS; round++) { // a length file
      await loadFiles(state, ahead.missing);
      ahead = state.call("vectors_for", { query, filters, topK, mode });
    }
    const { queries, rows } = ahead;
    await Promise.all(queries.map((codes) => scanner.prefetch(Int8Array.from(codes), rows, true)));
    return queries.length > 0;
  } catch (err) {
    log("warn", `a question's vectors were not fetched ahead: ${describe(err).message}`);
    return false;
  }
}

// Fetches `paths` together (cache first) and hands them to Python; returns the paths.
async function loadFiles(state, paths) {
  const wanted = [...new Set(paths)];
  const loaded = await Promise.all(wanted.map((path) => state.files.fetch(path)));
  for (const [i, path] of wanted.entries()) state.searcher.provide(path, loaded[i]);
  return wanted;
}

// ------------------------------------------------------------------ a rebuilt site

// The rebuilt site's index, taken in place when only the index changed (same Pyodide, wheel
// and model): page documents and settings stay. Returns whether it was taken.
async function takeRebuiltBundle(state) {
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
  const files = new BundleFiles(manifest, bundleURL, state.runtimeCache);
  try {
    files.held.set(header, await fetchVerified(manifest, bundleURL, header, "the search index header"));
    state.searcher.replace_bundle(files.reader, header);
  } catch (err) {
    log("warn", `the rebuilt site's index could not be opened: ${describe(err).message}`);
    return false;
  }
  Object.assign(state, { manifest, files });
  if (state.embeddings) {
    const vectors = fetchVectors(manifest, (path, what, phase) => fetchVerified(manifest, bundleURL, path, what, phase));
    state.vectorScanner = await useDenseScanner(state.py, state.searcher, vectors, files).catch((err) => {
      log("warn", `the chunk vectors are scanned in Python instead of JavaScript: ${describe(err).message}`);
      return null;
    });
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
