// The search worker's files: fetched and checked against manifest.json's sha256s, read
// synchronously for Python, and kept in the Cache API for return visits.

import { FORMAT_VERSION } from "./ragspine-contract.mjs";
import { BundleError, credit, describe, log, progress } from "./ragspine-messages.mjs";

// = CONTENT_NAMED_DIRS in ragspine_lite.bundle.manifest: index files the header lists, named
// `<kind>-<first 16 hex digits of their sha256>.bin` (term shards and text fragments:
// `<kind>-<slot>-<first 8>.bin`); manifest.json does not list them.
const CONTENT_NAMED_DIRS = ["data/terms/", "data/text/", "data/lists/"];

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

// The bytes at `url`; with a `phase`, streamed with progress reports.
async function fetchBytes(url, what, phase) {
  const response = await fetchOrFail(url, what);
  if (!response.body || !phase) {
    const bytes = new Uint8Array(await response.arrayBuffer());
    credit(url, bytes.length);
    return bytes;
  }
  return readStreamed(response, url, what, phase);
}

async function readStreamed(response, url, what, phase) {
  // Content-Length is only a hint for the progress bar: with Content-Encoding (gzip on many
  // static hosts) it counts compressed bytes, while the body stream yields decoded ones.
  const hint = Number(response.headers.get("content-length")) || 0;
  const reader = response.body.getReader();
  const parts = [];
  let loaded = 0;
  let lastReport = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    loaded += value.length;
    credit(url, loaded);
    if (loaded - lastReport > 256 * 1024) {
      lastReport = loaded;
      progress(phase, `Downloading ${what}`, { loaded, total: Math.max(hint, loaded) });
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
export async function fetchVerified(manifest, bundleURL, path, what, phase = null) {
  const bytes = await fetchBytes(bundleURL + path, what, phase);
  await verify(manifest, path, bytes);
  return bytes;
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

// ------------------------------------------------------------------ checking

export async function sha256Hex(bytes) {
  const digest = await crypto.subtle.digest("SHA-256", bytes);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

// The sha256 `path` must have: manifest.json's, or for a content-named index file the hex
// digits its name carries (a prefix of it). Throws for a file the bundle does not have.
function expectedSha(manifest, path) {
  const entry = manifest.files && manifest.files[path];
  if (entry) return entry.sha256;
  if (CONTENT_NAMED_DIRS.some((dir) => path.startsWith(dir))) {
    const name = /-([0-9a-f]{16}|[0-9a-f]{8})\.[a-z0-9]+$/.exec(path);
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

// A file that answered 404 and is one of the index's content-named files: a rebuild renamed it.
function isGone(path, err) {
  return err && err.status === 404 && CONTENT_NAMED_DIRS.some((dir) => path.startsWith(dir));
}

// ------------------------------------------------------------------ the manifest

// The bundle's manifest, checked. Always revalidated (never a stale HTTP-cache copy): its
// sha256s decide what the cache serves.
// `given`: its text as the page's thread fetched it (ragspine-lite.mjs, while this worker's
// modules loaded), checked the same way; null: fetched here.
export async function readManifest(bundleURL, given = null) {
  const manifestURL = bundleURL + "manifest.json";
  const text = given ?? (await (await fetchOrFail(manifestURL, "the bundle manifest", { cache: "no-cache" })).text());
  let manifest;
  try {
    manifest = JSON.parse(text);
  } catch (err) {
    throw new BundleError(`${manifestURL} is not valid JSON: ${describe(err).message}`);
  }
  checkFormat(manifest, manifestURL);
  return manifest;
}

const REBUILD = "rebuild the bundle with 'python build_wasm.py build DOCS_DIR --out DIR'";

function checkFormat(manifest, url) {
  if (!manifest || typeof manifest !== "object") {
    throw new BundleError(`${url} is not a bundle manifest (not a JSON object)`);
  }
  checkVersion(manifest.format_version, url);
  const entry = manifest.entry || {};
  for (const key of ["index", "pyodide"]) {
    if (typeof entry[key] !== "string") throw new BundleError(`manifest.json lacks entry.${key}: rebuild the bundle`);
  }
  if (!entry.wheels || !entry.wheels.micropip || !entry.wheels.ragspine_lite) {
    throw new BundleError("manifest.json lacks entry.wheels: rebuild the bundle");
  }
}

function checkVersion(found, url) {
  if (!Number.isInteger(found)) {
    throw new BundleError(`${url} has no integer format_version: ${REBUILD}`, "BundleFormatError");
  }
  if (found < FORMAT_VERSION) {
    throw new BundleError(
      `bundle format version ${found} is older than this runtime reads (${FORMAT_VERSION}): ${REBUILD}`,
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
}

// ------------------------------------------------------------------ the bundle's files
//
// Python reads the bundle (header, term shards, text fragments, vectors) through `reader.read`
// (its BundleFiles): bytes fetched ahead are handed over first, anything else comes from a
// synchronous XMLHttpRequest (allowed in workers; Python cannot await). Before a search the
// worker asks Python which files the query needs (`files_for`), fetches them together through
// the Cache API and provides them (`searcher.provide`). Python checks the sha256 in every file
// name. Every file read is added to the cache once the worker is idle (a write during a search
// slows the search's fetches), so a return visit reads them from the cache too.
// Names carry content hashes: a cached file never goes stale.

const STORE_AFTER_MS = 300; // the worker's idle time before the files read go to the cache
const STORE_HELD_BYTES = 8 << 20; // … or as much held

// The worker's side of the bundle's files: `reader` is what Python's BundleFiles wraps.
export class BundleFiles {
  #manifest;
  #bundleURL;
  #cache;
  #toStore = []; // [path, bytes, checked] read or fetched, for the cache once the worker is idle
  #storeTimer = null;
  #heldBytes = 0; // of #toStore
  #inCache = null; // the URLs the Cache API held when learnCached() asked (null: not asked)
  #loads = []; // what this request loaded: {path, bytes, from}

  constructor(manifest, bundleURL, cache) {
    this.#manifest = manifest;
    this.#bundleURL = bundleURL;
    this.#cache = cache;
    this.held = new Map(); // path → bytes fetched ahead, until Python reads them
    this.totals = { files: 0, bytes: 0, cache: 0, network: 0, sync: 0, prefetched: 0 };
    this.gone = null; // a content-named file that answered 404 (a rebuilt site)
    this.waitedMs = 0; // how long Python awaited files during the current request (waiting)
    // fetchAll(paths): their bytes fetched together (Python awaits it under JSPI).
    this.reader = {
      read: (path) => this.read(path),
      fetchAll: (paths) => this.waiting(Promise.all(Array.from(paths, (p) => this.fetch(p)))),
    };
  }

  read(path) {
    const ahead = this.held.get(path);
    if (ahead) {
      this.held.delete(path);
      return ahead;
    }
    expectedSha(this.#manifest, path); // a file of this bundle, or a clear error
    let bytes;
    try {
      bytes = syncGet(this.#bundleURL + path, path);
    } catch (err) {
      throw this.#ifGone(path, err);
    }
    this.#record(path, bytes, "sync");
    this.#keep(path, bytes, false);
    return bytes;
  }

  // Learns which URLs the Cache API holds: from then on `fetch` asks the network at once for
  // any other file (its request leaves before the caller awaits, no lookup in between).
  async learnCached() {
    if (!this.#cache || this.#inCache) return;
    try {
      this.#inCache = new Set((await this.#cache.keys()).map((request) => request.url));
    } catch (err) {
      log("warn", `the cache could not list its files: ${describe(err).message}`);
    }
  }

  // Bytes of `path`: the Cache API's copy when it has this sha256, else the network's (checked);
  // `counted: false` leaves it out of the loads a search reports (the header); `source(from)`
  // hears where the bytes came from ("cache" or "network"); `given`: bytes the page's thread
  // fetched from the network (checked here as if fetched here).
  async fetch(path, { counted = true, source = null, given = null } = {}) {
    const note = (bytes, from) => {
      if (counted) this.#record(path, bytes, from);
      if (source) source(from);
      return bytes;
    };
    const sha = expectedSha(this.#manifest, path);
    const url = this.#bundleURL + path;
    if (this.#cache && !given && (!this.#inCache || this.#inCache.has(url))) {
      try {
        const bytes = await cachedBytes(this.#cache, url, sha);
        if (bytes) return note(bytes, "cache");
      } catch (err) {
        log("warn", `the cache could not read ${path}: ${describe(err).message}`);
      }
    }
    let bytes = given;
    if (!bytes) {
      const response = await fetchOrFail(url, path).catch((err) => Promise.reject(this.#ifGone(path, err)));
      bytes = new Uint8Array(await response.arrayBuffer());
    }
    await verify(this.#manifest, path, bytes);
    note(bytes, "network");
    this.#keep(path, bytes, true);
    return bytes;
  }

  // `promise`, its wall time counted as the current request's wait for files (Python awaits
  // it: the fetches of a hybrid search's vector lists, blocks and fragments).
  async waiting(promise) {
    const started = performance.now();
    try {
      return await promise;
    } finally {
      this.waitedMs += performance.now() - started;
    }
  }

  // How long the current request waited for `waiting` fetches (ms); starts the next one's count.
  waited() {
    const ms = Math.round(this.waitedMs * 100) / 100;
    this.waitedMs = 0;
    return ms;
  }

  // What the current request loaded ({path, bytes, from} each); starts the next request's list.
  report() {
    const done = this.#loads;
    this.#loads = [];
    this.#storeAfter(this.#heldBytes > STORE_HELD_BYTES ? 0 : STORE_AFTER_MS);
    return done;
  }

  // The files read go to the cache once the worker has fetched nothing and answered nothing
  // for STORE_AFTER_MS (while the visitor reads, not while they type or a caller searches on),
  // or after a request once STORE_HELD_BYTES wait: a write competes with the fetches of the
  // request under way (about 24 ms of a cold hybrid question at 100k chunks, docs/hybrid.md).
  // Those read synchronously are checked first.
  #keep(path, bytes, checked) {
    if (!this.#cache) return;
    this.#toStore.push([path, bytes, checked]);
    this.#heldBytes += bytes.length;
    this.#storeAfter(STORE_AFTER_MS);
  }

  #storeAfter(ms) {
    clearTimeout(this.#storeTimer);
    if (this.#toStore.length) this.#storeTimer = setTimeout(() => this.#store(), ms);
  }

  #store() {
    this.#heldBytes = 0;
    for (const [path, bytes, checked] of this.#toStore.splice(0)) {
      (checked ? Promise.resolve() : verify(this.#manifest, path, bytes))
        .then(() => putCached(this.#cache, this.#bundleURL + path, expectedSha(this.#manifest, path), bytes))
        .catch((err) => log("warn", `${path} was not cached: ${describe(err).message}`));
    }
  }

  #record(path, bytes, from) {
    this.#loads.push({ path, bytes: bytes.length, from });
    this.totals.files += 1;
    this.totals.bytes += bytes.length;
    this.totals[from] += 1;
  }

  #ifGone(path, err) {
    if (isGone(path, err)) this.gone = path;
    return err;
  }
}

// ------------------------------------------------------------------ the runtime cache
//
// A return visit reads the runtime files (Pyodide's wasm, stdlib and lock file, the wheel,
// the index header, the model and onnxruntime-web's wasm) and every shard a search fetched
// from the Cache API instead of the network, on any static host. Every entry carries the
// sha256 the manifest gave its file when it was stored, and is served only while the current
// manifest (always revalidated) names the same sha256: a rebuilt site fetches the changed
// files again and they replace the old entries, so an old index never meets a new runtime.
// Without a usable Cache API (file://, an insecure http origin, some private modes, a full
// quota) every file comes from the network and the worker logs why; search is never affected.

const CACHE_PREFIX = "ragspine-lite:";
const SHA_HEADER = "x-ragspine-sha256";
const SNAPSHOT_PATH = "ragspine-lite.snapshot"; // a Cache API key only, never a file on the host
const networkFetch = self.fetch.bind(self);

export async function openRuntimeCache(bundleURL, enabled) {
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

// The cached bytes of `url` when they are tagged `sha256`, else null.
async function cachedBytes(cache, url, sha256) {
  const hit = await cache.match(url);
  return hit && hit.headers.get(SHA_HEADER) === sha256 ? new Uint8Array(await hit.arrayBuffer()) : null;
}

function requestURL(input) {
  const raw = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
  return new URL(raw, self.location.href).href;
}

// Routes the worker's fetches of the manifest's `paths` through `cache` while the boot runs
// (Pyodide and onnxruntime-web call the global fetch) until restore(); keeps the Python
// memory snapshot; settle() waits for the writes and prunes.
export class RuntimeCache {
  #cache;
  #manifest;
  #bundleURL;
  #writes = [];
  #snapshotURL;

  constructor(cache, manifest, bundleURL, paths) {
    this.#cache = cache;
    this.#manifest = manifest;
    this.#bundleURL = bundleURL;
    this.#snapshotURL = bundleURL + SNAPSHOT_PATH;
    this.stats = { enabled: Boolean(cache), cached: [], fetched: [], errors: [], snapshot: "none" };
    const wanted = new Map(paths.map((path) => [bundleURL + path, { path, sha256: manifest.files[path].sha256 }]));
    if (cache) self.fetch = (input, init) => this.#fetch(wanted, input, init);
    else this.stats.fetched.push(...paths);
  }

  restore() {
    self.fetch = networkFetch;
  }

  async #fetch(wanted, input, init) {
    const url = requestURL(input);
    const file = wanted.get(url);
    if (!file || (init && init.method && init.method !== "GET")) return networkFetch(input, init);
    try {
      const hit = await this.#cache.match(url);
      if (hit && hit.headers.get(SHA_HEADER) === file.sha256) {
        this.stats.cached.push(file.path);
        return hit;
      }
    } catch (err) {
      this.#failed(file.path, err);
    }
    const response = await networkFetch(input, init);
    this.stats.fetched.push(file.path);
    if (response.status === 200) {
      this.#writes.push(this.#store(url, file, response.clone()).catch((err) => this.#failed(file.path, err)));
    }
    return response;
  }

  async #store(url, file, response) {
    const bytes = await response.arrayBuffer();
    if (self.crypto && crypto.subtle && (await sha256Hex(bytes)) !== file.sha256) {
      throw new Error(`${file.path} does not match manifest.json; not cached`);
    }
    await putCached(this.#cache, url, file.sha256, bytes, response.headers.get("content-type"));
  }

  #failed(what, err) {
    this.stats.errors.push(`${what}: ${describe(err).message}`);
  }

  // The Python memory snapshot stored under `key` (see startPython), or null.
  async readSnapshot(key) {
    if (!this.#cache) return null;
    try {
      return await cachedBytes(this.#cache, this.#snapshotURL, key);
    } catch (err) {
      this.#failed("the Python snapshot", err);
    }
    return null;
  }

  saveSnapshot(key, bytes) {
    if (!this.#cache) return;
    const headers = { [SHA_HEADER]: key, "content-type": "application/octet-stream" };
    this.#writes.push(this.#cache.put(this.#snapshotURL, new Response(bytes, { headers }))
      .catch((err) => this.#failed("the Python snapshot", err)));
  }

  dropSnapshot() {
    if (this.#cache) this.#writes.push(this.#cache.delete(this.#snapshotURL).catch(() => {}));
  }

  // Waits for the writes, drops entries of files neither this manifest nor the index
  // (`indexPaths`, the header's content-named files) names, logs failures.
  async settle(indexPaths = []) {
    const { stats } = this;
    if (!this.#cache) return stats;
    await Promise.all(this.#writes);
    const paths = [...Object.keys(this.#manifest.files), ...indexPaths];
    const listed = new Set([this.#snapshotURL, ...paths.map((path) => this.#bundleURL + path)]);
    try {
      for (const request of await this.#cache.keys()) if (!listed.has(request.url)) await this.#cache.delete(request);
    } catch (err) {
      this.#failed("pruning", err);
    }
    if (stats.errors.length) log("warn", `the runtime cache failed for ${stats.errors.join("; ")}; those files come from the network`);
    return stats;
  }
}
