// The building blocks of <ragspine-search>: its style sheet (every size in em of the host's
// font size, --ragspine-* custom properties), DOM helpers and the grouping of hits by page.

export const STYLE = `
:host {
  --_font: var(--ragspine-font, system-ui, -apple-system, "Segoe UI", "Noto Sans", "Noto Sans CJK SC", sans-serif);
  --_fg: var(--ragspine-fg, #1d2430);
  --_muted: var(--ragspine-muted, #4f5968);
  --_bg: var(--ragspine-bg, #ffffff);
  --_accent: var(--ragspine-accent, #1f4fb8);
  --_border: var(--ragspine-border, #c9d0db);
  --_mark: var(--ragspine-mark, #ffe17a);
  --_hover: var(--ragspine-hover, #eef3ff);
  --_radius: var(--ragspine-radius, 0.5em);
  display: block; font-family: var(--_font); font-size: var(--ragspine-font-size, 1em); color: var(--_fg);
  line-height: 1.45; max-width: var(--ragspine-max-width, 48em); min-width: 0;
}
:host([hidden]) { display: none; }
* { box-sizing: border-box; }
.vh { position: absolute; width: 1px; height: 1px; margin: -1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; border: 0; }
form { display: flex; flex-wrap: wrap; gap: 0.5em 0.8em; align-items: center; margin: 0; }
input[type=search] {
  flex: 1 1 14em; min-width: 0; width: 100%; font: inherit; font-size: 1.05em; color: var(--_fg);
  padding: 0.55em 0.75em; border: 1px solid var(--_border); border-radius: var(--_radius); background: var(--_bg);
}
input[type=search]:focus-visible, select:focus-visible, summary:focus-visible { outline: 2px solid var(--_accent); outline-offset: 1px; }
input[type=search][aria-busy=true] { background: repeating-linear-gradient(135deg, #f3f4f6 0 10px, #eceef2 10px 20px); color: var(--_muted); }
fieldset.mode { display: inline-flex; gap: 0.7em; border: 0; margin: 0; padding: 0; font-size: 0.9em; white-space: nowrap; }
fieldset.mode[hidden], details.filters[hidden] { display: none; }
fieldset.mode label { display: inline-flex; align-items: center; gap: 0.25em; min-height: 1.5em; cursor: pointer; }
details.filters { margin: 0.45em 0 0; font-size: 0.9em; }
details.filters summary { cursor: pointer; color: var(--_accent); width: max-content; max-width: 100%; padding: 0.15em 0; }
.facets { display: flex; flex-wrap: wrap; gap: 0.5em 0.9em; align-items: flex-end; margin: 0.35em 0 0.2em; }
.facet { display: flex; flex-direction: column; gap: 0.15em; color: var(--_muted); min-width: 0; max-width: 100%; }
.facet select {
  font: inherit; color: var(--_fg); background: var(--_bg); border: 1px solid var(--_border); border-radius: var(--_radius);
  padding: 0.3em 0.4em; min-height: 2.2em; max-width: 100%; min-width: 7em;
}
button.clear { font: inherit; min-height: 2.2em; padding: 0.3em 0.7em; border: 1px solid var(--_border); border-radius: var(--_radius); background: var(--_bg); color: var(--_accent); cursor: pointer; }
.progress { height: 0.35em; margin-top: 0.4em; background: #e4e7ec; border-radius: 0.2em; overflow: hidden; }
.progress[hidden] { display: none; }
.bar { height: 100%; width: 0; background: var(--_accent); transition: width 0.2s ease; }
.status { margin: 0.45em 0; color: var(--_muted); font-size: 0.9em; min-height: 1.3em; overflow-wrap: anywhere; }
.status.error { color: #a1261b; }
.lane { margin: -0.2em 0 0.45em; color: var(--_muted); font-size: 0.85em; line-height: 1.45; min-height: 1.45em; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.lane[hidden] { display: none; }
.note { margin: 0.3em 0; color: var(--_muted); font-size: 0.85em; }
.note[hidden] { display: none; }
.examples { margin: 0.3em 0 0.6em; font-size: 0.9em; color: var(--_muted); display: flex; flex-wrap: wrap; gap: 0.35em; align-items: center; }
.examples[hidden] { display: none; }
.examples button { font: inherit; color: var(--_fg); border: 1px solid var(--_border); background: var(--_bg); border-radius: 1em; padding: 0.15em 0.7em; cursor: pointer; max-width: 100%; overflow-wrap: anywhere; }
.examples button:hover, .examples button:focus-visible { border-color: var(--_accent); }
ol.results, ul.subs { list-style: none; margin: 0; padding: 0; }
li.page { border-top: 1px solid var(--_border); padding: 0.55em 0; }
li.page:first-child { border-top: 0; }
a.hit, div.hit { display: block; color: inherit; text-decoration: none; padding: 0.35em 0.5em; border-radius: var(--_radius); overflow-wrap: anywhere; }
a.hit:hover, a.hit:focus-visible, div.hit:focus-visible { background: var(--_hover); outline: 2px solid var(--_accent); outline-offset: -2px; }
.title { display: block; color: var(--_accent); font-weight: 600; font-size: 1.05em; text-decoration: underline; text-decoration-thickness: 1px; text-underline-offset: 2px; }
.site { display: inline-block; margin-bottom: 0.1em; color: var(--_muted); font-size: 0.8em; }
.badge { display: inline-block; margin: 0.1em 0; font-size: 0.75em; border: 1px solid var(--_accent); color: var(--_accent); border-radius: 0.6em; padding: 0 0.45em; }
.crumb { display: block; color: var(--_muted); font-size: 0.85em; }
.excerpt { display: block; margin: 0.15em 0 0; font-size: 0.93em; }
mark { background: var(--_mark); color: inherit; padding: 0 0.05em; border-radius: 0.15em; }
ul.subs { margin: 0.1em 0 0 1em; border-left: 2px solid var(--_border); }
ul.subs .crumb { color: var(--_accent); font-size: 0.9em; text-decoration: underline; text-decoration-thickness: 1px; }
.debug { display: block; margin-top: 0.15em; font: 0.75em/1.3 ui-monospace, "DejaVu Sans Mono", monospace; color: var(--_muted); }
button.more { font: inherit; margin: 0.5em 0; padding: 0.4em 0.9em; border: 1px solid var(--_border); border-radius: var(--_radius); background: var(--_bg); color: var(--_accent); cursor: pointer; }
button.more[hidden] { display: none; }
button.trigger {
  font: inherit; display: inline-flex; align-items: center; gap: 0.6em; padding: 0.4em 0.7em; color: var(--_muted);
  background: var(--_bg); border: 1px solid var(--_border); border-radius: var(--_radius); cursor: pointer; max-width: 100%;
}
button.trigger:hover, button.trigger:focus-visible { border-color: var(--_accent); color: var(--_fg); }
kbd { font: 0.75em ui-monospace, monospace; border: 1px solid var(--_border); border-radius: 0.25em; padding: 0 0.3em; }
@media (pointer: coarse) { kbd { display: none; } }
dialog {
  width: min(44em, calc(100vw - 1em)); max-height: calc(100vh - 4em); margin: 3em auto auto; padding: 0.9em;
  border: 1px solid var(--_border); border-radius: var(--_radius); background: var(--_bg); color: var(--_fg); overflow-y: auto;
}
dialog::backdrop { background: rgba(20, 24, 32, 0.45); }
.dialog-head { display: flex; justify-content: flex-end; margin: -0.3em -0.3em 0.3em 0; }
.close { font: inherit; font-size: 0.85em; border: 0; background: none; color: var(--_muted); cursor: pointer; padding: 0.2em 0.4em; }
`;

export function el(tag, attrs = {}, ...children) {
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

export function marked(tag, cls, text, spans) {
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
  const site = hit.library_id ? `${hit.library_id}\u001f` : "";
  return site + (hit.url ? hit.url.split("#")[0] : `doc:${hit.snippet.doc_id}`);
}

function sectionKey(hit) {
  return hit.url || `doc:${hit.snippet.doc_id}#${hit.section ? hit.section.anchor || hit.section.heading : ""}`;
}

/** Hits grouped by page, in the order of each page's best hit; a section (one link) is
 *  listed once per page, by its best hit (overlapping chunks of a section link to it too). */
export function groupByPage(hits) {
  const groups = new Map();
  for (const hit of hits) {
    const key = pageKey(hit);
    if (!groups.has(key)) groups.set(key, new Map());
    const sections = groups.get(key);
    if (!sections.has(sectionKey(hit))) sections.set(sectionKey(hit), hit);
  }
  return [...groups.values()].map((sections) => [...sections.values()]);
}

