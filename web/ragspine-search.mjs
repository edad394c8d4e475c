// <ragspine-search>: site search as a custom element, for the site's own layout.
//
//   <script type="module" src="/_search/ragspine-search.mjs"></script>
//   <ragspine-search bundle="/_search/"></ragspine-search>          inline: box + results
//   <ragspine-search bundle="/_search/" modal></ragspine-search>    a button; Ctrl/⌘-K opens a dialog
//   <ragspine-search bundle="/docs/_search/ /blog/_search/"></ragspine-search>   several sites
//
// Attributes, keyboard, styles, data-* state, events and methods: docs/browser.md.
// Boot on intent: this module is the box (with its words and style sheet) and nothing else
// loads until the visitor points at the box, focuses it, presses "/" or Ctrl/⌘-K, or the page
// opens with ?q= (sync-url); then the results panel (ragspine-panel.mjs) and the runtime
// (ragspine-lite.mjs) load side by side, the worker's instant lane answers plain searches and
// Pyodide boots in the background (on a hybrid site, then the model: the panel replaces BM25
// results with hybrid ones when it joins, never under the visitor's pointer or focus).
import { translator } from "./ragspine-i18n.mjs";
import { STYLE, el } from "./ragspine-ui.mjs";

let panelModule = null;

/** The results panel and the runtime, fetched side by side on the first intent. */
function loadPanel() {
  if (!panelModule) {
    // The panel imports them: start them now (the contract would wait for the runtime).
    for (const module of [import("./ragspine-lite.mjs"), import("./ragspine-contract.mjs")]) module.catch(() => {});
    panelModule = import("./ragspine-panel.mjs");
  }
  return panelModule;
}

const isMac = typeof navigator !== "undefined" && /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent || "");

// Inputs that take no typed text: "/" there is the shortcut too.
const KEYLESS = /^(button|checkbox|color|file|image|radio|range|reset|submit)$/;
// Search boxes that have the focus the page gave them (autofocus, "/", Ctrl/⌘-K) and that the
// visitor has not typed in or clicked since: "/" there focuses and types nothing.
const given = new WeakSet();

function editable(target) {
  if (!target || !(target instanceof Element) || given.has(target)) return false;
  if (target.tagName === "INPUT") return !KEYLESS.test(target.type);
  return target.isContentEditable || /^(TEXTAREA|SELECT)$/.test(target.tagName);
}

const elements = new Set();

function openFirst(event, first, then) {
  const target = [...elements].find(first) || [...elements].find(then);
  if (!target) return;
  event.preventDefault();
  target.open();
}

document.addEventListener("keydown", (event) => {
  const origin = event.composedPath()[0];
  if ((event.key === "k" || event.key === "K") && (event.ctrlKey || event.metaKey) && !event.altKey) {
    openFirst(event, (e) => e.modal, (e) => !e.modal);
  } else if (event.key === "/" && !event.ctrlKey && !event.metaKey && !event.altKey && !editable(origin)) {
    openFirst(event, (e) => !e.modal, (e) => e.modal);
  }
});

export class RagSpineSearch extends HTMLElement {
  static get observedAttributes() {
    return ["lang", "strings"];
  }

  #root;
  #box = null; // the parts the panel builds on: {root, panel, form, input, progress, status, dialog}
  #panel = null; // the results panel (ragspine-panel.mjs), once loaded
  #labels = []; // (t) => void: every word shown, set again when the language changes
  #statusSays = null; // [key, vars, error]: the status line, said again when the language changes
  #t = translator("en");
  #userStrings = null;
  #observer = null;
  #pending = false; // a search asked for before the panel was up
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
    return this.#panel ? this.#panel.runtime : null;
  }

  /** Every site searched, once ready: [{bundle, libraryId, rs, title}]. */
  get sites() {
    return this.#panel ? this.#panel.sites : [];
  }

  /** The filters chosen in the pane: {field: value}. */
  get filters() {
    return this.#panel ? this.#panel.filters : {};
  }

  get query() {
    return this.#box ? this.#box.input.value : "";
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
    if (this.#box) this.#relabel();
  }

  connectedCallback() {
    if (this.#box) return;
    elements.add(this);
    this.#t = translator(this.#lang(), this.strings);
    this.dataset.state = "idle";
    this.dataset.searches = "0";
    this.#root.append(el("style", { text: STYLE }));
    const panel = this.#build();
    if (this.modal) this.#root.append(...this.#modalParts(panel));
    else {
      this.#root.append(panel);
      panel.addEventListener("pointerenter", () => this.#start(), { once: true });
      this.#box.input.addEventListener("focus", () => this.#start(), { once: true });
    }
    this.#observer = new MutationObserver(() => this.#relabel());
    this.#observer.observe(document.documentElement, { attributes: true, attributeFilter: ["lang"] });
    const q = this.hasAttribute("sync-url") && new URLSearchParams(location.search).get("q");
    if (q) {
      this.#box.input.value = q;
      this.#pending = true;
      if (this.modal) this.open();
      else this.#start();
    }
    if (this.hasAttribute("autofocus") && !this.modal) this.#giveFocus();
  }

  disconnectedCallback() {
    elements.delete(this);
    if (this.#observer) this.#observer.disconnect();
  }

  /** Focus the box (opening the dialog of a modal element). */
  open() {
    this.#start();
    const { dialog, input } = this.#box;
    if (dialog && !dialog.open) dialog.showModal();
    this.#giveFocus();
    input.select();
  }

  // The page focuses the box (not the visitor's click or keys): "/" still only focuses.
  #giveFocus() {
    const input = this.#box.input;
    input.focus();
    if (this.#root.activeElement === input && !input.value) given.add(input);
  }

  /** Empty the box and the results. */
  clear() {
    this.#box.input.value = "";
    if (this.#panel) this.#panel.run();
    else this.#pending = false;
    this.#box.input.focus();
  }

  /** Search for `query` now (queued until the runtime is ready). */
  search(query) {
    this.#box.input.value = String(query);
    this.#request(true);
  }

  /** Read the facets again (after documents were added or removed) and search again. */
  async refresh() {
    if (this.#panel) await this.#panel.refresh();
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

  /** Stop relabelling what `apply`s of a rebuilt part set. */
  #forget(applies) {
    this.#labels = this.#labels.filter((apply) => !applies.has(apply));
  }

  #relabel() {
    if (!this.#box) return;
    this.#t = translator(this.#lang(), this.strings);
    for (const apply of this.#labels) apply(this.#t);
    if (this.#statusSays) this.#setStatus(...this.#statusSays);
    if (this.#panel) this.#panel.relabeled();
  }

  /** The status line: a word's key and its values (said again when the language changes). */
  #setStatus(key, vars = {}, error = false) {
    this.#statusSays = key ? [key, vars, error] : null;
    const filled = { ...vars };
    if ("size" in vars) filled.size = vars.size ? this.#t("loading.size", vars.size) : "";
    this.#box.status.textContent = key ? this.#t(key, filled) : "";
    this.#box.status.classList.toggle("error", error);
  }

  /** The box's placeholder for the current state. */
  #placeholder(t = this.#t) {
    const state = this.dataset.state;
    const input = this.#box.input;
    if (state === "ready" || state === "idle") input.placeholder = this.getAttribute("placeholder") || t("placeholder");
    else if (state === "error") input.placeholder = t("unavailable");
    else input.placeholder = t("loading");
  }

  #label() {
    return this.getAttribute("label") || this.#t("search");
  }

  // -- building -------------------------------------------------------------------------

  #modalParts(panel) {
    const name = el("span");
    const trigger = el("button", { type: "button", class: "trigger", part: "trigger", "aria-haspopup": "dialog" },
      name, el("kbd", { text: isMac ? "⌘ K" : "Ctrl K" }));
    trigger.addEventListener("click", () => this.open());
    trigger.addEventListener("pointerenter", () => this.#start(), { once: true });
    const close = el("button", { type: "button", class: "close" });
    const dialog = el("dialog", { part: "dialog" }, el("div", { class: "dialog-head" }, close), panel);
    close.addEventListener("click", () => dialog.close());
    this.#say((t) => {
      name.textContent = this.#label();
      close.textContent = t("close");
      dialog.setAttribute("aria-label", this.#label());
    });
    dialog.addEventListener("cancel", (event) => {
      if (this.#box.input.value) { // Escape clears first, closes the second time
        event.preventDefault();
        this.clear();
      }
    });
    this.#box.dialog = dialog;
    return [trigger, dialog];
  }

  /** The box: form, progress bar, status line and example chips; the panel adds the rest. */
  #build() {
    const input = el("input", {
      type: "search", id: "q", name: "q", part: "input", autocomplete: "off", spellcheck: "false",
      enterkeyhint: "search", "aria-describedby": "status", "aria-controls": "results",
    });
    const label = el("label", { for: "q", class: "vh" });
    const form = el("form", { role: "search", part: "form" }, label, input);
    const progress = el("div", { class: "progress", role: "progressbar", "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": "0" },
      el("div", { class: "bar" }));
    const status = el("p", { id: "status", class: "status", role: "status", "aria-live": "polite", part: "status" });
    const panel = el("div", { class: "panel", part: "panel" }, form, progress, status, this.#examplePart());
    this.#box = {
      root: this.#root, panel, form, input, progress, status, dialog: null, t: () => this.#t,
      say: (apply) => this.#say(apply), forget: (applies) => this.#forget(applies),
      setStatus: (...said) => this.#setStatus(...said), placeholder: () => this.#placeholder(),
      failed: (err) => this.#failed(err),
    };
    this.#say(() => { label.textContent = this.#label(); });
    this.#say((t) => this.#placeholder(t));
    this.#say((t) => progress.setAttribute("aria-label", t("loading.label")));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.#request(true);
    });
    const taken = () => given.delete(input); // the visitor's own now: "/" is a character
    for (const type of ["pointerdown", "blur"]) input.addEventListener(type, taken);
    input.addEventListener("input", () => {
      taken();
      if (this.#panel) this.#panel.typed();
      else this.#pending = true;
    });
    input.addEventListener("keydown", (event) => {
      if (this.#panel) this.#panel.onInputKey(event);
      else if (event.key === "Escape" && input.value && !this.#box.dialog) {
        event.preventDefault();
        this.clear();
      }
    });
    return panel;
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
      for (const intent of ["pointerenter", "focus"]) { // a click is coming: its files first
        chip.addEventListener(intent, () => this.#panel && this.#panel.prefetch(example));
      }
      box.append(chip);
    }
    box.hidden = false;
    return box;
  }

  // -- boot -----------------------------------------------------------------------------

  #request(now) {
    if (this.#panel) this.#panel.request(now);
    else {
      this.#pending = true; // runs as soon as the runtime is ready
      this.#start();
    }
  }

  #start() {
    if (this.#started) return;
    this.#started = true;
    this.dataset.state = "booting";
    this.#box.input.setAttribute("aria-busy", "true");
    this.#placeholder();
    this.#setStatus("loading"); // said at once, before the panel and the runtime are fetched
    loadPanel().then(({ SearchPanel }) => {
      this.#panel = new SearchPanel(this, this.#box, this.#pending);
    }, (err) => this.#failed(err));
  }

  /** The search could not start: say so, and disable the box. */
  #failed(err) {
    const error = err && err.message ? err.message : String(err);
    this.dataset.state = "error";
    this.#box.progress.hidden = true;
    this.#box.input.removeAttribute("aria-busy");
    this.#box.input.disabled = true;
    this.#placeholder();
    this.#setStatus("start.failed", { error }, true);
    this.dispatchEvent(new CustomEvent("ragspine-error", { detail: { error, phase: err && err.phase } }));
  }
}

if (!customElements.get("ragspine-search")) customElements.define("ragspine-search", RagSpineSearch);
