// <ragspine-search>: site search as a custom element, for the site's own layout.
//
//   <script type="module" src="/_search/ragspine-search.mjs"></script>
//   <ragspine-search bundle="/_search/"></ragspine-search>          inline: box + results
//   <ragspine-search bundle="/_search/" modal></ragspine-search>    a button; Ctrl/⌘-K opens a dialog
//   <ragspine-search bundle="/docs/_search/ /blog/_search/"></ragspine-search>   several sites
//
// Attributes: bundle (default: this file's folder; several space-separated URLs search several
// sites, fused with RRF as Python's MultiIndexRetriever), libraries (the sites' library_id,
// space-separated; default: their bundle URLs), lang (else the nearest lang, else the
// document's), strings (JSON {key: template} overriding the words, see ragspine-i18n.mjs),
// facets (the filters offered, comma-separated, or "none"; default: every facet with two or
// more values), filters-open (the filter pane starts open), modal, sync-url (the query lives in ?q=, updated with history.replaceState),
// examples (a JSON list of example queries), placeholder, label, autofocus, debug (scores,
// sensitivity and locators; also ?debug=1 with sync-url).
// Keyboard: "/" focuses the box (Ctrl/⌘-K opens a modal one), ArrowDown moves into the results,
// ArrowUp/ArrowDown between them, Enter opens one, Escape clears the box (then closes a modal).
// Styles: sizes are em of the host's font size (--ragspine-font-size sets it); override the
// --ragspine-* custom properties (see STYLE below) or the ::part()s.
// State for scripts and tests: data-state (idle | booting | ready | error), data-progress
// (percent of the boot's bytes), data-searches, data-query, data-results (hits shown),
// data-channel, data-rerank; events ragspine-ready, ragspine-results {query, hits (best
// first)}, ragspine-error {error, phase} (phase "search" for a failed search); methods open(), search(q), clear(), refresh() (read the
// facets again after documents were added), properties runtime, sites, filters, strings.
// Boot on intent: until the visitor points at the box, focuses it, presses "/" or Ctrl/⌘-K, or
// the page opens with ?q= (sync-url), only the element's own files are loaded; then the runtime
// opens, the worker's instant lane answers plain searches and Pyodide boots in the background
// (data-engine: instant | full, once ready).
import { translator } from "./ragspine-i18n.mjs";
import { STYLE, el, groupByPage, marked } from "./ragspine-ui.mjs";
import { MAX_TOP_K } from "./ragspine-contract.mjs";

export { groupByPage };

const DEBOUNCE_MS = 120;
// While typing, the shards of the words so far are fetched ahead (see RagSpineLite.prefetch).
const PREFETCH_MS = 40;
const PAGES_STEP = 5; // result pages shown, then "More results" adds as many again
const SUBS_PER_PAGE = 3; // sections listed under a page's best hit
const FACETS = ["language", "topic", "entity", "geography", "period"];

// One runtime per bundle, shared by every element on the page.
const runtimes = new Map();
let runtime = null;

/** The JS API module, imported on the first intent (a page view that never searches skips it). */
function runtimeModule() {
  runtime ??= import("./ragspine-lite.mjs");
  return runtime;
}

function runtimeFor(bundle) {
  let entry = runtimes.get(bundle);
  if (!entry) {
    entry = { listeners: new Set(), last: null, ready: null };
    entry.ready = runtimeModule().then(({ RagSpineLite }) => RagSpineLite.open({
      bundle,
      onProgress: (p) => {
        entry.last = p;
        for (const listener of entry.listeners) listener(p);
      },
    }));
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

const isMac = typeof navigator !== "undefined" && /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent || "");

function editable(target) {
  if (!target || !(target instanceof Element)) return false;
  return target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName);
}

const elements = new Set();

document.addEventListener("keydown", (event) => {
  const origin = event.composedPath()[0];
  if ((event.key === "k" || event.key === "K") && (event.ctrlKey || event.metaKey) && !event.altKey) {
    const target = [...elements].find((e) => e.modal) || [...elements].find((e) => !e.modal);
    if (target) {
      event.preventDefault();
      target.open();
    }
    return;
  }
  if (event.key === "/" && !event.ctrlKey && !event.metaKey && !event.altKey && !editable(origin)) {
    const target = [...elements].find((e) => !e.modal) || [...elements].find((e) => e.modal);
    if (target) {
      event.preventDefault();
      target.open();
    }
  }
});

export class RagSpineSearch extends HTMLElement {
  static get observedAttributes() {
    return ["lang", "strings"];
  }

  #root;
  #sites = []; // [{bundle, libraryId, rs, title}] once ready
  #bundles = [];
  #input;
  #results;
  #status;
  #statusSays = null; // [key, vars, error]: the status line, said again when the language changes
  #held;
  #progress;
  #more;
  #examples;
  #modeSwitch;
  #filters;
  #facetBox;
  #dialog = null;
  #labels = []; // (t) => void: every word shown, set again when the language changes
  #facetLabels = new Set(); // those of the filter pane, which refresh() builds again
  #t = translator("en");
  #userStrings = null;
  #observer = null;
  #last = null; // the last search shown: {query, detailed, topK}
  #timer = 0;
  #prefetchTimer = 0;
  #sequence = 0;
  #pages = PAGES_STEP;
  #pending = false;
  #started = false;

  constructor() {
    super();
    this.#root = this.attachShadow({ mode: "open" });
  }

  get modal() {
    return this.hasAttribute("modal");
  }

  get debug() {
    if (this.hasAttribute("debug")) return true;
    return this.hasAttribute("sync-url") && new URLSearchParams(location.search).get("debug") === "1";
  }

  /** The (first) site's RagSpineLite instance, once ready (null before). */
  get runtime() {
    return this.#sites.length ? this.#sites[0].rs : null;
  }

  /** Every site searched, once ready: [{bundle, libraryId, rs, title}]. */
  get sites() {
    return this.#sites.map((site) => ({ ...site }));
  }

  get query() {
    return this.#input ? this.#input.value : "";
  }

  /** The language of the element's words (a STRINGS key of ragspine-i18n.mjs). */
  get language() {
    return this.#t.lang;
  }

  /** Per-string overrides ({key: template}); setting them relabels the element. */
  get strings() {
    return { ...(this.#userStrings || this.#attributeStrings()) };
  }

  set strings(value) {
    this.#userStrings = value && typeof value === "object" ? { ...value } : null;
    this.#relabel();
  }

  attributeChangedCallback() {
    if (this.#input) this.#relabel();
  }

  connectedCallback() {
    if (this.#input) return;
    elements.add(this);
    const here = new URL("./", import.meta.url).href;
    this.#bundles = [...new Set(words(this.getAttribute("bundle") || here).map((b) => new URL(b, location.href).href))];
    this.#t = translator(this.#lang(), this.strings);
    this.dataset.state = "idle";
    this.dataset.searches = "0";
    this.#root.append(el("style", { text: STYLE }));
    const panel = this.#panel();
    if (this.modal) this.#root.append(...this.#modalParts(panel));
    else {
      this.#root.append(panel);
      panel.addEventListener("pointerenter", () => this.#start(), { once: true });
      this.#input.addEventListener("focus", () => this.#start(), { once: true });
    }
    this.#observer = new MutationObserver(() => this.#relabel());
    this.#observer.observe(document.documentElement, { attributes: true, attributeFilter: ["lang"] });
    if (this.hasAttribute("sync-url")) {
      const q = new URLSearchParams(location.search).get("q");
      if (q) {
        this.#input.value = q;
        this.#pending = true;
        if (this.modal) this.open();
        else this.#start();
      }
    }
    if (this.hasAttribute("autofocus") && !this.modal) this.#input.focus();
  }

  disconnectedCallback() {
    elements.delete(this);
    if (this.#observer) this.#observer.disconnect();
  }

  /** Focus the box (opening the dialog of a modal element). */
  open() {
    this.#start();
    if (this.#dialog && !this.#dialog.open) this.#dialog.showModal();
    this.#input.focus();
    this.#input.select();
  }

  /** Empty the box and the results. */
  clear() {
    this.#input.value = "";
    this.#pending = false;
    this.#run();
    this.#input.focus();
  }

  /** Search for `query` now (queued until the runtime is ready). */
  search(query) {
    this.#input.value = String(query);
    this.#request(true);
  }

  // -- words ----------------------------------------------------------------------------

  #lang() {
    const own = this.closest("[lang]");
    return (own && own.getAttribute("lang")) || document.documentElement.lang || "en";
  }

  #attributeStrings() {
    try {
      const parsed = JSON.parse(this.getAttribute("strings") || "{}");
      return parsed && typeof parsed === "object" && !Array.isArray(parsed) ? parsed : {};
    } catch {
      return {};
    }
  }

  /** Set `apply(t)` now and again whenever the language or the strings change. */
  #say(apply) {
    this.#labels.push(apply);
    apply(this.#t);
  }

  #sayFacet(apply) {
    this.#facetLabels.add(apply);
    this.#say(apply);
  }

  #relabel() {
    if (!this.#input) return;
    this.#t = translator(this.#lang(), this.strings);
    for (const apply of this.#labels) apply(this.#t);
    if (this.#statusSays) this.#setStatus(...this.#statusSays);
    if (this.#last) this.#render(this.#last.query, this.#last.detailed, this.#last.topK);
  }

  #label() {
    return this.getAttribute("label") || this.#t("search");
  }

  // -- building -------------------------------------------------------------------------

  #modalParts(panel) {
    const shortcut = isMac ? "⌘ K" : "Ctrl K";
    const name = el("span");
    const trigger = el("button", { type: "button", class: "trigger", part: "trigger", "aria-haspopup": "dialog" },
      name, el("kbd", { text: shortcut }));
    trigger.addEventListener("click", () => this.open());
    trigger.addEventListener("pointerenter", () => this.#start(), { once: true });
    const close = el("button", { type: "button", class: "close" });
    close.addEventListener("click", () => this.#dialog.close());
    this.#dialog = el("dialog", { part: "dialog" }, el("div", { class: "dialog-head" }, close), panel);
    this.#say((t) => {
      name.textContent = this.#label();
      close.textContent = t("close");
      this.#dialog.setAttribute("aria-label", this.#label());
    });
    this.#dialog.addEventListener("cancel", (event) => {
      if (this.#input.value) { // Escape clears first, closes the second time
        event.preventDefault();
        this.clear();
      }
    });
    return [trigger, this.#dialog];
  }

  #panel() {
    this.#input = el("input", {
      type: "search", id: "q", name: "q", part: "input", autocomplete: "off", spellcheck: "false",
      enterkeyhint: "search", "aria-describedby": "status", "aria-controls": "results",
    });
    const label = el("label", { for: "q", class: "vh" });
    this.#say(() => { label.textContent = this.#label(); });
    this.#say((t) => this.#placeholder(t));
    const form = el("form", { role: "search", part: "form" }, label, this.#input, this.#modePart());
    const progressLabel = (t) => this.#progress.setAttribute("aria-label", t("loading.label"));
    this.#progress = el("div", { class: "progress", role: "progressbar", "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": "0" },
      el("div", { class: "bar" }));
    this.#say(progressLabel);
    this.#status = el("p", { id: "status", class: "status", role: "status", "aria-live": "polite", part: "status" });
    this.#held = el("p", { class: "note", hidden: true, part: "note" });
    this.#filters = this.#filterPart();
    this.#examples = this.#examplePart();
    this.#results = el("ol", { id: "results", class: "results", part: "results" });
    this.#say((t) => this.#results.setAttribute("aria-label", t("results.label")));
    this.#more = el("button", { type: "button", class: "more", hidden: true });
    this.#say((t) => { this.#more.textContent = t("more"); });
    this.#more.addEventListener("click", () => {
      this.#pages += PAGES_STEP;
      this.#run({ keepFocus: true });
    });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.#request(true);
    });
    this.#input.addEventListener("input", () => {
      this.#prefetch();
      this.#request(false);
    });
    this.#input.addEventListener("keydown", (event) => this.#onInputKey(event));
    this.#results.addEventListener("keydown", (event) => this.#onResultsKey(event));
    return el("div", { class: "panel", part: "panel" },
      form, this.#filters, this.#progress, this.#status, this.#held, this.#examples, this.#results, this.#more);
  }

  #placeholder(t) {
    const state = this.dataset.state;
    if (state === "ready" || state === "idle") this.#input.placeholder = this.getAttribute("placeholder") || t("placeholder");
    else if (state === "error") this.#input.placeholder = t("unavailable");
    else this.#input.placeholder = t("loading");
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
    this.#say((t) => {
      legend.textContent = t("mode");
      hybridText.data = t("hybrid");
      bm25Text.data = t("bm25");
      hybridLabel.title = t("hybrid.title");
      bm25Label.title = t("bm25.title");
    });
    for (const radio of [hybrid, bm25]) radio.addEventListener("change", () => this.#request(true));
    return this.#modeSwitch;
  }

  #examplePart() {
    const box = el("div", { class: "examples", hidden: true, part: "examples" });
    let examples = [];
    try {
      examples = JSON.parse(this.getAttribute("examples") || "[]");
    } catch {
      examples = [];
    }
    if (!Array.isArray(examples) || !examples.length) return box;
    const lead = el("span");
    this.#say((t) => { lead.textContent = t("try"); });
    box.append(lead);
    for (const example of examples.map(String)) {
      const chip = el("button", { type: "button", text: example });
      chip.addEventListener("click", () => this.search(example));
      box.append(chip);
    }
    box.hidden = false;
    return box;
  }

  // -- filters --------------------------------------------------------------------------

  #filterPart() {
    const box = el("details", { class: "filters", hidden: true, part: "filters", open: this.hasAttribute("filters-open") });
    const summary = el("summary");
    this.#facetBox = el("div", { class: "facets" });
    box.append(summary, this.#facetBox);
    this.#say((t) => {
      const active = Object.keys(this.filters).length;
      summary.textContent = active ? t("filters.active", { count: active }) : t("filters");
    });
    return box;
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
    const asked = this.getAttribute("facets");
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
    this.#relabel();
    await this.#run();
  }

  #buildFilters(facets) {
    const fields = this.#offered(facets);
    this.#labels = this.#labels.filter((apply) => !this.#facetLabels.has(apply));
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
    this.#relabel();
    this.#request(true);
  }

  // -- keyboard -------------------------------------------------------------------------

  #links() {
    return [...this.#results.querySelectorAll(".hit")];
  }

  #onInputKey(event) {
    if (event.key === "ArrowDown") {
      const first = this.#links()[0];
      if (first) {
        event.preventDefault();
        first.focus();
      }
    } else if (event.key === "Escape" && this.#input.value && !this.#dialog) {
      event.preventDefault();
      this.clear();
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
    } else if (event.key === "Escape" && !this.#dialog) {
      event.preventDefault();
      this.#input.focus();
    }
  }

  // -- boot -----------------------------------------------------------------------------

  #start() {
    if (this.#started) return;
    this.#started = true;
    this.dataset.state = "booting";
    this.#input.setAttribute("aria-busy", "true");
    this.#placeholder(this.#t);
    this.#setStatus("loading"); // said at once, before the first progress event
    const entries = this.#bundles.map((bundle) => ({ bundle, entry: runtimeFor(bundle) }));
    // Followed until every full engine is up (after the instant lane, it boots in the background).
    const onProgress = () => {
      const reports = entries.map(({ entry }) => entry.last).filter(Boolean);
      this.#showProgress(reports);
      if (reports.length === entries.length && reports.every((p) => p.phase === "ready")) {
        for (const { entry } of entries) entry.listeners.delete(onProgress);
        if (this.dataset.state === "ready") {
          this.dataset.engine = "full";
          this.#loadFacets();
        }
      }
    };
    for (const { entry } of entries) entry.listeners.add(onProgress);
    onProgress();
    Promise.allSettled(entries.map(({ entry }) => entry.ready)).then((settled) => {
      const ids = words(this.getAttribute("libraries"));
      const sites = [];
      const errors = [];
      settled.forEach((outcome, i) => {
        const bundle = entries[i].bundle;
        if (outcome.status === "rejected") errors.push(outcome.reason);
        else sites.push({ bundle, libraryId: ids[i] || bundle, rs: outcome.value, title: outcome.value.manifest?.title || bundle });
      });
      if (!sites.length) this.#failed(errors[0]);
      else this.#ready(sites, errors);
    });
  }

  #failed(err) {
    const error = err && err.message ? err.message : String(err);
    this.dataset.state = "error";
    this.#progress.hidden = true;
    this.#input.removeAttribute("aria-busy");
    this.#input.disabled = true;
    this.#placeholder(this.#t);
    this.#setStatus("start.failed", { error }, true);
    this.dispatchEvent(new CustomEvent("ragspine-error", { detail: { error, phase: err && err.phase } }));
  }

  #showProgress(reports) {
    if (!reports.length) return;
    const loaded = reports.reduce((sum, p) => sum + ((p.overall && p.overall.loaded) || 0), 0);
    const total = reports.reduce((sum, p) => sum + ((p.overall && p.overall.total) || 0), 0);
    const booting = reports.find((p) => p.phase !== "ready") || reports[0];
    let percent = null;
    if (reports.every((p) => p.phase === "ready")) percent = 100;
    else if (total) percent = Math.min(99, Math.round((95 * loaded) / total));
    if (percent !== null) {
      this.dataset.progress = String(percent);
      this.#progress.querySelector(".bar").style.width = `${percent}%`;
      this.#progress.setAttribute("aria-valuenow", String(percent));
    }
    if (this.dataset.state !== "booting") return;
    const size = total ? { loaded: formatMB(loaded), total: formatMB(total) } : null;
    this.#setStatus("loading.progress", { phase: booting.message || booting.phase, size });
  }

  #setStatus(key, vars = {}, error = false) {
    this.#statusSays = key ? [key, vars, error] : null;
    const filled = { ...vars };
    if ("size" in vars) filled.size = vars.size ? this.#t("loading.size", vars.size) : "";
    this.#status.textContent = key ? this.#t(key, filled) : "";
    this.#status.classList.toggle("error", error);
  }

  #ready(sites, errors) {
    this.#sites = sites;
    this.#progress.hidden = true;
    this.#input.removeAttribute("aria-busy");
    this.#modeSwitch.hidden = !sites.some((site) => site.rs.info && site.rs.info.embeddings);
    if (this.hasAttribute("sync-url") && new URLSearchParams(location.search).get("mode") === "bm25") {
      this.#modeSwitch.querySelector("input[value=bm25]").checked = true;
    }
    this.dataset.state = "ready";
    this.dataset.engine = sites.every((site) => site.rs.engine === "full") ? "full" : "instant";
    if (this.dataset.engine === "full") this.#loadFacets();
    this.#placeholder(this.#t);
    if (errors.length) this.#setStatus("sites.failed", { count: errors.length, error: errors[0].message }, true);
    else this.#setStatus("");
    this.dispatchEvent(new CustomEvent("ragspine-ready", { detail: { info: sites[0].rs.info, sites: this.sites } }));
    if (this.#pending || this.#input.value.trim()) this.#run();
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

  #mode(site) {
    if (!site.rs.info || !site.rs.info.embeddings) return null;
    const checked = this.#modeSwitch.querySelector("input:checked");
    return checked ? checked.value : "hybrid";
  }

  #request(now) {
    this.#pages = PAGES_STEP;
    if (!this.#sites.length) {
      this.#pending = true; // runs as soon as the runtime is ready
      return;
    }
    clearTimeout(this.#timer);
    if (now) this.#run();
    else this.#timer = setTimeout(() => this.#run(), DEBOUNCE_MS);
  }

  #topK() {
    return Math.min(MAX_TOP_K, this.#pages * (SUBS_PER_PAGE + 1) * 2);
  }

  // Fetch what the words typed so far need, so the search that follows finds it in memory.
  #prefetch() {
    clearTimeout(this.#prefetchTimer);
    if (!this.#sites.length) return;
    this.#prefetchTimer = setTimeout(() => {
      const query = this.#input.value;
      if (!query.trim()) return;
      for (const site of this.#sites) { // the search reports failures
        site.rs.prefetch(query, { mode: this.#mode(site), topK: this.#topK(), filters: this.filters }).catch(() => {});
      }
    }, PREFETCH_MS);
  }

  #syncURL(query) {
    if (!this.hasAttribute("sync-url")) return;
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
    if (outs.length === 1) return outs[0];
    const { fuseSites } = await runtimeModule();
    const hits = fuseSites(outs.map((out, i) => ({ libraryId: this.#sites[i].libraryId, hits: out.hits })), { topK });
    return {
      query, hits, results: hits.map((hit) => hit.snippet),
      tookMs: Math.max(...outs.map((out) => out.tookMs || 0)),
      rerank: outs.map((out) => out.rerank).find(Boolean) ?? null,
      semantic: outs.map((out) => out.semantic).find(Boolean) ?? null,
    };
  }

  async #run({ keepFocus = false } = {}) {
    const query = this.#input.value;
    this.#syncURL(query);
    if (!this.#sites.length) return;
    this.#pending = false;
    const mine = ++this.#sequence;
    if (!query.trim()) {
      this.#last = null;
      this.#results.replaceChildren();
      this.#more.hidden = true;
      this.#held.hidden = true;
      this.#setStatus("");
      this.dataset.results = "0";
      this.#done(query);
      return;
    }
    const topK = this.#topK();
    let detailed;
    try {
      detailed = await this.#searchSites(query, topK);
    } catch (err) {
      if (mine === this.#sequence) {
        this.#setStatus("failed", { error: err.message }, true);
        this.dispatchEvent(new CustomEvent("ragspine-error", { detail: { error: err.message, phase: "search" } }));
      }
      return;
    }
    if (mine !== this.#sequence) return; // a newer search is on its way
    const focused = keepFocus ? this.#links().indexOf(this.#root.activeElement) : -1;
    this.#last = { query, detailed, topK };
    this.#render(query, detailed, topK);
    if (focused >= 0) (this.#links()[focused + 1] || this.#links()[focused])?.focus();
    this.#done(query);
  }

  #done(query) {
    this.dataset.query = query;
    this.dataset.searches = String(Number(this.dataset.searches || 0) + 1);
    this.dispatchEvent(new CustomEvent("ragspine-results", { detail: { query, hits: this.#last ? this.#last.detailed.hits : [] } }));
  }

  // -- rendering ------------------------------------------------------------------------

  #render(query, detailed, topK) {
    const groups = groupByPage(detailed.hits);
    const shown = groups.slice(0, this.#pages);
    this.#results.replaceChildren(...shown.map((hits) => this.#page(hits)));
    this.#more.hidden = !(groups.length > shown.length || (detailed.hits.length >= topK && topK < MAX_TOP_K));
    const sem = detailed.semantic;
    const rr = detailed.rerank;
    this.dataset.results = String(detailed.hits.length);
    this.dataset.channel = sem ? sem.channel : "bm25";
    this.dataset.rerank = rr ? (rr.applied ? "applied" : "failed") : "off";
    const held = Number(detailed.heldBack) || 0;
    this.#held.hidden = !held;
    this.#held.textContent = held ? this.#t("held", { count: held }) : "";
    const filtered = Object.keys(this.filters).length > 0;
    if (!groups.length) this.#setStatus(filtered ? "none.filtered" : "none", { query });
    else this.#setStatus("results", { count: groups.length, query });
    if (this.debug && groups.length) this.#status.textContent += this.#debugNote(detailed);
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
    if (this.debug) {
      const sc = s.scores || {};
      const num = (v) => (typeof v === "number" ? v.toFixed(4) : "–");
      node.append(el("span", { class: "debug", text: `${s.source_locator} · ${s.sensitivity} · fused ${num(sc.fused)} · bm25 ${num(sc.bm25)} · vector ${num(sc.vector)}` }));
    }
    return node;
  }
}

if (!customElements.get("ragspine-search")) customElements.define("ragspine-search", RagSpineSearch);
