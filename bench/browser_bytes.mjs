// Page side of `python bench/browser.py --bytes`: one engine per visit, searching one site.
//
//   bytes.html?engine=ENGINE&n=N&q=QUERY
//
// Opens ENGINE on the N-document site, runs QUERY and sets `window.first` to
// `{ms, at, ids, lane}` (ms from navigation to the first result list, `at` the same moment in
// epoch ms, ids = page names of the top 10, lane = ragspine_lite's answering lane) or `{error}`,
// and `window.full` to the ms when ragspine_lite's full engine (Pyodide) was ready (other
// engines: the first result's). `window.run(queries)` then runs more queries in the same page and returns
// their page-name lists. Every engine returns the top 10 with what a result list shows
// (ragspine_lite: hits with excerpts; Pagefind: `result.data()`; MiniSearch/FlexSearch: the page list).
const params = new URLSearchParams(location.search);
const site = `../bytes/${params.get("n")}/`;
const K = 10;

// "…/pages/en-0123.html#intro" → "en-0123": the page a result links to.
const pageOf = (url) => decodeURIComponent(String(url).split("#")[0].split("/").pop())
  .replace(/\.html$/, "");

const json = async (path) => (await fetch(site + path)).json();
const text = async (path) => (await fetch(site + path)).text();

let lane = null;
let fullEngine = null;

async function ours(instant) {
  const { RagSpineLite } = await import(`${site}rs/ragspine-lite.mjs`);
  const rs = await RagSpineLite.open({ bundle: `${site}rs/`, instant });
  fullEngine = () => rs.fullEngine();
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
    const pagefind = await import(`${site}pages/pagefind/pagefind.js`);
    await pagefind.init();
    return async (q) => {
      const found = await pagefind.search(q);
      const shown = await Promise.all(found.results.slice(0, K).map((r) => r.data()));
      return shown.map((d) => pageOf(d.url));
    };
  },
  async MiniSearch() {
    const [{ default: MiniSearch }, index, pages] = await Promise.all([
      import("./vendor/minisearch.js"), text("peers/minisearch.json"), json("peers/pages.json")]);
    const mini = MiniSearch.loadJSON(index, { fields: ["text"], idField: "i" });
    return async (q) => mini.search(q).slice(0, K).map((hit) => pages[hit.id]);
  },
  async FlexSearch() {
    const [{ Index }, index, pages] = await Promise.all([
      import("./vendor/flexsearch.mjs"), text("peers/flexsearch.jsonl"), json("peers/pages.json")]);
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
    for (const q of queries) out.push(await search(q));
    return out;
  };
} catch (err) {
  window.first = { error: String((err && err.stack) || err) };
}
