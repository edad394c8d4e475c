// Node side of bench/lexical.py: one engine and one phase per process, one JSON line out.
//
//   node bench/lexical_node.mjs ENGINE build --corpus C.jsonl --out INDEX [--cjk]
//   node bench/lexical_node.mjs ENGINE serve --index INDEX --queries Q.jsonl [--k 10] [--cjk]
//   node bench/lexical_node.mjs pyodide serve --store S.db --repo DIR --queries Q.jsonl [--k 10]
//
// ENGINE flexsearch | minisearch: "build" indexes the corpus (library defaults; --cjk picks
// their CJK options) and writes the serialised index; "serve" loads it and runs the queries.
// pyodide: ragspine_lite from the source tree inside Pyodide searching the prebuilt chunk
// store S.db (the browser bundle case). Times in ms; peak_rss_mb is this process.
import { closeSync, createReadStream, openSync, readFileSync, realpathSync, writeFileSync,
  writeSync } from "node:fs";
import { createInterface } from "node:readline";
import path from "node:path";
import { performance } from "node:perf_hooks";

function args(argv) {
  const out = { engine: argv[0], phase: argv[1], k: 10, cjk: false, maxQueries: Infinity };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--cjk") out.cjk = true;
    else if (a === "--corpus") out.corpus = argv[++i];
    else if (a === "--queries") out.queries = argv[++i];
    else if (a === "--store") out.store = argv[++i];
    else if (a === "--out") out.out = argv[++i];
    else if (a === "--index") out.index = argv[++i];
    else if (a === "--repo") out.repo = argv[++i];
    else if (a === "--k") out.k = Number(argv[++i]);
    else if (a === "--max-queries") out.maxQueries = Number(argv[++i]);
    else throw new Error(`unknown argument ${a}`);
  }
  return out;
}

// Streamed line by line: a 1M-chunk corpus file is longer than V8's longest string.
async function jsonl(p) {
  const rows = [];
  for await (const line of createInterface({ input: createReadStream(p), crlfDelay: Infinity })) {
    if (line) rows.push(JSON.parse(line));
  }
  return rows;
}

// Per-query CPU time of this process in ms (the machine may be shared: wall time would
// measure the neighbours). process.cpuUsage() counts microseconds.
function cpuMs() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

function timeQueries(queries, run) {
  return queries.map((q) => {
    const s = cpuMs();
    run(q);
    return cpuMs() - s;
  });
}

function percentiles(ms) {
  const s = [...ms].sort((a, b) => a - b);
  const at = (q) => s[Math.min(s.length - 1, Math.floor(q * s.length))];
  return { p50_ms: at(0.5), p95_ms: at(0.95), queries: s.length };
}

// The ragspine_lite tokenizer, for MiniSearch's CJK option: ASCII words, CJK unigrams + bigrams.
const TOKEN_RE = /[a-z0-9]+|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+/g;
function cjkTokenize(text) {
  const out = [];
  for (const run of text.toLowerCase().match(TOKEN_RE) || []) {
    if (run.charCodeAt(0) < 0x80) { out.push(run); continue; }
    const chars = [...run];
    out.push(...chars);
    for (let i = 0; i + 1 < chars.length; i++) out.push(chars[i] + chars[i + 1]);
  }
  return out;
}

async function flexsearchBuild(opt, corpus) {
  const { Index, Charset } = await import("flexsearch");
  const t = performance.now();
  const index = new Index(opt.cjk ? { encoder: Charset.CJK } : {});
  corpus.forEach((doc, i) => index.add(i, doc.text));
  const buildMs = performance.now() - t;
  // One JSON line per exported part: a single string of everything exceeds V8's limit at 1M.
  const fd = openSync(opt.out, "w");
  let bytes = 0;
  await index.export((key, data) => {
    const line = JSON.stringify([key, data]) + "\n";
    bytes += Buffer.byteLength(line);
    writeSync(fd, line);
  });
  closeSync(fd);
  return { build_ms: buildMs, index_bytes: bytes };
}

async function flexsearchServe(opt, queries) {
  const { Index, Charset } = await import("flexsearch");
  const t = performance.now();
  const index = new Index(opt.cjk ? { encoder: Charset.CJK } : {});
  const lines = createInterface({ input: createReadStream(opt.index), crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line) continue;
    const [key, data] = JSON.parse(line);
    await index.import(key, data);
  }
  const loadMs = performance.now() - t;
  const ms = timeQueries(queries, (q) => index.search(q.text, opt.k));
  return { load_ms: loadMs, ...percentiles(ms) };
}

function miniOptions(opt) {
  const options = { fields: ["text"], idField: "i" };
  if (opt.cjk) options.tokenize = cjkTokenize;
  return options;
}

async function minisearchBuild(opt, corpus) {
  const { default: MiniSearch } = await import("minisearch");
  const t = performance.now();
  const ms = new MiniSearch(miniOptions(opt));
  ms.addAll(corpus.map((doc, i) => ({ i, text: doc.text })));
  const buildMs = performance.now() - t;
  const json = JSON.stringify(ms);
  writeFileSync(opt.out, json);
  return { build_ms: buildMs, index_bytes: Buffer.byteLength(json) };
}

async function minisearchServe(opt, queries) {
  const { default: MiniSearch } = await import("minisearch");
  const t = performance.now();
  const ms = MiniSearch.loadJSON(readFileSync(opt.index, "utf8"), miniOptions(opt));
  const loadMs = performance.now() - t;
  const times = timeQueries(queries, (q) => ms.search(q.text).slice(0, opt.k));
  return { load_ms: loadMs, ...percentiles(times) };
}

async function pyodide(opt, queries) {
  const { loadPyodide } = await import("pyodide");
  const py = await loadPyodide();
  const repo = realpathSync(opt.repo);
  py.FS.mkdirTree("/repo/ragspine_lite");
  py.FS.mount(py.FS.filesystems.NODEFS, { root: path.join(repo, "ragspine_lite") },
    "/repo/ragspine_lite");
  // Reading the bundle file into the in-memory file system is part of opening it in a page.
  let t = performance.now();
  py.FS.writeFile("/bundle.db", readFileSync(opt.store));
  const copyMs = performance.now() - t;
  py.globals.set("query_texts", py.toPy(queries.map((q) => q.text)));
  py.globals.set("k", opt.k);
  const out = await py.runPythonAsync(`
import json, sys, time
import js
sys.path.insert(0, "/repo")
sys.dont_write_bytecode = True
from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.lexical.retrieval import NarrativeIndex
t = time.perf_counter()
store = ChunkStore("/bundle.db")
store._connection().execute("PRAGMA query_only = ON")
index = NarrativeIndex(store)
index.retrieve("warm up the imports", top_k=k)
load_ms = (time.perf_counter() - t) * 1000
def cpu_ms():
    u = js.process.cpuUsage()
    return (u.user + u.system) / 1000
times = []
for q in query_texts:
    t = cpu_ms()
    index.retrieve(q, top_k=k)
    times.append(cpu_ms() - t)
json.dumps({"load_ms": load_ms, "times": times})
`);
  const res = JSON.parse(out);
  return { load_ms: res.load_ms + copyMs, ...percentiles(res.times) };
}

const ENGINES = {
  flexsearch: { build: flexsearchBuild, serve: flexsearchServe },
  minisearch: { build: minisearchBuild, serve: minisearchServe },
  pyodide: { serve: (opt, queries) => pyodide(opt, queries) },
};

async function main() {
  const opt = args(process.argv.slice(2));
  const engine = ENGINES[opt.engine];
  const run = engine && engine[opt.phase];
  if (!run) {
    throw new Error(`unknown engine/phase ${opt.engine} ${opt.phase}; valid: ` +
      Object.entries(ENGINES).map(([n, e]) => `${n} ${Object.keys(e).join("|")}`).join(", "));
  }
  let res;
  if (opt.phase === "build") res = await run(opt, await jsonl(opt.corpus));
  else {
    let queries = await jsonl(opt.queries);
    if (Number.isFinite(opt.maxQueries)) queries = queries.slice(0, opt.maxQueries);
    res = await run(opt, queries);
  }
  res.peak_rss_mb = process.resourceUsage().maxRSS / 1024;
  console.log(JSON.stringify(res));
}

main().catch((err) => { console.error(err && err.stack ? err.stack : err); process.exit(1); });
