// The demo page: the <ragspine-search> element over the bundle (results link to the rendered
// pages; "/", Ctrl/⌘-K, ArrowDown/Enter; ?q= follows the box), with its filter pane, locators
// and scores (debug), plus drag-and-drop ingest and a remote reranker.
// URL parameters: ?q=QUERY searches at once when ready; ?bundle=URL opens another bundle;
// ?remote=URL&reranker=colbert switches on a remote reranker (see the "Rerank" panel);
// ?mode=bm25 starts a bundle with embeddings in BM25 mode (the switch next to the box).
import "./ragspine-search.mjs";

const $ = (selector) => document.querySelector(selector);
const EXAMPLES = [
  "why did operating profit fall", "Hong Kong revenue growth in 2024", "中国内地营运利润", "香港银保渠道营收增长",
];

const demo = {
  rs: null, info: null, element: null, marks: { start: performance.now() }, searches: 0, lastQuery: "", lastHits: [],
};
window.ragspineDemo = demo;

function setState(state) {
  document.body.dataset.state = state;
}

function showError(text) {
  const box = $("#error");
  box.textContent = text;
  box.hidden = !text;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

/** The search element, made here so that ?bundle= is its bundle from the start. */
function searchElement(params) {
  const search = document.createElement("ragspine-search");
  const attrs = {
    id: "search", bundle: params.get("bundle") || "./", "sync-url": "", debug: "", autofocus: "", "filters-open": "",
    label: "Search the sample reports", examples: JSON.stringify(EXAMPLES),
    placeholder: "Search in English or 中文 — e.g. hong kong revenue, 营运利润",
  };
  for (const [key, value] of Object.entries(attrs)) search.setAttribute(key, value);
  search.addEventListener("ragspine-results", (event) => {
    showError("");
    demo.searches += 1;
    demo.lastQuery = event.detail.query;
    demo.lastHits = event.detail.hits;
    if (demo.lastHits.length && !demo.marks.firstResult) demo.marks.firstResult = performance.now();
    document.body.dataset.searches = String(demo.searches);
  });
  search.addEventListener("ragspine-error", (event) => {
    if (event.detail.phase === "search") { // the element stays usable: say what failed
      showError(`The search failed: ${event.detail.error}`);
      return;
    }
    setState("error");
    showError(`Could not start the search: ${event.detail.error}`);
  });
  search.addEventListener("ragspine-ready", () => ready(search, params));
  $("#search-slot").replaceWith(search);
  return search;
}

async function applyReranker() {
  const reranker = $("#remote-method").value;
  const url = $("#remote-url").value.trim() || null;
  const token = $("#remote-token").value || null;
  const status = $("#remote-status");
  status.textContent = reranker === "none" ? "" : `Asking ${url} …`;
  try {
    const info = await demo.rs.configureReranker({ reranker, url, token });
    demo.reranker = info;
    $("#rerank-state").textContent = info.enabled ? `(${info.spec})` : "(off)";
    if (!info.enabled) status.textContent = "Off: results keep their fused order.";
    else if (info.error) status.textContent = `On, but the endpoint check failed (searches keep the fused order while it fails): ${info.error}`;
    else status.textContent = `On: ${info.spec} at ${info.url}.`;
    document.body.dataset.reranker = info.enabled ? info.spec : "none";
    if (demo.element.query.trim()) await demo.element.refresh();
  } catch (err) {
    status.textContent = `Not applied: ${err.message}`;
  }
}

async function refreshDocuments() {
  const docs = await demo.rs.documents();
  const list = $("#my-docs");
  list.replaceChildren(...docs.map((d) =>
    el("li", { dataset: { docId: d.doc_id } }, `${d.name}${d.title ? ` — ${d.title}` : ""} (${d.chunks} chunk${d.chunks === 1 ? "" : "s"})${d.restricted ? " · RESTRICTED: never shown" : ""}`)));
  $("#forget").hidden = docs.length === 0;
}

async function ingestFiles(files) {
  const list = Array.from(files || []);
  if (!list.length) return;
  const status = $("#ingest-status");
  status.textContent = `Indexing ${list.length} file(s)…`;
  try {
    const out = await demo.rs.ingest(list);
    const names = out.documents.map((d) => `${d.name} (${d.chunks} chunk${d.chunks === 1 ? "" : "s"})`).join(", ");
    status.textContent = `Indexed ${names}${out.persisted ? "; saved in this browser" : "; not saved (IndexedDB unavailable)"}.`;
    await Promise.all([refreshDocuments(), demo.element.refresh()]);
  } catch (err) {
    status.textContent = "";
    showError(`Could not add the file(s): ${err.message}`);
  }
}

function wireDropZone() {
  const zone = $("#dropzone");
  // A file dropped anywhere else must not replace the page with the file.
  for (const type of ["dragover", "drop"]) {
    window.addEventListener(type, (event) => {
      if (!zone.contains(event.target)) event.preventDefault();
    });
  }
  zone.addEventListener("dragover", (event) => {
    event.preventDefault();
    zone.classList.add("over");
  });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("over");
    if (demo.rs) ingestFiles(event.dataTransfer && event.dataTransfer.files);
  });
  $("#file-input").addEventListener("change", (event) => ingestFiles(event.target.files));
  $("#forget").addEventListener("click", async () => {
    await demo.rs.forget();
    $("#ingest-status").textContent = "Your documents were removed from this browser.";
    await Promise.all([refreshDocuments(), demo.element.refresh()]);
  });
}

function describeBundle() {
  const manifest = demo.rs.manifest;
  const counts = manifest.counts;
  $("#bundle-info").textContent =
    `${manifest.title}: ${counts.documents} documents, ${counts.chunks} chunks · Python ${demo.info.versions.python} ` +
    `(Pyodide ${demo.info.versions.pyodide}) · ready in ${(demo.info.timings.total / 1000).toFixed(1)} s` +
    (demo.info.embeddings ? ` · hybrid search with ${demo.info.embeddings.name} on onnxruntime-web` : "");
  if (demo.info.embeddingsError) {
    const note = $("#semantic-note");
    note.textContent = `Semantic search is unavailable, so results come from BM25 alone: ${demo.info.embeddingsError}`;
    note.hidden = false;
  }
  {
    // The bundle says nothing about what was withheld (not even how many documents).
    const note = $("#restricted-note");
    note.textContent =
      "RESTRICTED documents are never part of a bundle: " +
      "none of their text, titles, metadata or index entries is in any file this page downloads, so no result can show them.";
    note.hidden = false;
  }
}

// The runtime's info once its full engine is up and a hybrid site's model joined (or could
// not), without starting the boot: the runtime starts it once the instant lane has been idle,
// so a visitor typing at once is answered by the instant lane (denseReady() would boot now
// and hold the worker's thread).
function settled(rs) {
  return new Promise((resolve, reject) => {
    const check = (event) => {
      const failed = event && event.detail.engine === "failed";
      const info = rs.info;
      if (!failed && !(info && info.engine !== "instant" && info.dense !== "loading")) return;
      rs.removeEventListener("engine", check);
      if (failed) reject(new Error(event.detail.error ? event.detail.error.message : "the full engine failed"));
      else resolve(info);
    };
    rs.addEventListener("engine", check);
    check(null);
  });
}

async function ready(search, params) {
  demo.rs = search.runtime;
  // The instant lane answers the box already; ingest, reranking and the versions need Pyodide
  // (and, on a hybrid site, its model: the page is ready once it joined or could not).
  try {
    demo.info = await settled(demo.rs);
  } catch (err) {
    setState("error");
    showError(`The full search engine could not start (plain searches still work): ${err.message}`);
    return;
  }
  demo.marks.ready = performance.now();
  describeBundle();
  $("#remote-apply").disabled = false;
  if (params.get("remote")) {
    $("#remote-url").value = params.get("remote");
    $("#remote-method").value = params.get("reranker") || "colbert";
    $("#remote-panel").open = true;
    await applyReranker();
  }
  await refreshDocuments();
  if (demo.info.restored) {
    $("#ingest-status").textContent = `Restored ${demo.info.restored} document(s) saved in this browser.`;
    await search.refresh(); // the restored documents' facets
  }
  if (demo.info.restoreErrors.length) showError(`Some saved documents could not be restored: ${demo.info.restoreErrors.join("; ")}`);
  $("#file-input").disabled = false;
  setState("ready");
}

function main() {
  const params = new URLSearchParams(location.search);
  wireDropZone();
  $("#remote-form").addEventListener("submit", (event) => {
    event.preventDefault();
    if (demo.rs) applyReranker();
  });
  demo.element = searchElement(params);
}

main();
