// The visitor's own documents in the search worker: checked, indexed (and embedded with the
// bundle's model), kept in IndexedDB with their vectors, restored on the next visit, forgotten.
// `state` is the open full engine (ragspine-worker.mjs).

import { BundleError, describe, log, progress } from "./ragspine-messages.mjs";

const MAX_DOCUMENT_BYTES = 5 * 1024 * 1024;
const PAGE_EXTENSIONS = [".txt", ".md", ".html", ".htm"];
const DB_STORE = "documents";

// ------------------------------------------------------------------ IndexedDB

function idbRequest(request) {
  return new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error || new Error("IndexedDB request failed"));
  });
}

// The bundle's database (one per bundle URL).
function idbOpen(bundleURL) {
  return new Promise((resolve, reject) => {
    const request = indexedDB.open(`ragspine-lite:${bundleURL}`, 1);
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

// How many documents the visitor stored for this bundle (0 without IndexedDB).
export async function countStored(bundleURL) {
  try {
    const db = await idbOpen(bundleURL);
    const count = (await idbAll(db)).length;
    db.close();
    return count;
  } catch {
    return 0; // no IndexedDB: the full engine will have no stored documents either
  }
}

// ------------------------------------------------------------------ restoring

// Opens the database (state.idb; null when it cannot be) and indexes the stored documents in
// the order they were added, counting them in state.restored and state.restoreErrors.
export async function restoreDocuments(state) {
  try {
    state.idb = await idbOpen(state.bundleURL);
  } catch (err) {
    log("warn", `documents added in this page will not persist: ${describe(err).message}`);
  }
  if (!state.idb) return;
  const stored = await idbAll(state.idb);
  stored.sort((a, b) => (a.added - b.added) || (a.doc_id < b.doc_id ? -1 : 1));
  const fresh = [];
  for (let i = 0; i < stored.length; i++) {
    progress("restore", `Restoring your documents (${i + 1}/${stored.length})`, { loaded: i + 1, total: stored.length });
    try {
      // Vectors stored with the document are reused; only a document without them is embedded.
      const info = await indexDocument(state, stored[i]);
      if (state.embeddings && !sameVectors(state, stored[i].vectors)) fresh.push({ ...stored[i], doc_id: info.doc_id });
      state.restored += 1;
    } catch (err) {
      state.restoreErrors.push(`${stored[i].name}: ${describe(err).message}`);
    }
  }
  await storeVectors(state, fresh);
}

// ------------------------------------------------------------------ ingest and forget

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

export async function ingest(state, docs) {
  if (!Array.isArray(docs) || !docs.length) throw new BundleError("ingest needs a non-empty list of documents");
  const incoming = docs.map(checkIncoming);
  // Validate everything (front matter …) before anything is stored: all or nothing.
  const byId = new Map();
  for (const doc of incoming) {
    const checked = state.call("check", doc);
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
    results.push(await indexDocument(state, records[i]));
  }
  if (state.embeddings) await storeVectors(state, records);
  progress("ready", "Ready");
  return { documents: results, persisted: Boolean(state.idb) };
}

// Index one page document; with the bundle's model its chunks are embedded too (vectors the
// record carries from an earlier visit are reused, so nothing is embedded twice).
async function indexDocument(state, record) {
  const args = { name: record.name, text: record.text };
  if (!state.embeddings) return state.call("ingest", args);
  if (sameVectors(state, record.vectors)) args.vectors = record.vectors;
  const { semanticCall } = await import("./ragspine-embed.mjs"); // with the full engine
  const info = await semanticCall(state, "ingest", args, { document: { name: record.name, text: record.text } });
  delete info.worker;
  return info;
}

function sameVectors(state, vectors) {
  return Boolean(vectors && state.embeddings && vectors.model_id === state.embeddings.modelId);
}

// Keep each document's chunk vectors in its IndexedDB record, so a reload does not re-embed.
async function storeVectors(state, records) {
  if (!state.idb || !records.length) return;
  const updated = records.map((record) => ({ ...record, vectors: state.call("page_vectors", { docId: record.doc_id }) }));
  try {
    await idbTransaction(state.idb, (store) => {
      for (const record of updated) store.put(record);
    });
  } catch (err) {
    log("warn", `the vectors of your documents were not saved (they will be re-embedded): ${describe(err).message}`);
  }
}

export async function forget(state, docIds) {
  const ids = docIds === null ? state.call("documents").map((d) => d.doc_id) : docIds.map(String);
  if (state.idb) {
    await idbTransaction(state.idb, (store) => {
      if (docIds === null) store.clear();
      else for (const id of ids) store.delete(id);
    });
  }
  return state.call("forget", { docIds: ids });
}
