// The demo page: search as you type over the bundle, filters, drag-and-drop ingest.
// URL parameters: ?q=QUERY searches at once when ready; ?bundle=URL opens another bundle;
// ?remote=URL&reranker=colbert switches on a remote reranker (see the "Rerank" panel);
// ?mode=bm25 starts a bundle with embeddings in BM25 mode (the switch next to the box).
import { RagSpineLite } from "./ragspine-lite.mjs";

const $ = (selector) => document.querySelector(selector);
const DEBOUNCE_MS = 120;
const PREFETCH_MS = 40; // fetch the typed words' shards ahead of the (debounced) search
const TOP_K = 10;
// [start, end] of the progress bar (percent) for each phase.
const PHASES = {
  worker: [0, 2], manifest: [2, 4], boot: [4, 55], install: [55, 70], model: [70, 85], index: [85, 95],
  restore: [95, 99], ready: [100, 100],
};

const demo = { rs: null, marks: { start: performance.now() }, info: null, searches: 0, lastQuery: "" };
window.ragspineDemo = demo;

function setState(state) {
  document.body.dataset.state = state;
}

function setProgress({ phase, message, loaded, total, overall }) {
  const [start, end] = PHASES[phase] || [null, null];
  if (overall && overall.total && phase !== "ready") {
    // Real bytes of every file the boot downloads (the bar never claims more than that).
    const percent = Math.min(99, Math.round((95 * overall.loaded) / overall.total));
    $("#progress-bar").style.width = `${percent}%`;
    $("#boot .progress").setAttribute("aria-valuenow", String(percent));
    $("#boot-status").textContent = `${message} — ${(overall.loaded / 1048576).toFixed(1)} / ${(overall.total / 1048576).toFixed(1)} MB`;
    return;
  }
  if (start !== null) {
    const part = total ? Math.min(1, (loaded || 0) / total) : 0;
    const percent = Math.round(start + (end - start) * part);
    $("#progress-bar").style.width = `${percent}%`;
    $("#boot .progress").setAttribute("aria-valuenow", String(percent));
  }
  const size = total && phase !== "restore" && phase !== "ingest" ? ` — ${(loaded / 1048576).toFixed(1)} / ${(total / 1048576).toFixed(1)} MB` : "";
  $("#boot-status").textContent = `${message}${size}`;
}

function showError(text) {
  const box = $("#error");
  box.textContent = text;
  box.hidden = !text;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

function highlighted(text, spans) {
  const p = el("p", { class: "text" });
  let at = 0;
  for (const [start, end] of spans) {
    if (start > at) p.append(text.slice(at, start));
    p.append(el("mark", {}, text.slice(start, end)));
    at = end;
  }
  if (at < text.length) p.append(text.slice(at));
  return p;
}

function currentFilters() {
  const filters = {};
  for (const select of document.querySelectorAll("#filters select")) {
    if (select.value) filters[select.dataset.field] = select.value;
  }
  return filters;
}

function currentMode() {
  if (!demo.info || !demo.info.embeddings) return null;
  const checked = document.querySelector("#mode-switch input:checked");
  return checked ? checked.value : "hybrid";
}

function renderHits(query, detailed) {
  const list = $("#results");
  list.replaceChildren();
  for (const [rank, hit] of detailed.hits.entries()) {
    const s = hit.snippet;
    const head = el("div", { class: "hit-head" },
      el("span", { class: "rank" }, `${rank + 1}.`),
      el("span", { class: "title" }, s.title || s.doc_id));
    if (s.library_id === "page") head.append(el("span", { class: "badge mine" }, "your document"));
    if (s.language) head.append(el("span", { class: "badge" }, s.language));
    const cite = el("div", { class: "cite" }, el("code", { class: "locator" }, s.source_locator));
    if (hit.section) cite.append(el("span", { class: "section" }, `§ ${hit.section.heading}`));
    const meta = ["entity", "topic", "geography", "period"].filter((k) => s[k]).map((k) => `${k} ${s[k]}`);
    meta.push(s.sensitivity);
    const scores = el("div", { class: "scores" },
      `fused ${s.scores.fused.toFixed(4)} · bm25 ${s.scores.bm25.toFixed(3)} · vector ${s.scores.vector.toFixed(3)}`);
    list.append(el("li", { class: "hit", dataset: { docId: s.doc_id, locator: s.source_locator, library: s.library_id, language: s.language, entity: s.entity } },
      head, cite, highlighted(s.text, hit.highlights), scores, el("div", { class: "meta" }, meta.join(" · "))));
  }
  const empty = $("#empty");
  if (!detailed.hits.length && query.trim()) {
    const filtered = Object.keys(currentFilters()).length > 0;
    empty.textContent = `No results for “${query}”` + (filtered ? " with these filters — clear them to search everything." : ".");
    empty.hidden = false;
  } else {
    empty.textContent = "";
    empty.hidden = true;
  }
  let rerankNote = "";
  const rr = detailed.rerank;
  if (rr && detailed.hits.length) {
    rerankNote = rr.applied
      ? ` · reranked by ${rr.spec} (${Math.round(rr.ms)} ms)`
      : ` · ${rr.spec} failed, fused order kept: ${rr.error}`;
  }
  list.dataset.rerank = rr ? (rr.applied ? "applied" : "failed") : "off";
  const sem = detailed.semantic;
  list.dataset.channel = sem ? sem.channel : "bm25";
  let channelNote = "";
  if (sem && detailed.hits.length) {
    channelNote = {
      hybrid: ` · hybrid: BM25 + ${demo.info.embeddings.name}`,
      bm25: " · BM25",
      "bm25:outside-vocabulary": ` · BM25 (the query is outside ${demo.info.embeddings.name}'s vocabulary)`,
      "bm25:embedding-failed": ` · BM25 (the model failed: ${sem.error})`,
    }[sem.channel] ?? ` · ${sem.channel}`;
  }
  $("#result-info").textContent = query.trim()
    ? `${detailed.hits.length} result(s) · ${detailed.tookMs.toFixed(1)} ms in Python${channelNote}${rerankNote}`
    : "";
}

let timer = 0;
let sequence = 0;

async function runSearch() {
  if (!demo.rs) return; // booting: main() runs the box's query once ready
  const query = $("#q").value;
  const mine = ++sequence;
  const started = performance.now();
  try {
    const detailed = await demo.rs.searchDetailed(query, { filters: currentFilters(), topK: TOP_K, mode: currentMode() });
    if (mine !== sequence) return; // a newer search is on its way
    showError("");
    renderHits(query, detailed);
    demo.searches += 1;
    demo.lastQuery = query;
    $("#search-time").textContent = query.trim() ? `${Math.round(performance.now() - started)} ms` : "";
    if (detailed.hits.length && !demo.marks.firstResult) demo.marks.firstResult = performance.now();
    document.body.dataset.searches = String(demo.searches);
  } catch (err) {
    if (mine === sequence) showError(`Search failed: ${err.message}`);
  }
}

let prefetchTimer = 0;

function scheduleSearch() {
  clearTimeout(timer);
  timer = setTimeout(runSearch, DEBOUNCE_MS);
  clearTimeout(prefetchTimer);
  if (!demo.rs) return;
  prefetchTimer = setTimeout(() => {
    const query = $("#q").value;
    if (query.trim()) demo.rs.prefetch(query, { filters: currentFilters(), mode: currentMode(), topK: TOP_K }).catch(() => {});
  }, PREFETCH_MS);
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
    if ($("#q").value.trim()) await runSearch();
  } catch (err) {
    status.textContent = `Not applied: ${err.message}`;
  }
}

async function refreshFacets() {
  const stats = await demo.rs.stats();
  for (const select of document.querySelectorAll("#filters select")) {
    const keep = select.value;
    const values = stats.facets[select.dataset.field] || [];
    select.replaceChildren(el("option", { value: "" }, "any"), ...values.map((v) => el("option", { value: v }, v)));
    select.value = values.includes(keep) ? keep : "";
  }
  return stats;
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
    await Promise.all([refreshDocuments(), refreshFacets()]);
    if ($("#q").value.trim()) await runSearch();
  } catch (err) {
    status.textContent = "";
    showError(`Could not add the file(s): ${err.message}`);
  }
}

function wire() {
  $("#search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(timer);
    runSearch();
  });
  $("#q").addEventListener("input", scheduleSearch);
  for (const select of document.querySelectorAll("#filters select")) select.addEventListener("change", runSearch);
  $("#clear-filters").addEventListener("click", () => {
    for (const select of document.querySelectorAll("#filters select")) select.value = "";
    runSearch();
  });
  for (const button of document.querySelectorAll(".example")) {
    button.addEventListener("click", () => {
      $("#q").value = button.dataset.q;
      runSearch();
    });
  }
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
  for (const radio of document.querySelectorAll("#mode-switch input")) {
    radio.addEventListener("change", () => {
      if (demo.rs && $("#q").value.trim()) runSearch();
    });
  }
  $("#remote-form").addEventListener("submit", (event) => {
    event.preventDefault();
    if (demo.rs) applyReranker();
  });
  $("#forget").addEventListener("click", async () => {
    await demo.rs.forget();
    $("#ingest-status").textContent = "Your documents were removed from this browser.";
    await Promise.all([refreshDocuments(), refreshFacets()]);
    await runSearch();
  });
}

async function main() {
  wire();
  const placeholder = $("#q").placeholder;
  $("#q").placeholder = "Loading the search…";
  const params = new URLSearchParams(location.search);
  try {
    demo.rs = await RagSpineLite.open({ bundle: params.get("bundle") || "./", onProgress: setProgress });
  } catch (err) {
    setState("error");
    $("#boot-status").textContent = "The search runtime could not start.";
    showError(`Could not start the search: ${err.message}`);
    return;
  }
  demo.info = demo.rs.info;
  demo.marks.ready = performance.now();
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
  if (demo.info.embeddings) {
    $("#mode-switch").hidden = false;
    if (params.get("mode") === "bm25") document.querySelector("#mode-switch input[value=bm25]").checked = true;
  }
  {
    // The bundle says nothing about what was withheld (not even how many documents).
    const note = $("#restricted-note");
    note.textContent =
      "RESTRICTED documents are never part of a bundle: " +
      "none of their text, titles, metadata or index entries is in any file this page downloads, so no result can show them.";
    note.hidden = false;
  }
  $("#boot").hidden = true;
  $("#q").disabled = false;
  $("#remote-apply").disabled = false;
  if (params.get("remote")) {
    $("#remote-url").value = params.get("remote");
    $("#remote-method").value = params.get("reranker") || "colbert";
    $("#remote-panel").open = true;
    await applyReranker();
  }
  $("#q").placeholder = placeholder;
  const q = params.get("q");
  if (q) $("#q").value = q;
  if ($("#q").value.trim()) await runSearch(); // ?q= or an example clicked while booting

  await Promise.all([refreshFacets(), refreshDocuments()]);
  if (demo.info.restored) $("#ingest-status").textContent = `Restored ${demo.info.restored} document(s) saved in this browser.`;
  if (demo.info.restoreErrors.length) showError(`Some saved documents could not be restored: ${demo.info.restoreErrors.join("; ")}`);
  $("#filters").disabled = false;
  $("#file-input").disabled = false;
  setState("ready");
  $("#q").focus();
}

main();
