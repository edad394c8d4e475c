// Test driver: web/ragspine-files.mjs's BundleFiles under Node, with a counting Cache API and a
// slow network, for tests/test_files_cache.py.
//
//   node tests/_files_node.mjs GAP_MS COUNT REPORT_EVERY
//
// fetches COUNT files GAP_MS apart, ending a request (`report()`) after every REPORT_EVERY of
// them (0: never), and prints {files, during, after, expected}: how many were written to the
// cache while the worker was still fetching, and which were written in the second after.
import { createHash } from "node:crypto";

globalThis.self = globalThis;
self.postMessage = () => {};
const { BundleFiles } = await import("../web/ragspine-files.mjs");

const [gapMs, count, reportEvery] = process.argv.slice(2).map(Number);
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
const bodies = new Map();
for (let i = 0; i < count; i++) {
  const bytes = new TextEncoder().encode(`fragment ${i}`);
  const sha = createHash("sha256").update(bytes).digest("hex").slice(0, 16);
  bodies.set(`https://site.example/data/text/f-${sha}.bin`, bytes);
}
self.fetch = async (url) => {
  await sleep(5);
  const body = bodies.get(String(url));
  return new Response(body || null, { status: body ? 200 : 404 });
};
const written = [];
let fetching = true;
const cache = {
  keys: async () => [],
  match: async () => undefined,
  put: async (url) => { written.push({ url, fetching }); },
};
const files = new BundleFiles({ files: {} }, "https://site.example/", cache);
let fetched = 0;
for (const url of bodies.keys()) {
  await files.fetch(url.slice("https://site.example/".length));
  if (reportEvery && ++fetched % reportEvery === 0) files.report();
  await sleep(gapMs);
}
fetching = false;
await sleep(1000);
process.stdout.write(JSON.stringify({
  files: bodies.size,
  during: written.filter((w) => w.fetching).length,
  after: written.filter((w) => !w.fetching).map((w) => w.url).sort(),
  expected: [...bodies.keys()].sort(),
}));
