// Test driver: web/ragspine-files.mjs's BundleFiles under Node, with a counting Cache API and a
// slow network, for tests/test_files_cache.py. Prints {writes, during, after, files}: the
// paths written to the cache while the worker was still fetching (`during`), and once it had
// fetched nothing for a while (`after`).
import { createHash } from "node:crypto";

globalThis.self = globalThis;
self.postMessage = () => {};
const { BundleFiles } = await import("../web/ragspine-files.mjs");

const [gapMs, count] = process.argv.slice(2).map(Number);
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
for (const url of bodies.keys()) {
  await files.fetch(url.slice("https://site.example/".length));
  await sleep(gapMs);
}
fetching = false;
await sleep(400);
process.stdout.write(JSON.stringify({
  files: bodies.size,
  during: written.filter((w) => w.fetching).length,
  after: written.filter((w) => !w.fetching).map((w) => w.url).sort(),
  expected: [...bodies.keys()].sort(),
}));
