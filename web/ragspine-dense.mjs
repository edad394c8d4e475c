// Exact int8 dense scan of a bundle's chunk vectors (the worker's DenseScanner).
//
// A format-2 bundle keeps its chunk vectors as raw int8 shards (data/vectors/v-<hash>.i8, dim
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
