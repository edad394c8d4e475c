// The results panel of <ragspine-search> (ragspine-search.mjs), loaded on the visitor's first
// intent: it opens the runtime of every site, follows the boot, and runs, fuses and renders
// the searches in the box the element built (mode switch, filter pane, results, "More").
// On a hybrid site the first results are BM25 (the instant lane, then Pyodide) and the line
// under the status says so; when the model joins, the shown results are searched again and
// replaced in place, unless the visitor's pointer or keyboard focus is on them: then from the
// visitor's next key in the box, or when the pointer and the focus have left them.
import { RagSpineLite, fuseSites } from "./ragspine-lite.mjs";
import { el, groupByPage, marked } from "./ragspine-ui.mjs";
import { MAX_TOP_K } from "./ragspine-contract.mjs";

export { groupByPage };

const DEBOUNCE_MS = 120;
// While typing, the shards of the words so far are fetched ahead (see RagSpineLite.prefetch).
const PREFETCH_MS = 40;
const PAGES_STEP = 5; // result pages shown, then "More results" adds as many again
const SUBS_PER_PAGE = 3; // sections listed under a page's best hit
// A new query is answered in two steps: its best hits first (the excerpts of a few text
// fragments), then as many as the pages shown need (their sections and "More results").
const FIRST_TOP_K = 10;
const FACETS = ["language", "topic", "entity", "geography", "period"];
// Keys in the box that do not apply hybrid results held back (they move the focus).
const MOVING_KEYS = new Set(["ArrowDown", "Tab", "Shift", "Control", "Alt", "Meta", "Escape"]);

// One runtime per bundle, shared by every element on the page.
const runtimes = new Map();

function runtimeFor(bundle) {
  let entry = runtimes.get(bundle);
  if (!entry) {
    entry = { listeners: new Set(), last: null, ready: null };
    entry.ready = RagSpineLite.open({
      bundle,
      onProgress: (p) => {
        entry.last = p;
        for (const listener of entry.listeners) listener(p);
      },
    });
    entry.ready.catch(() => {});
    runtimes.set(bundle, entry);
  }
  return entry;
}

function formatMB(bytes) {
  return (bytes / 1048576).toFixed(1);
}

function words(value) {
  return String(value || "").split(/[\s,]+/).filter(Boolean);
}

export class SearchPanel {
  #host; // the <ragspine-search> element: attributes, data-*, events
  #box; // what the element built: {root, panel, form, input, progress, status, dialog, t, say, …}
  #root;
  #input;
  #sites = []; // [{bundle, libraryId, rs, title}] once ready
  #results;
  #held;
  #lane; // which lane answered the results shown (hybrid sites): "Keyword results — …"
  // The results shown are behind (BM25 while hybrid is in, or a new query's first step while
  // its complete answer was held back): searched again and replaced when the visitor is idle.
  #stale = false;
  #facetsLoaded = false;
  #more;
  #modeSwitch;
  #filters;
  #facetBox;
  #facetLabels = new Set(); // the words of the filter pane, which refresh() builds again
  #summaryWords; // (t) => void: the filter pane's summary (how many filters are on)
  #last = null; // the last search shown: {query, detailed, topK}
  #timer = 0;
  #prefetchTimer = 0;
  #sequence = 0;
  #pages = PAGES_STEP;
  #pending;

  /** Build the rest of the panel into `box` and open the runtimes (`pending`: a search was
   * asked for already). */
  constructor(host, box, pending) {
    this.#host = host;
    this.#box = box;
    this.#root = box.root;
    this.#input = box.input;
    this.#pending = pending;
    this.#build();
    this.#boot();
  }

  get #t() {
    return this.#box.t();
  }

  /** The (first) site's RagSpineLite instance, once ready (null before). */
  get runtime() {
    return this.#sites.length ? this.#sites[0].rs : null;
  }

  /** Every site searched, once ready: [{bundle, libraryId, rs, title}]. */
  get sites() {
    return this.#sites.map((site) => ({ ...site }));
  }

  #bundles() {
    const here = new URL("./", import.meta.url).href;
    return [...new Set(words(this.#host.getAttribute("bundle") || here).map((b) => new URL(b, location.href).href))];
  }

  /** The words changed: show the last search again in them. */
  relabeled() {
    if (this.#last) this.#render(this.#last.query, this.#last.detailed, this.#last.topK);
  }

  /** The visitor typed: fetch ahead, then search after a pause. */
  typed() {
    this.prefetch();
    this.request(false);
  }

  // -- building -------------------------------------------------------------------------

  #build() {
    const { form, status, panel, say } = this.#box;
    form.append(this.#modePart());
    this.#filters = this.#filterPart();
    form.after(this.#filters);
    this.#held = el("p", { class: "note", hidden: true, part: "note" });
    this.#lane = el("p", { class: "lane", hidden: true, part: "lane", "aria-live": "polite" });
    status.after(this.#lane, this.#held);
    say((t) => this.#showLane(t));
    this.#results = el("ol", { id: "results", class: "results", part: "results" });
    say((t) => this.#results.setAttribute("aria-label", t("results.label")));
    this.#more = el("button", { type: "button", class: "more", hidden: true });
    say((t) => { this.#more.textContent = t("more"); });
    this.#more.addEventListener("click", () => {
      this.#pages += PAGES_STEP;
      this.run({ keepFocus: true });
    });
    this.#results.addEventListener("keydown", (event) => this.#onResultsKey(event));
    this.#results.addEventListener("pointerleave", () => this.#applyWhenIdle());
    this.#results.addEventListener("focusout", () => this.#applyWhenIdle());
    panel.append(this.#results, this.#more);
  }

  #modePart() {
    const hybrid = el("input", { type: "radio", name: "mode", value: "hybrid", checked: true });
    const bm25 = el("input", { type: "radio", name: "mode", value: "bm25" });
    const legend = el("legend", { class: "vh" });
    const hybridText = document.createTextNode("");
    const bm25Text = document.createTextNode("");
    const hybridLabel = el("label", {}, hybrid, hybridText);
    const bm25Label = el("label", {}, bm25, bm25Text);
    this.#modeSwitch = el("fieldset", { class: "mode", hidden: true }, legend, hybridLabel, bm25Label);
    this.#box.say((t) => {
      legend.textContent = t("mode");
      hybridText.data = t("hybrid");
      bm25Text.data = t("bm25");
      hybridLabel.title = t("hybrid.title");
      bm25Label.title = t("bm25.title");
    });
    for (const radio of [hybrid, bm25]) radio.addEventListener("change", () => this.request(true));
    return this.#modeSwitch;
  }

  // -- filters --------------------------------------------------------------------------

  #filterPart() {
    const box = el("details", { class: "filters", hidden: true, part: "filters", open: this.#host.hasAttribute("filters-open") });
    const summary = el("summary");
    this.#facetBox = el("div", { class: "facets" });
    box.append(summary, this.#facetBox);
    this.#summaryWords = (t) => {
      const active = Object.keys(this.filters).length;
      summary.textContent = active ? t("filters.active", { count: active }) : t("filters");
    };
    this.#box.say(this.#summaryWords);
    return box;
  }

  #sayFacet(apply) {
    this.#facetLabels.add(apply);
    this.#box.say(apply);
  }

  /** The filters chosen in the pane: {field: value}. */
  get filters() {
    const chosen = {};
    if (!this.#facetBox) return chosen;
    for (const select of this.#facetBox.querySelectorAll("select")) {
      if (select.value) chosen[select.dataset.field] = select.value;
    }
    return chosen;
  }

  #offered(facets) {
    const asked = this.#host.getAttribute("facets");
    if (asked !== null && asked.trim().toLowerCase() === "none") return [];
    const fields = asked === null ? FACETS : words(asked);
    const least = asked === null ? 2 : 1;
    return fields.filter((field) => (facets[field] || []).length >= least);
  }

  #facetName(field, value) {
    if (field !== "language") return value;
    try {
      return new Intl.DisplayNames([this.#t.lang], { type: "language" }).of(value) || value;
    } catch {
      return value;
    }
  }

  /** Read the facets again (after documents were added or removed) and search again. */
  async refresh() {
    if (!this.#sites.length) return;
    const chosen = this.filters;
    this.#buildFilters(await this.#facets());
    for (const select of this.#facetBox.querySelectorAll("select")) {
      const value = chosen[select.dataset.field];
      if (value && [...select.options].some((o) => o.value === value)) select.value = value;
    }
    this.#summaryWords(this.#t);
    await this.run();
  }

  #buildFilters(facets) {
    const fields = this.#offered(facets);
    this.#box.forget(this.#facetLabels);
    this.#facetLabels.clear();
    this.#facetBox.replaceChildren();
    this.#filters.hidden = fields.length === 0;
    for (const field of fields) {
      const select = el("select", { "data-field": field, id: `facet-${field}` });
      const any = el("option", { value: "" });
      const options = facets[field].map((value) => el("option", { value: String(value) }));
      select.append(any, ...options);
      const name = el("span");
      this.#sayFacet((t) => {
        name.textContent = t(`facet.${field}`);
        any.textContent = t("any");
        options.forEach((option) => { option.textContent = this.#facetName(field, option.value); });
      });
      select.addEventListener("change", () => this.#filtersChanged());
      this.#facetBox.append(el("label", { class: "facet", for: `facet-${field}` }, name, select));
    }
    if (!fields.length) return;
    const clear = el("button", { type: "button", class: "clear" });
    this.#sayFacet((t) => { clear.textContent = t("filters.clear"); });
    clear.addEventListener("click", () => {
      for (const select of this.#facetBox.querySelectorAll("select")) select.value = "";
      this.#filtersChanged();
    });
    this.#facetBox.append(clear);
  }

  #filtersChanged() {
    this.#summaryWords(this.#t);
    this.request(true);
  }

  // -- keyboard -------------------------------------------------------------------------

  #links() {
    return [...this.#results.querySelectorAll(".hit")];
  }

  onInputKey(event) {
    if (this.#stale && !MOVING_KEYS.has(event.key)) { // the next key applies what was held back
      this.#stale = false;
      this.request(false);
    }
    if (event.key === "ArrowDown") {
      const first = this.#links()[0];
      if (first) {
        event.preventDefault();
        first.focus();
      }
    } else if (event.key === "Escape" && this.#input.value && !this.#box.dialog) {
      event.preventDefault();
      this.#host.clear();
    }
  }

  #onResultsKey(event) {
    const links = this.#links();
    const at = links.indexOf(this.#root.activeElement);
    if (at < 0) return;
    if (event.key === "ArrowDown" && at + 1 < links.length) {
      event.preventDefault();
      links[at + 1].focus();
    } else if (event.key === "ArrowUp") {
      event.preventDefault();
      (at > 0 ? links[at - 1] : this.#input).focus();
    } else if (event.key === "Escape" && !this.#box.dialog) {
      event.preventDefault();
      this.#input.focus();
    }
  }

  // -- boot -----------------------------------------------------------------------------

  #boot() {
    const entries = this.#bundles().map((bundle) => ({ bundle, entry: runtimeFor(bundle) }));
    // Followed until every boot is done (after the instant lane it goes on in the background).
    const onProgress = () => {
      const reports = entries.map(({ entry }) => entry.last).filter(Boolean);
      this.#showProgress(reports);
      if (reports.length === entries.length && reports.every((p) => p.phase === "ready")) {
        for (const { entry } of entries) entry.listeners.delete(onProgress);
      }
    };
    for (const { entry } of entries) entry.listeners.add(onProgress);
    onProgress();
    Promise.allSettled(entries.map(({ entry }) => entry.ready)).then((settled) => {
      const ids = words(this.#host.getAttribute("libraries"));
      const sites = [];
      const errors = [];
      settled.forEach((outcome, i) => {
        const bundle = entries[i].bundle;
        if (outcome.status === "rejected") errors.push(outcome.reason);
        else sites.push({ bundle, libraryId: ids[i] || bundle, rs: outcome.value, title: outcome.value.manifest?.title || bundle });
      });
      if (!sites.length) this.#box.failed(errors[0]);
      else this.#ready(sites, errors);
    });
  }

  #showProgress(reports) {
    if (!reports.length) return;
    const loaded = reports.reduce((sum, p) => sum + ((p.overall && p.overall.loaded) || 0), 0);
    const total = reports.reduce((sum, p) => sum + ((p.overall && p.overall.total) || 0), 0);
    const booting = reports.find((p) => p.phase !== "ready") || reports[0];
    let percent = null;
    if (reports.every((p) => p.phase === "ready")) percent = 100;
    else if (total) percent = Math.min(99, Math.round((95 * loaded) / total));
    const { progress } = this.#box;
    if (percent !== null) {
      this.#host.dataset.progress = String(percent);
      progress.querySelector(".bar").style.width = `${percent}%`;
      progress.setAttribute("aria-valuenow", String(percent));
    }
    if (this.#host.dataset.state !== "booting") return;
    const size = total ? { loaded: formatMB(loaded), total: formatMB(total) } : null;
    this.#box.setStatus("loading.progress", { phase: booting.message || booting.phase, size });
  }

  #ready(sites, errors) {
    const host = this.#host;
    this.#sites = sites;
    this.#box.progress.hidden = true;
    this.#input.removeAttribute("aria-busy");
    if (host.hasAttribute("sync-url") && new URLSearchParams(location.search).get("mode") === "bm25") {
      this.#modeSwitch.querySelector("input[value=bm25]").checked = true;
    }
    host.dataset.state = "ready";
    for (const site of sites) site.rs.addEventListener("engine", () => this.#engineChanged());
    this.#engineChanged();
    this.#box.placeholder();
    if (errors.length) this.#box.setStatus("sites.failed", { count: errors.length, error: errors[0].message }, true);
    else this.#box.setStatus("");
    host.dispatchEvent(new CustomEvent("ragspine-ready", { detail: { info: sites[0].rs.info, sites: this.sites } }));
    if (this.#pending || this.#input.value.trim()) this.run();
  }

  // -- engines --------------------------------------------------------------------------

  /** Whether the site has a model, loaded or loading (its mode switch, its lane line). */
  #hasModel(site) {
    const info = site.rs.info;
    return Boolean(info && (info.embeddings || info.dense === "loading"));
  }

  /** A site's engine changed: the element's data-engine ("instant" while one answers from the
   * instant lane, "full" while a model is on its way, then "hybrid"), its filter pane once
   * every site's full engine is up, and results held back or replaced once a model joined. */
  #engineChanged() {
    const infos = this.#sites.map((site) => site.rs.info || {});
    let engine = "full";
    if (infos.some((info) => info.engine === "instant")) engine = "instant";
    else if (infos.some((info) => info.engine === "hybrid") && infos.every((info) => info.dense !== "loading")) {
      engine = "hybrid";
    }
    this.#host.dataset.engine = engine;
    this.#modeSwitch.hidden = !this.#sites.some((site) => this.#hasModel(site));
    if (engine !== "instant" && !this.#facetsLoaded) {
      this.#facetsLoaded = true;
      this.#loadFacets();
    }
    if (this.#last) this.#stale = this.#stale || this.#behind(this.#last.detailed);
    this.#showLane();
    this.#applyWhenIdle();
  }

  /** Whether results are BM25 only because a site's model was not in yet when they ran. */
  #behind(detailed) {
    return (detailed.modes || []).some((mode, i) => {
      const site = this.#sites[i];
      return mode === "bm25" && site && site.rs.engine === "hybrid" && this.#mode(site) === null;
    });
  }

  /** Whether the visitor's pointer or keyboard focus is on the results. */
  #engaged() {
    return this.#results.matches(":hover") || this.#results.contains(this.#root.activeElement);
  }

  /** Results held back (#stale) are searched again and replaced once nothing is on them. */
  #applyWhenIdle() {
    setTimeout(() => { // after the focus moved (focusout fires before it lands)
      if (!this.#stale || this.#engaged()) return;
      this.#stale = false;
      this.run({ upgrade: true });
    }, 0);
  }

  /** The lane line's words: which lane answered the results shown (hybrid sites only). */
  #laneKey() {
    if (!this.#last || !this.#sites.some((site) => site.rs.info && site.rs.info.dense !== "none")) return null;
    if ((this.#last.detailed.modes || []).includes("hybrid")) return "lane.hybrid";
    const models = this.#sites.filter((site) => this.#hasModel(site));
    if (!models.length) return "lane.failed";
    if (models.every((site) => this.#mode(site) === "bm25")) return "lane.bm25";
    return models.some((site) => site.rs.engine === "hybrid") ? "lane.ready" : "lane.loading";
  }

  /** The lane line, and data-lane / data-mode: the lane and mode of the results shown. */
  #showLane(t = this.#t) {
    const key = this.#laneKey();
    this.#lane.hidden = !key;
    this.#lane.textContent = key ? t(key) : "";
    this.#lane.dataset.key = key || "";
    const detailed = this.#last ? this.#last.detailed : null;
    const host = this.#host.dataset;
    if (!detailed) {
      delete host.lane;
      delete host.mode;
      return;
    }
    host.lane = (detailed.lanes || []).includes("instant") ? "instant" : "full";
    host.mode = (detailed.modes || []).includes("hybrid") ? "hybrid" : "bm25";
  }

  /** Build the filter pane. The facets come from the full engine (the worker answers in
   * order), so this waits until it is up: asking earlier would hold back the instant lane. */
  #loadFacets() {
    this.#facets().then((facets) => this.#buildFilters(facets), () => {
      this.#filters.hidden = true; // no facets: searching still works
    });
  }

  /** Every site's facet values, merged: {field: [value, …]}. */
  async #facets() {
    const all = await Promise.all(this.#sites.map((site) => site.rs.stats()));
    const merged = {};
    for (const stats of all) {
      for (const [field, values] of Object.entries(stats.facets || {})) {
        merged[field] = [...new Set([...(merged[field] || []), ...values])].sort();
      }
    }
    return merged;
  }

  // -- searching ------------------------------------------------------------------------

  /** The mode a site is searched in: "bm25" when the visitor chose it, else null (the
   * default: hybrid once the site's model joined, BM25 until then). */
  #mode(site) {
    if (!this.#hasModel(site)) return null;
    const checked = this.#modeSwitch.querySelector("input:checked");
    return checked && checked.value === "bm25" ? "bm25" : null;
  }

  request(now) {
    this.#pages = PAGES_STEP;
    if (!this.#sites.length) {
      this.#pending = true; // runs as soon as the runtime is ready
      return;
    }
    clearTimeout(this.#timer);
    if (now) this.run();
    else this.#timer = setTimeout(() => this.run(), DEBOUNCE_MS);
  }

  #topK() {
    return Math.min(MAX_TOP_K, this.#pages * (SUBS_PER_PAGE + 1) * 2);
  }

  /** Fetch what a search for `query` (default: the words typed so far) needs, after a short
   * pause, so the search that follows finds it in memory. */
  prefetch(query = null) {
    clearTimeout(this.#prefetchTimer);
    if (!this.#sites.length) return;
    this.#prefetchTimer = setTimeout(() => {
      const text = query ?? this.#input.value;
      if (!text.trim()) return;
      for (const site of this.#sites) { // the search reports failures
        const topK = Math.min(this.#topK(), FIRST_TOP_K);
        site.rs.prefetch(text, { mode: this.#mode(site), topK, filters: this.filters }).catch(() => {});
      }
    }, PREFETCH_MS);
  }

  #syncURL(query) {
    if (!this.#host.hasAttribute("sync-url")) return;
    const url = new URL(location.href);
    if (query.trim()) url.searchParams.set("q", query);
    else url.searchParams.delete("q");
    if (url.href !== location.href) history.replaceState(history.state, "", url);
  }

  /** One search over every site: a single site's hits as they come, several fused (RRF). */
  async #searchSites(query, topK) {
    const filters = this.filters;
    const options = (site) => ({ topK, mode: this.#mode(site), filters: Object.keys(filters).length ? filters : null });
    const outs = await Promise.all(this.#sites.map((site) => site.rs.searchDetailed(query, options(site))));
    const lanes = { lanes: outs.map((out) => out.lane), modes: outs.map((out) => out.mode) };
    if (outs.length === 1) return { ...outs[0], ...lanes };
    const hits = fuseSites(outs.map((out, i) => ({ libraryId: this.#sites[i].libraryId, hits: out.hits })), { topK });
    return {
      ...lanes, query, hits, results: hits.map((hit) => hit.snippet),
      tookMs: Math.max(...outs.map((out) => out.tookMs || 0)),
      rerank: outs.map((out) => out.rerank).find(Boolean) ?? null,
      semantic: outs.map((out) => out.semantic).find(Boolean) ?? null,
    };
  }

  /** Search the box's query now and show it (`upgrade`: again, now that a model joined). */
  async run({ keepFocus = false, upgrade = false } = {}) {
    const query = this.#input.value;
    this.#syncURL(query);
    if (!this.#sites.length) return;
    this.#pending = false;
    const mine = ++this.#sequence;
    if (!query.trim()) {
      this.#last = null;
      this.#stale = false;
      this.#showLane();
      this.#results.replaceChildren();
      this.#more.hidden = true;
      this.#held.hidden = true;
      this.#box.setStatus("");
      this.#host.dataset.results = "0";
      this.#done(query);
      return;
    }
    const topK = this.#topK();
    const fresh = !upgrade && (!this.#last || this.#last.query !== query);
    const first = fresh ? Math.min(topK, FIRST_TOP_K) : topK;
    let detailed = await this.#answer(query, first, mine);
    if (!detailed) return;
    if (first < topK && detailed.hits.length >= first) { // the best hits now, then the rest
      this.#last = { query, detailed, topK };
      this.#render(query, detailed, topK);
      detailed = await this.#answer(query, topK, mine);
      if (!detailed) return;
      if (this.#engaged()) { // the rest would move what the visitor points at: held back
        this.#stale = true;
        this.#done(query);
        return;
      }
    }
    const focused = keepFocus ? this.#links().indexOf(this.#root.activeElement) : -1;
    this.#last = { query, detailed, topK };
    this.#stale = !upgrade && this.#behind(detailed); // a model joined while this one ran
    this.#render(query, detailed, topK);
    if (focused >= 0) (this.#links()[focused + 1] || this.#links()[focused])?.focus();
    this.#done(query);
    this.#applyWhenIdle();
  }

  /** ``query``'s hits over every site, or null when it failed or a newer search started. */
  async #answer(query, topK, mine) {
    try {
      const detailed = await this.#searchSites(query, topK);
      return mine === this.#sequence ? detailed : null;
    } catch (err) {
      if (mine === this.#sequence) {
        this.#box.setStatus("failed", { error: err.message }, true);
        this.#host.dispatchEvent(new CustomEvent("ragspine-error", { detail: { error: err.message, phase: "search" } }));
      }
      return null;
    }
  }

  #done(query) {
    this.#host.dataset.query = query;
    this.#host.dataset.searches = String(Number(this.#host.dataset.searches || 0) + 1);
    const { hits = [], lanes = [], modes = [] } = this.#last ? this.#last.detailed : {};
    const detail = { query, hits, lanes, modes };
    this.#host.dispatchEvent(new CustomEvent("ragspine-results", { detail }));
  }

  // -- rendering ------------------------------------------------------------------------

  #render(query, detailed, topK) {
    const groups = groupByPage(detailed.hits);
    const shown = groups.slice(0, this.#pages);
    this.#results.replaceChildren(...shown.map((hits) => this.#page(hits)));
    this.#more.hidden = !(groups.length > shown.length || (detailed.hits.length >= topK && topK < MAX_TOP_K));
    const sem = detailed.semantic;
    const rr = detailed.rerank;
    this.#host.dataset.results = String(detailed.hits.length);
    this.#host.dataset.channel = sem ? sem.channel : "bm25";
    this.#host.dataset.rerank = rr ? (rr.applied ? "applied" : "failed") : "off";
    const held = Number(detailed.heldBack) || 0;
    this.#held.hidden = !held;
    this.#held.textContent = held ? this.#t("held", { count: held }) : "";
    const filtered = Object.keys(this.filters).length > 0;
    if (!groups.length) this.#box.setStatus(filtered ? "none.filtered" : "none", { query });
    else this.#box.setStatus("results", { count: groups.length, query });
    this.#showLane();
    if (this.#host.debug && groups.length) this.#box.status.textContent += this.#debugNote(detailed);
  }

  // Timing, channel and reranking of a search, for the debug status line (English).
  #debugNote({ tookMs, semantic: sem, rerank: rr }) {
    const info = this.#sites[0].rs.info || {};
    const model = info.embeddings ? info.embeddings.name : "the model";
    let channel = "";
    if (sem) {
      channel = {
        hybrid: ` · hybrid: BM25 + ${model}`,
        bm25: " · BM25",
        "bm25:outside-vocabulary": ` · BM25 (the query is outside ${model}'s vocabulary)`,
        "bm25:embedding-failed": ` · BM25 (the model failed: ${sem.error})`,
      }[sem.channel] ?? ` · ${sem.channel}`;
    }
    let reranked = "";
    if (rr) reranked = rr.applied ? ` · reranked by ${rr.spec} (${Math.round(rr.ms)} ms)` : ` · ${rr.spec} failed, fused order kept: ${rr.error}`;
    return ` · ${tookMs.toFixed(1)} ms${channel}${reranked}`;
  }

  #page(hits) {
    const [best, ...rest] = hits;
    const s = best.snippet;
    const li = el("li", { class: "page", part: "result" });
    const title = el("span", { class: "title", text: s.title || s.doc_id });
    const heading = best.section ? best.section.heading : null;
    li.append(this.#hit(best, title, heading && heading !== title.textContent ? heading : null));
    const subs = rest.slice(0, SUBS_PER_PAGE);
    if (subs.length) {
      li.append(el("ul", { class: "subs", "aria-label": this.#t("more.in", { title: s.title || s.doc_id }) },
        ...subs.map((h) => el("li", {}, this.#hit(h, null, h.section ? h.section.heading : s.title || s.doc_id)))));
    }
    return li;
  }

  #siteOf(hit) {
    return this.#sites.find((site) => site.libraryId === hit.library_id) || this.#sites[0];
  }

  #hit(hit, title, crumb) {
    const s = hit.snippet;
    const site = this.#siteOf(hit);
    const ex = hit.excerpt || { text: s.text, highlights: hit.highlights };
    const node = hit.url
      ? el("a", { class: "hit", href: new URL(hit.url, site.bundle).href, part: "hit" })
      : el("div", { class: "hit", tabindex: "0", part: "hit" });
    Object.assign(node.dataset, {
      docId: s.doc_id, locator: s.source_locator || "", library: s.library_id || "", language: s.language || "",
      entity: s.entity || "",
    });
    if (title && this.#sites.length > 1) node.append(el("span", { class: "site", text: site.title }));
    if (title) node.append(title);
    if (s.library_id === "page") node.append(el("span", { class: "badge", text: this.#t("mine") }));
    if (crumb) node.append(el("span", { class: "crumb", text: title ? crumb : `§ ${crumb}` }));
    node.append(marked("span", "excerpt", ex.text, ex.highlights));
    if (this.#host.debug) node.append(el("span", { class: "debug", text: this.#debugScores(s, site) }));
    return node;
  }

  // A hit's locator, sensitivity and the scores its lane computed: a BM25 answer (the instant
  // lane, or the full engine in BM25 mode) has no fused or vector score to show.
  #debugScores(s, site) {
    const sc = s.scores || {};
    const num = (v) => (typeof v === "number" ? v.toFixed(4) : "–");
    const at = this.#sites.indexOf(site);
    const { lanes = [], modes = [] } = this.#last ? this.#last.detailed : {};
    const head = `${s.source_locator} · ${s.sensitivity}`;
    if (modes[at] === "hybrid") return `${head} · fused ${num(sc.fused)} · bm25 ${num(sc.bm25)} · vector ${num(sc.vector)}`;
    return `${head} · ${lanes[at] === "instant" ? "instant lane" : "full engine"} · bm25 ${num(sc.bm25)}`;
  }
}
