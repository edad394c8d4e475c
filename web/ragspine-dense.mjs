// Exact int8 dense scan of a bundle's chunk vectors (the worker's DenseScanner).
//
// A bundle keeps its chunk vectors as raw int8 shards (data/vectors/v-<hash>.i8, dim
// bytes per row, consecutive docnos). `DenseScanner.fromShards(info, buffers)` lays them out in
// one Int8Array; `scan(query, threshold)` and `dots(query, docnos)` compute exact integer dot
// products (each |dot| <= 127² · dim fits an Int32), so the results equal the Python scanners'
// (ragspine_lite.bundle.dense) integer for integer. `info` is the worker op `vector_shards`:
// {dim, scale, shards: [[start, count, path], …], missing: [docno, …], rows}.

function int8(values) {
  if (values instanceof Int8Array) return values;
  if (ArrayBuffer.isView(values)) return new Int8Array(values.buffer, values.byteOffset, values.byteLength);
  if (values instanceof ArrayBuffer) return new Int8Array(values);
  return Int8Array.from(values);
}

export class DenseScanner {
  constructor(dim, codes, missing = []) {
    if (!Number.isInteger(dim) || dim < 1 || codes.length % dim !== 0) {
      throw new Error(`dense scanner: ${codes.length} codes are not rows of dimension ${dim}`);
    }
    this.dim = dim;
    this.codes = int8(codes);
    this.rows = this.codes.length / dim;
    this.missing = new Uint8Array(this.rows);
    for (const d of missing) this.missing[d] = 1;
  }

  // One Int8Array from the shards' bytes (`buffers`: ArrayBuffer or typed array per shard,
  // in the order of info.shards); shards must cover docnos 0..rows-1 in order.
  static fromShards(info, buffers) {
    const { dim, shards } = info;
    const rows = shards.reduce((n, [start, count]) => {
      if (start !== n) throw new Error(`vector shard ${start} does not follow row ${n}`);
      return n + count;
    }, 0);
    const codes = new Int8Array(rows * dim);
    shards.forEach(([start, count, path], i) => {
      const bytes = int8(buffers[i]);
      if (bytes.length !== count * dim) {
        throw new Error(`vector shard ${path}: ${bytes.length} bytes, expected ${count * dim}`);
      }
      codes.set(bytes, start * dim);
    });
    return new DenseScanner(dim, codes, info.missing || []);
  }

  // Fetches every shard with `read(path)` (→ Promise<ArrayBuffer>), then builds the scanner.
  static async load(info, read) {
    return DenseScanner.fromShards(info, await Promise.all(info.shards.map(([, , p]) => read(p))));
  }

  // One row's dot with `q` (an Int32Array of the query codes).
  dot(q, row) {
    const c = this.codes;
    const dim = this.dim;
    const o = row * dim;
    let s = 0;
    for (let j = 0; j < dim; j++) s += q[j] * c[o + j];
    return s;
  }

  // Every row's dot into this.all (reused), four rows per pass over the query.
  dotAll(q) {
    const { codes: c, dim, rows } = this;
    const all = this.all || (this.all = new Int32Array(rows));
    let row = 0;
    for (; row + 3 < rows; row += 4) {
      const o0 = row * dim;
      const o1 = o0 + dim;
      const o2 = o1 + dim;
      const o3 = o2 + dim;
      let s0 = 0;
      let s1 = 0;
      let s2 = 0;
      let s3 = 0;
      for (let j = 0; j < dim; j++) {
        const x = q[j];
        s0 += x * c[o0 + j];
        s1 += x * c[o1 + j];
        s2 += x * c[o2 + j];
        s3 += x * c[o3 + j];
      }
      all[row] = s0;
      all[row + 1] = s1;
      all[row + 2] = s2;
      all[row + 3] = s3;
    }
    for (; row < rows; row++) all[row] = this.dot(q, row);
    return all;
  }

  checkQuery(query) {
    const q = int8(query);
    if (q.length !== this.dim) throw new Error(`query has ${q.length} codes, dimension is ${this.dim}`);
    return Int32Array.from(q);
  }

  // Int32Array of (docno, dot) pairs for rows with dot > threshold (every row when
  // threshold is null/undefined), rows without a vector left out, in docno order.
  scan(query, threshold) {
    const all = this.dotAll(this.checkQuery(query));
    const every = threshold === null || threshold === undefined;
    let n = 0;
    for (let row = 0; row < this.rows; row++) if ((every || all[row] > threshold) && !this.missing[row]) n++;
    const out = new Int32Array(2 * n);
    let i = 0;
    for (let row = 0; row < this.rows; row++) {
      if ((every || all[row] > threshold) && !this.missing[row]) {
        out[i++] = row;
        out[i++] = all[row];
      }
    }
    return out;
  }

  // Int32Array of the dots of these rows (0 for a row without a vector), in the given order.
  dots(query, docnos) {
    const q = this.checkQuery(query);
    const out = new Int32Array(docnos.length);
    for (let i = 0; i < docnos.length; i++) {
      const row = docnos[i];
      if (!Number.isInteger(row) || row < 0 || row >= this.rows) throw new Error(`no vector row ${row}`);
      out[i] = this.dot(q, row);
    }
    return out;
  }
}

function bytesOf(raw) {
  return raw instanceof Uint8Array ? raw : new Uint8Array(raw.buffer || raw, raw.byteOffset || 0, raw.byteLength);
}

// One list file of the coarse layout: per row docno, block (within the list), residual scale
// and sign bits (ragspine_lite.bundle.coarse).
function parseList(raw, count, nblocks, dim, path) {
  const bytes = bytesOf(raw);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const width = (dim + 7) >> 3;
  if (bytes.length !== count * (8 + width)) throw new Error(`vector list ${path}: ${bytes.length} bytes, rebuild the bundle`);
  const docnos = new Uint32Array(count);
  const blockOf = new Uint16Array(count);
  const scales = new Uint16Array(count);
  for (let i = 0; i < count; i++) {
    docnos[i] = view.getUint32(4 * i, true);
    blockOf[i] = view.getUint16(4 * count + 2 * i, true);
    scales[i] = view.getUint16(6 * count + 2 * i, true);
    if (blockOf[i] >= nblocks) throw new Error(`vector list ${path} names a block it has not: rebuild the bundle`);
  }
  const signs = bytes.subarray(8 * count);
  return { docnos, blockOf, scales, signs, width };
}

// The block directory: the block count, each block's 8 hash bytes, then each docno's block
// (uint16, or uint32 from 65,535 blocks; all bits set: no vector).
function parseDirectory(raw, rows, path) {
  const bytes = bytesOf(raw);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const count = bytes.length >= 4 ? view.getUint32(0, true) : 0;
  const size = count < 0xffff ? 2 : 4;
  const start = 4 + 8 * count;
  if (!count || bytes.length !== start + size * rows) throw new Error(`the vector block directory ${path}: ${bytes.length} bytes, rebuild the bundle`);
  const owners = size === 2 ? new Uint16Array(rows) : new Uint32Array(rows);
  const none = size === 2 ? 0xffff : 0xffffffff;
  for (let d = 0; d < rows; d++) {
    owners[d] = size === 2 ? view.getUint16(start + 2 * d, true) : view.getUint32(start + 4 * d, true);
    if (owners[d] >= count && owners[d] !== none) throw new Error(`the vector block directory ${path} names a block it has not: rebuild the bundle`);
  }
  return { hashes: bytes.subarray(4, start), owners, none };
}

// Per sign byte, the sum of q over the dims of each of its 256 values (Int32Array 256·width).
function bitTables(q, width) {
  const tables = new Int32Array(256 * width);
  for (let k = 0; k < width; k++) {
    for (let value = 1; value < 256; value++) {
      const low = value & -value;
      const dim = 8 * k + 31 - Math.clz32(low);
      tables[256 * k + value] = tables[256 * k + (value ^ low)] + (dim < q.length ? q[dim] : 0);
    }
  }
  return tables;
}

// The coarse (IVF) layout of a large bundle's vectors (ragspine_lite.bundle.coarse): int8
// centroids; per list a small file (per row docno, block, residual scale and the sign bits of
// its residual); per block a file (its docnos as little-endian uint32, then their codes),
// numbered list by list; the block directory (each block's name, each docno's block). `scan`
// dots the query with every centroid, estimates every row of the `probe` best lists by
// (-dot, list) as 16·(q·c) + scale·(q·s), reads the blocks of the `candidates` best estimates
// by (-estimate, docno) and scores their rows exactly; `dots` reads the rows' blocks. `read(path)`
// returns a file's bytes synchronously (the worker's bundle reader); each file is read once.
// `info` is the worker op `vector_shards` of such a bundle: {dim, scale, centroids, probe,
// candidates, lists: [[rows, path, blocks], …], blocks, missing, rows}. Same integers as
// CoarseScanner in Python, pair for pair.
export class CoarseScanner {
  constructor(info, read, probe, candidates, fetch = null) {
    if (!info.candidates || !info.blocks) throw new Error("the bundle's coarse vectors are of an older layout: rebuild it");
    this.info = info;
    this.dim = info.dim;
    this.read = read;
    this.fetch = fetch; // async read(path) → bytes, for `prefetch` (optional)
    this.last = null; // [query codes, chosen blocks] of the last `chosen`
    this.probe = Math.max(1, Math.min(info.lists.length, probe ?? info.probe));
    this.candidates = Math.max(1, candidates ?? info.candidates);
    this.firsts = new Uint32Array(info.lists.length); // list j's first block number
    for (let j = 1; j < info.lists.length; j++) this.firsts[j] = this.firsts[j - 1] + info.lists[j - 1][2];
    this.loaded = new Map(); // list → parsed list file
    this.blocks = new Map(); // "list/block" → {docnos, scanner}
    this.pending = new Map(); // list "j" or block "j/b" → promise, while it is fetched
    this.centroids = null;
    this.directory = null;
    this.directoryFetch = null; // the block directory on its way (directoryAhead)
  }

  // [list, centroid dot] of the lists a scan of `q` (Int32Array) reads, best first.
  probed(q) {
    if (!this.centroids) {
      const bytes = int8(this.read(this.info.centroids));
      if (bytes.length !== this.info.lists.length * this.dim) throw new Error("the coarse centroids do not match the lists: rebuild the bundle");
      this.centroids = new DenseScanner(this.dim, bytes);
    }
    const dots = this.centroids.dotAll(q);
    const order = Array.from(dots.keys()).sort((a, b) => dots[b] - dots[a] || a - b);
    return order.slice(0, this.probe).map((j) => [j, dots[j]]);
  }

  list(j) {
    return this.loaded.get(j) || this.addList(j, this.read(this.listPath(j)));
  }

  listPath(j) {
    const [count, path] = this.info.lists[j];
    if (!count) throw new Error(`vector list ${j} is empty: rebuild the bundle`);
    return path;
  }

  addList(j, raw) {
    const [count, path, nblocks] = this.info.lists[j];
    const found = parseList(raw, count, nblocks, this.dim, path);
    this.loaded.set(j, found);
    return found;
  }

  dir() {
    return this.directory || this.setDirectory(this.read(this.info.blocks));
  }

  setDirectory(raw) {
    this.directory = parseDirectory(raw, this.info.rows, this.info.blocks);
    return this.directory;
  }

  blockPath(j, b) {
    const at = 8 * (this.firsts[j] + b);
    let hex = "";
    for (const byte of this.dir().hashes.subarray(at, at + 8)) hex += byte.toString(16).padStart(2, "0");
    return `data/lists/v-${hex}.i8`;
  }

  block(j, b) {
    return this.blocks.get(`${j}/${b}`) || this.addBlock(j, b, this.read(this.blockPath(j, b)));
  }

  addBlock(j, b, raw) {
    const bytes = bytesOf(raw);
    const count = Math.floor(bytes.length / (4 + this.dim));
    if (!count || bytes.length !== count * (4 + this.dim)) throw new Error(`vector block ${this.blockPath(j, b)}: ${bytes.length} bytes, rebuild the bundle`);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const docnos = new Uint32Array(count);
    for (let i = 0; i < count; i++) docnos[i] = view.getUint32(4 * i, true);
    const codes = new Int8Array(bytes.buffer, bytes.byteOffset + 4 * count, count * this.dim);
    const found = { docnos, scanner: new DenseScanner(this.dim, codes) };
    this.blocks.set(`${j}/${b}`, found);
    return found;
  }

  // Reads what a scan of `query` (or, with `docnos`, the dots of those rows; with both and
  // `scan`, the scan and those dots) will read and has not yet, with the async `fetch` given
  // to the constructor: the query's lists, then its blocks, and the blocks of the rows alongside
  // (the block directory first); files already on their way (`begin`) are awaited, not fetched
  // again. Without it `scan` and `dots` read file by file, synchronously; the results are the
  // same.
  async prefetch(query, docnos = null, scan = docnos === null) {
    if (!this.fetch) return;
    const q = DenseScanner.prototype.checkQuery.call(this, query);
    await this.directoryAhead();
    const rows = [];
    for (const d of docnos || []) {
      const found = Number.isInteger(d) && d >= 0 && d < this.info.rows ? this.home(d) : null;
      if (found) rows.push(this.blockAhead(...found));
    }
    if (scan) {
      await Promise.all(this.probed(q).map(([j]) => this.listAhead(j)));
      await Promise.all(this.chosen(q).map(([j, b]) => this.blockAhead(j, b)));
    }
    await Promise.all(rows);
  }

  // Starts fetching the lists a scan of `query` reads (not awaited: they come while Python
  // ranks BM25; `prefetch` awaits them).
  begin(query) {
    if (!this.fetch) return;
    const q = DenseScanner.prototype.checkQuery.call(this, query);
    for (const [j] of this.probed(q)) this.listAhead(j).catch(() => {});
  }

  // A promise of list j, parsed: fetched once (kept while on its way).
  listAhead(j) {
    return this.ahead(`${j}`, () => this.loaded.get(j), () => this.listPath(j), (raw) => this.addList(j, raw));
  }

  blockAhead(j, b) {
    const key = `${j}/${b}`;
    return this.ahead(key, () => this.blocks.get(key), () => this.blockPath(j, b), (raw) => this.addBlock(j, b, raw));
  }

  ahead(key, have, path, add) {
    const found = have();
    if (found) return Promise.resolve(found);
    let promise = this.pending.get(key);
    if (!promise) {
      promise = this.fetch(path()).then((raw) => have() || add(raw));
      this.pending.set(key, promise);
      const done = () => this.pending.delete(key);
      promise.then(done, done);
    }
    return promise;
  }

  // The block directory, fetched once (the worker starts it with the scanner: the blocks of a
  // question's BM25 hits then leave at once, without their lists).
  directoryAhead() {
    if (!this.directory && !this.directoryFetch) {
      this.directoryFetch = this.fetch(this.info.blocks).then((raw) => this.directory || this.setDirectory(raw));
      this.directoryFetch.catch(() => { this.directoryFetch = null; });
    }
    return this.directoryFetch || Promise.resolve(this.directory);
  }

  // The [list, block] pairs a scan of `q` rescores, sorted: those of the `candidates` best
  // estimates by (-estimate, docno).
  chosen(q) {
    const last = this.last;
    if (last && last[0].length === q.length && last[0].every((x, i) => x === q[i])) return last[1];
    let total = 0;
    for (let i = 0; i < q.length; i++) total += q[i];
    const probed = this.probed(q).map(([j, dot]) => [j, dot, this.list(j)]);
    const n = probed.reduce((sum, [, , found]) => sum + found.docnos.length, 0);
    const estimates = new Float64Array(n); // exact integers (|estimate| < 2^53)
    const docnos = new Uint32Array(n);
    const lists = new Uint32Array(n);
    const blocks = new Uint16Array(n);
    const tables = bitTables(q, (this.dim + 7) >> 3); // the same for every list
    let at = 0;
    for (const [j, dot, found] of probed) {
      const { docnos: ids, blockOf, scales, signs, width } = found;
      for (let row = 0; row < ids.length; row++, at++) {
        let up = 0;
        const o = row * width;
        for (let k = 0; k < width; k++) up += tables[256 * k + signs[o + k]];
        estimates[at] = 16 * dot + scales[row] * (2 * up - total);
        docnos[at] = ids[row];
        lists[at] = j;
        blocks[at] = blockOf[row];
      }
    }
    const order = Uint32Array.from({ length: n }, (_, i) => i);
    order.sort((a, b) => estimates[b] - estimates[a] || docnos[a] - docnos[b]);
    const picked = new Map();
    for (const i of order.subarray(0, this.candidates)) picked.set(lists[i] * 65536 + blocks[i], [lists[i], blocks[i]]);
    const out = Array.from(picked.values()).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    this.last = [Int32Array.from(q), out];
    return out;
  }

  // [list, block] of a row, or null for a row without a vector (from the block directory).
  home(d) {
    const { owners, none } = this.dir();
    if (!Number.isInteger(d) || d < 0 || d >= owners.length) throw new Error(`no vector row ${d}`);
    const number = owners[d];
    if (number === none) return null;
    let lo = 0;
    let hi = this.firsts.length - 1; // the last list whose first block is ≤ number
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.firsts[mid] <= number) lo = mid;
      else hi = mid - 1;
    }
    return [lo, number - this.firsts[lo]];
  }

  // Int32Array of (docno, dot) pairs with dot > threshold (every row when null) in the chosen
  // blocks and those holding the rows `also` (docnos, optional), block by block in (list,
  // block) order, rows in docno order.
  scan(query, threshold, also = null) {
    const q = DenseScanner.prototype.checkQuery.call(this, query);
    const every = threshold === null || threshold === undefined;
    const picked = new Map(this.chosen(q).map(([j, b]) => [j * 65536 + b, [j, b]]));
    for (const d of also || []) {
      const found = this.home(d);
      if (found) picked.set(found[0] * 65536 + found[1], found);
    }
    const out = [];
    for (const [j, b] of [...picked.values()].sort((x, y) => x[0] - y[0] || x[1] - y[1])) {
      const { docnos, scanner } = this.block(j, b);
      const all = scanner.dotAll(q);
      for (let row = 0; row < docnos.length; row++) {
        if (every || all[row] > threshold) out.push(docnos[row], all[row]);
      }
    }
    return Int32Array.from(out);
  }

  // Int32Array of the dots of these rows (0 for a row without a vector), in the given order.
  dots(query, docnos) {
    const q = DenseScanner.prototype.checkQuery.call(this, query);
    const out = new Int32Array(docnos.length);
    for (let i = 0; i < docnos.length; i++) {
      const found = this.home(docnos[i]);
      if (!found) continue; // no vector: 0
      const { docnos: ids, scanner } = this.block(...found);
      out[i] = scanner.dot(q, ids.indexOf(docnos[i]));
    }
    return out;
  }
}
