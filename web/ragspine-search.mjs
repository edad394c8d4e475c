// <ragspine-search>: site search as a custom element, for the site's own layout.
//
//   <script type="module" src="/_search/ragspine-search.mjs"></script>
//   <ragspine-search bundle="/_search/"></ragspine-search>          inline: box + results
//   <ragspine-search bundle="/_search/" modal></ragspine-search>    a button; Ctrl/⌘-K opens a dialog
//
// Attributes: bundle (default: this file's folder), modal, sync-url (the query lives in ?q=,
// updated with history.replaceState), examples (a JSON list of example queries), placeholder,
// label, autofocus, debug (scores, sensitivity and locators; also ?debug=1 with sync-url).
// Keyboard: "/" focuses the box (Ctrl/⌘-K opens a modal one), ArrowDown moves into the results,
// ArrowUp/ArrowDown between them, Enter opens one, Escape clears the box (then closes a modal).
// Styles: override the --ragspine-* custom properties (see STYLE below) or the ::part()s.
// State for scripts and tests: data-state (idle | booting | ready | error), data-progress
// (percent of the boot's bytes), data-searches, data-query; events ragspine-ready, ragspine-results.
import { RagSpineLite } from "./ragspine-lite.mjs";

const DEBOUNCE_MS = 120;
// While typing, the shards of the words so far are fetched ahead (see RagSpineLite.prefetch).
const PREFETCH_MS = 40;
const PAGES_STEP = 5; // result pages shown, then "More results" adds as many again
const SUBS_PER_PAGE = 3; // sections listed under a page's best hit
const MAX_TOP_K = 200;

const STYLE = `
:host {
  --_font: var(--ragspine-font, system-ui, -apple-system, "Segoe UI", "Noto Sans", "Noto Sans CJK SC", sans-serif);
  --_fg: var(--ragspine-fg, #1d2430);
  --_muted: var(--ragspine-muted, #4f5968);
  --_bg: var(--ragspine-bg, #ffffff);
  --_accent: var(--ragspine-accent, #1f4fb8);
  --_border: var(--ragspine-border, #c9d0db);
  --_mark: var(--ragspine-mark, #ffe17a);
  --_hover: var(--ragspine-hover, #eef3ff);
  --_radius: var(--ragspine-radius, 0.5rem);
  display: block; font-family: var(--_font); color: var(--_fg); line-height: 1.45;
  max-width: var(--ragspine-max-width, 48rem); min-width: 0;
}
:host([hidden]) { display: none; }
* { box-sizing: border-box; }
.vh { position: absolute; width: 1px; height: 1px; margin: -1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; border: 0; }
form { display: flex; flex-wrap: wrap; gap: 0.5rem 0.8rem; align-items: center; margin: 0; }
input[type=search] {
  flex: 1 1 14rem; min-width: 0; width: 100%; font: inherit; font-size: 1.05rem; color: var(--_fg);
  padding: 0.6rem 0.8rem; border: 1px solid var(--_border); border-radius: var(--_radius); background: var(--_bg);
}
input[type=search]:focus-visible { outline: 2px solid var(--_accent); outline-offset: 1px; }
input[type=search][aria-busy=true] { background: repeating-linear-gradient(135deg, #f3f4f6 0 10px, #eceef2 10px 20px); color: var(--_muted); }
fieldset.mode { display: inline-flex; gap: 0.7rem; border: 0; margin: 0; padding: 0; font-size: 0.9rem; white-space: nowrap; }
fieldset.mode[hidden] { display: none; }
fieldset.mode label { display: inline-flex; align-items: center; gap: 0.25rem; min-height: 1.5rem; cursor: pointer; }
.progress { height: 0.35rem; margin-top: 0.4rem; background: #e4e7ec; border-radius: 0.2rem; overflow: hidden; }
.progress[hidden] { display: none; }
.bar { height: 100%; width: 0; background: var(--_accent); transition: width 0.2s ease; }
.status { margin: 0.45rem 0; color: var(--_muted); font-size: 0.9rem; min-height: 1.3em; overflow-wrap: anywhere; }
.status.error { color: #a1261b; }
.examples { margin: 0.3rem 0 0.6rem; font-size: 0.9rem; color: var(--_muted); display: flex; flex-wrap: wrap; gap: 0.35rem; align-items: center; }
.examples[hidden] { display: none; }
.examples button { font: inherit; color: var(--_fg); border: 1px solid var(--_border); background: var(--_bg); border-radius: 1rem; padding: 0.15rem 0.7rem; cursor: pointer; max-width: 100%; overflow-wrap: anywhere; }
.examples button:hover, .examples button:focus-visible { border-color: var(--_accent); }
ol.results, ul.subs { list-style: none; margin: 0; padding: 0; }
li.page { border-top: 1px solid var(--_border); padding: 0.55rem 0; }
li.page:first-child { border-top: 0; }
a.hit, div.hit { display: block; color: inherit; text-decoration: none; padding: 0.35rem 0.5rem; border-radius: var(--_radius); overflow-wrap: anywhere; }
a.hit:hover, a.hit:focus-visible { background: var(--_hover); outline: 2px solid var(--_accent); outline-offset: -2px; }
.title { display: block; color: var(--_accent); font-weight: 600; font-size: 1.05rem; text-decoration: underline; text-decoration-thickness: 1px; text-underline-offset: 2px; }
.crumb { display: block; color: var(--_muted); font-size: 0.85rem; }
.excerpt { display: block; margin: 0.15rem 0 0; font-size: 0.93rem; }
mark { background: var(--_mark); color: inherit; padding: 0 0.05rem; border-radius: 0.15rem; }
ul.subs { margin: 0.1rem 0 0 1rem; border-left: 2px solid var(--_border); }
ul.subs .crumb { color: var(--_accent); font-size: 0.9rem; text-decoration: underline; text-decoration-thickness: 1px; }
.debug { display: block; margin-top: 0.15rem; font: 0.75rem/1.3 ui-monospace, "DejaVu Sans Mono", monospace; color: var(--_muted); }
button.more { font: inherit; margin: 0.5rem 0; padding: 0.4rem 0.9rem; border: 1px solid var(--_border); border-radius: var(--_radius); background: var(--_bg); color: var(--_accent); cursor: pointer; }
button.more[hidden] { display: none; }
button.trigger {
  font: inherit; display: inline-flex; align-items: center; gap: 0.6rem; padding: 0.4rem 0.7rem; color: var(--_muted);
  background: var(--_bg); border: 1px solid var(--_border); border-radius: var(--_radius); cursor: pointer; max-width: 100%;
}
button.trigger:hover, button.trigger:focus-visible { border-color: var(--_accent); color: var(--_fg); }
kbd { font: 0.75rem ui-monospace, monospace; border: 1px solid var(--_border); border-radius: 0.25rem; padding: 0 0.3rem; }
@media (pointer: coarse) { kbd { display: none; } }
dialog {
  width: min(44rem, calc(100vw - 1rem)); max-height: calc(100vh - 4rem); margin: 3rem auto auto; padding: 0.9rem;
  border: 1px solid var(--_border); border-radius: var(--_radius); background: var(--_bg); color: var(--_fg); overflow-y: auto;
}
dialog::backdrop { background: rgba(20, 24, 32, 0.45); }
.dialog-head { display: flex; justify-content: flex-end; margin: -0.3rem -0.3rem 0.3rem 0; }
.close { font: inherit; font-size: 0.85rem; border: 0; background: none; color: var(--_muted); cursor: pointer; padding: 0.2rem 0.4rem; }
`;

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

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

function marked(tag, cls, text, spans) {
  const node = el(tag, { class: cls });
  let at = 0;
  for (const [start, end] of spans || []) {
    if (start > at) node.append(text.slice(at, start));
    node.append(el("mark", { text: text.slice(start, end) }));
    at = end;
  }
  if (at < text.length) node.append(text.slice(at));
  return node;
}

function pageKey(hit) {
  return hit.url ? hit.url.split("#")[0] : `doc:${hit.snippet.doc_id}`;
}

/** Hits grouped by page, in the order of each page's best hit. */
export function groupByPage(hits) {
  const groups = new Map();
  for (const hit of hits) {
    const key = pageKey(hit);
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(hit);
  }
  return [...groups.values()];
}

function formatMB(bytes) {
  return (bytes / 1048576).toFixed(1);
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
  #root;
  #rs = null;
  #input;
  #results;
  #status;
  #progress;
  #more;
  #examples;
  #modeSwitch;
  #dialog = null;
  #timer = 0;
  #prefetchTimer = 0;
  #sequence = 0;
  #pages = PAGES_STEP;
  #pending = false;
  #started = false;
  #bundle = "";

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

  /** The RagSpineLite instance, once ready (null before). */
  get runtime() {
    return this.#rs;
  }

  get query() {
    return this.#input ? this.#input.value : "";
  }

  connectedCallback() {
    if (this.#input) return;
    elements.add(this);
    this.#bundle = new URL(this.getAttribute("bundle") || new URL("./", import.meta.url).href, location.href).href;
    this.dataset.state = "idle";
    this.dataset.searches = "0";
    this.#root.append(el("style", { text: STYLE }));
    const panel = this.#panel();
    if (this.modal) {
      const shortcut = isMac ? "⌘ K" : "Ctrl K";
      const trigger = el("button", { type: "button", class: "trigger", part: "trigger", "aria-haspopup": "dialog" },
        el("span", { text: this.getAttribute("label") || "Search" }), el("kbd", { text: shortcut }));
      trigger.addEventListener("click", () => this.open());
      trigger.addEventListener("pointerenter", () => this.#start(), { once: true });
      const close = el("button", { type: "button", class: "close", text: "Close (Esc)" });
      close.addEventListener("click", () => this.#dialog.close());
      this.#dialog = el("dialog", { part: "dialog", "aria-label": this.getAttribute("label") || "Search" },
        el("div", { class: "dialog-head" }, close), panel);
      this.#dialog.addEventListener("cancel", (event) => {
        if (this.#input.value) { // Escape clears first, closes the second time
          event.preventDefault();
          this.clear();
        }
      });
      this.#root.append(trigger, this.#dialog);
    } else {
      this.#root.append(panel);
      this.#start();
    }
    if (this.hasAttribute("sync-url")) {
      const q = new URLSearchParams(location.search).get("q");
      if (q) {
        this.#input.value = q;
        this.#pending = true;
        if (this.modal) this.open();
      }
    }
    if (this.hasAttribute("autofocus") && !this.modal) this.#input.focus();
  }

  disconnectedCallback() {
    elements.delete(this);
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

  #panel() {
    const label = this.getAttribute("label") || "Search";
    this.#input = el("input", {
      type: "search", id: "q", name: "q", part: "input", autocomplete: "off", spellcheck: "false",
      enterkeyhint: "search", "aria-describedby": "status", "aria-controls": "results",
      placeholder: "Loading search…", "aria-busy": "true",
    });
    const hybrid = el("input", { type: "radio", name: "mode", value: "hybrid", checked: true });
    const bm25 = el("input", { type: "radio", name: "mode", value: "bm25" });
    this.#modeSwitch = el("fieldset", { class: "mode", hidden: true },
      el("legend", { class: "vh", text: "Search mode" }),
      el("label", { title: "Keywords and meaning (BM25 + embeddings)" }, hybrid, "hybrid"),
      el("label", { title: "Keywords only (BM25)" }, bm25, "BM25"));
    const form = el("form", { role: "search", part: "form" },
      el("label", { for: "q", class: "vh", text: label }), this.#input, this.#modeSwitch);
    this.#progress = el("div", {
      class: "progress", role: "progressbar", "aria-label": "Loading the search", "aria-valuemin": "0",
      "aria-valuemax": "100", "aria-valuenow": "0",
    }, el("div", { class: "bar" }));
    this.#status = el("p", { id: "status", class: "status", role: "status", "aria-live": "polite", part: "status" });
    this.#examples = el("div", { class: "examples", hidden: true, part: "examples" });
    let examples = [];
    try {
      examples = JSON.parse(this.getAttribute("examples") || "[]");
    } catch {
      examples = [];
    }
    if (Array.isArray(examples) && examples.length) {
      this.#examples.append(el("span", { text: "Try:" }));
      for (const example of examples.map(String)) {
        const chip = el("button", { type: "button", text: example });
        chip.addEventListener("click", () => this.search(example));
        this.#examples.append(chip);
      }
      this.#examples.hidden = false;
    }
    this.#results = el("ol", { id: "results", class: "results", part: "results", "aria-label": "Search results" });
    this.#more = el("button", { type: "button", class: "more", hidden: true, text: "More results" });
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
    for (const radio of [hybrid, bm25]) radio.addEventListener("change", () => this.#request(true));
    return el("div", { class: "panel", part: "panel" }, form, this.#progress, this.#status, this.#examples, this.#results, this.#more);
  }

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

  #start() {
    if (this.#started) return;
    this.#started = true;
    this.dataset.state = "booting";
    this.#setStatus("Loading search…");  // said at once, before the first progress event
    const entry = runtimeFor(this.#bundle);
    const onProgress = (p) => this.#showProgress(p);
    entry.listeners.add(onProgress);
    if (entry.last) onProgress(entry.last);
    entry.ready.then(
      (rs) => {
        entry.listeners.delete(onProgress);
        this.#ready(rs);
      },
      (err) => {
        entry.listeners.delete(onProgress);
        this.dataset.state = "error";
        this.#progress.hidden = true;
        this.#input.removeAttribute("aria-busy");
        this.#input.placeholder = "Search is unavailable";
        this.#setStatus(`The search could not start: ${err.message}`, true);
      },
    );
  }

  #showProgress({ phase, message, overall }) {
    let percent = null;
    if (phase === "ready") percent = 100;
    else if (overall && overall.total) percent = Math.min(99, Math.round((95 * overall.loaded) / overall.total));
    if (percent !== null) {
      this.dataset.progress = String(percent);
      this.#progress.querySelector(".bar").style.width = `${percent}%`;
      this.#progress.setAttribute("aria-valuenow", String(percent));
    }
    const size = overall && overall.total ? ` (${formatMB(overall.loaded)} of ${formatMB(overall.total)} MB)` : "";
    if (this.dataset.state === "booting") this.#setStatus(`Loading search: ${message || phase}${size}…`);
  }

  #setStatus(text, error = false) {
    this.#status.textContent = text;
    this.#status.classList.toggle("error", error);
  }

  #ready(rs) {
    this.#rs = rs;
    this.dataset.state = "ready";
    this.#progress.hidden = true;
    this.#input.removeAttribute("aria-busy");
    this.#input.placeholder = this.getAttribute("placeholder") || "Search";
    this.#modeSwitch.hidden = !(rs.info && rs.info.embeddings);
    if (this.hasAttribute("sync-url") && new URLSearchParams(location.search).get("mode") === "bm25") {
      this.#modeSwitch.querySelector("input[value=bm25]").checked = true;
    }
    this.#setStatus("");
    this.dispatchEvent(new CustomEvent("ragspine-ready", { detail: { info: rs.info } }));
    if (this.#pending || this.#input.value.trim()) this.#run();
  }

  #mode() {
    if (!this.#rs || !this.#rs.info || !this.#rs.info.embeddings) return null;
    const checked = this.#modeSwitch.querySelector("input:checked");
    return checked ? checked.value : "hybrid";
  }

  #request(now) {
    this.#pages = PAGES_STEP;
    if (!this.#rs) {
      this.#pending = true; // runs as soon as the runtime is ready
      return;
    }
    clearTimeout(this.#timer);
    if (now) this.#run();
    else this.#timer = setTimeout(() => this.#run(), DEBOUNCE_MS);
  }

  // Fetch what the words typed so far need, so the search that follows finds it in memory.
  #prefetch() {
    clearTimeout(this.#prefetchTimer);
    if (!this.#rs) return;
    this.#prefetchTimer = setTimeout(() => {
      const query = this.#input.value;
      const topK = Math.min(MAX_TOP_K, this.#pages * (SUBS_PER_PAGE + 1) * 2);
      if (query.trim()) this.#rs.prefetch(query, { mode: this.#mode(), topK }).catch(() => {}); // the search reports failures
    }, PREFETCH_MS);
  }

  #syncURL(query) {
    if (!this.hasAttribute("sync-url")) return;
    const url = new URL(location.href);
    if (query.trim()) url.searchParams.set("q", query);
    else url.searchParams.delete("q");
    if (url.href !== location.href) history.replaceState(history.state, "", url);
  }

  async #run({ keepFocus = false } = {}) {
    const query = this.#input.value;
    this.#syncURL(query);
    if (!this.#rs) return;
    this.#pending = false;
    const mine = ++this.#sequence;
    if (!query.trim()) {
      this.#results.replaceChildren();
      this.#more.hidden = true;
      this.#setStatus("");
      this.#done(query);
      return;
    }
    const topK = Math.min(MAX_TOP_K, this.#pages * (SUBS_PER_PAGE + 1) * 2);
    let detailed;
    try {
      detailed = await this.#rs.searchDetailed(query, { topK, mode: this.#mode() });
    } catch (err) {
      if (mine === this.#sequence) this.#setStatus(`Search failed: ${err.message}`, true);
      return;
    }
    if (mine !== this.#sequence) return; // a newer search is on its way
    const focused = keepFocus ? this.#links().indexOf(this.#root.activeElement) : -1;
    this.#render(query, detailed, topK);
    if (focused >= 0) (this.#links()[focused + 1] || this.#links()[focused])?.focus();
    this.#done(query);
  }

  #done(query) {
    this.dataset.query = query;
    this.dataset.searches = String(Number(this.dataset.searches || 0) + 1);
    this.dispatchEvent(new CustomEvent("ragspine-results", { detail: { query } }));
  }

  #render(query, detailed, topK) {
    const groups = groupByPage(detailed.hits);
    const shown = groups.slice(0, this.#pages);
    this.#results.replaceChildren(...shown.map((hits) => this.#page(hits)));
    this.#more.hidden = !(groups.length > shown.length || (detailed.hits.length >= topK && topK < MAX_TOP_K));
    const pages = groups.length;
    const sem = detailed.semantic;
    const channel = this.debug && sem ? ` · ${sem.channel}` : "";
    this.#setStatus(pages
      ? `${pages} page${pages === 1 ? "" : "s"} for “${query}”${this.debug ? ` · ${detailed.tookMs.toFixed(1)} ms` : ""}${channel}`
      : `No results for “${query}”.`);
  }

  #page(hits) {
    const [best, ...rest] = hits;
    const s = best.snippet;
    const li = el("li", { class: "page", part: "result" });
    li.append(this.#hit(best, el("span", { class: "title", text: s.title || s.doc_id }), best.section ? best.section.heading : null));
    const subs = rest.filter((h) => h.url !== best.url).slice(0, SUBS_PER_PAGE);
    if (subs.length) {
      li.append(el("ul", { class: "subs", "aria-label": `More in ${s.title || s.doc_id}` },
        ...subs.map((h) => el("li", {}, this.#hit(h, null, h.section ? h.section.heading : s.title || s.doc_id)))));
    }
    return li;
  }

  #hit(hit, title, crumb) {
    const s = hit.snippet;
    const ex = hit.excerpt || { text: s.text, highlights: hit.highlights };
    const node = hit.url
      ? el("a", { class: "hit", href: new URL(hit.url, this.#bundle).href, part: "hit" })
      : el("div", { class: "hit", tabindex: "0", part: "hit" });
    node.dataset.docId = s.doc_id;
    if (title) node.append(title);
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
