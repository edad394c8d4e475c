// Page side of `python bench/browser.py --bytes`: one engine per visit, searching one site.
//
//   bytes.html?engine=ENGINE&site=N/SRC&q=QUERY
//
// Opens ENGINE on the N-page site built from SRC ("html" or "md") sources, runs QUERY and sets
// `window.first` to `{ms, at, ids, lane}` (ms from navigation to the first result list, `at`
// the same moment in epoch ms, ids = page names of the top 10, lane = ragspine_lite's
// answering lane) or `{error}`, and `window.full` to the ms when ragspine_lite's full engine
// (Pyodide) was ready (other engines: the first result's). `window.run(queries)` then runs
// more queries in the same page and returns `[{ids, lane, ms}]`. Every engine returns the top 10
// with what a result list shows (ragspine_lite: hits with excerpts; Pagefind: `result.data()`;
// MiniSearch/FlexSearch: the page list). Pagefind's index is SRC's `pagefind/` (for Markdown:
// built over our HTML rendering of the pages); MiniSearch and FlexSearch index the page texts.
const params = new URLSearchParams(location.search);
const site = `../bytes/${params.get("site")}/`;
const peers = `../bytes/${params.get("site").split("/")[0]}/peers/`;
const K = 10;

// "…/pages/en-0123.html#intro" → "en-0123": the page a result links to.
const pageOf = (url) => decodeURIComponent(String(url).split("#")[0].split("/").pop())
  .replace(/\.html$/, "");

const json = async (path) => (await fetch(peers + path)).json();
const text = async (path) => (await fetch(peers + path)).text();

let lane = null;
let fullEngine = null;

async function ours(instant) {
  const { RagSpineLite } = await import(`${site}rs/ragspine-lite.mjs`);
  const rs = await RagSpineLite.open({ bundle: `${site}rs/`, instant });
  // Watched, not asked for: the worker answers one request at a time, so a pending
  // rs.fullEngine() would hold every later search until Pyodide is up.
  fullEngine = () => new Promise((resolve) => {
    const timer = setInterval(() => {
      if (rs.engine !== "instant") resolve(clearInterval(timer));
    }, 10);
  });
  return async (q) => {
    const found = await rs.searchDetailed(q, { topK: K });
    lane = found.lane;
    return found.hits.map((h) => pageOf(h.url));
  };
}

const ENGINES = {
  ragspine_lite: () => ours(true),
  "ragspine_lite:full": () => ours(false),
  async Pagefind() {
    const pagefind = await import(`${site}pagefind/pagefind.js`);
    await pagefind.init();
    return async (q) => {
      const found = await pagefind.search(q);
      const shown = await Promise.all(found.results.slice(0, K).map((r) => r.data()));
      return shown.map((d) => pageOf(d.url));
    };
  },
  async MiniSearch() {
    const [{ default: MiniSearch }, index, pages] = await Promise.all([
      import("./vendor/minisearch.js"), text("minisearch.json"), json("pages.json")]);
    const mini = MiniSearch.loadJSON(index, { fields: ["text"], idField: "i" });
    return async (q) => mini.search(q).slice(0, K).map((hit) => pages[hit.id]);
  },
  async FlexSearch() {
    const [{ Index }, index, pages] = await Promise.all([
      import("./vendor/flexsearch.mjs"), text("flexsearch.jsonl"), json("pages.json")]);
    const flex = new Index({});
    for (const line of index.split("\n")) {
      if (!line) continue;
      const [key, data] = JSON.parse(line);
      await flex.import(key, data);
    }
    return async (q) => flex.search(q, { limit: K, suggest: true }).map((i) => pages[i]);
  },
};

try {
  const search = await ENGINES[params.get("engine")]();
  const ids = await search(params.get("q"));
  window.first = { ms: performance.now(), at: performance.timeOrigin + performance.now(), ids, lane };
  if (fullEngine) fullEngine().then(() => { window.full = performance.now(); }, (err) => { window.first = { error: String(err) }; });
  else window.full = window.first.ms;
  window.run = async (queries) => {
    const out = [];
    for (const q of queries) {
      lane = null;
      const started = performance.now();
      const ids = await search(q);
      out.push({ ids, lane, ms: performance.now() - started });
    }
    return out;
  };
} catch (err) {
  window.first = { error: String((err && err.stack) || err) };
}
