// Page side of `python bench/browser.py --bytes`: one engine per visit, searching one site.
//
//   bytes.html?engine=ENGINE&n=N&q=QUERY
//
// Opens ENGINE on the N-document site, runs QUERY and sets `window.first` to
// `{ms, ids}` (ms from navigation to the first result list, ids = page names of the top 10)
// or `{error}`. `window.run(queries)` then runs more queries in the same page and returns
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

const ENGINES = {
  async ragspine_lite() {
    const { RagSpineLite } = await import(`${site}rs/ragspine-lite.mjs`);
    const rs = await RagSpineLite.open({ bundle: `${site}rs/` });
    return async (q) => (await rs.searchDetailed(q, { topK: K })).hits.map((h) => pageOf(h.url));
  },
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
  window.first = { ms: performance.now(), ids };
  window.run = async (queries) => {
    const out = [];
    for (const q of queries) out.push(await search(q));
    return out;
  };
} catch (err) {
  window.first = { error: String((err && err.stack) || err) };
}
