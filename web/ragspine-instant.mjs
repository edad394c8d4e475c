// The instant lane: plain BM25 searches answered in JavaScript, before Pyodide is up.
//
// A reader of the bundle's sharded index (ragspine_lite.bundle.shards: the header, the term
// shards, the text fragments) and a port of the Python path a plain search takes (no filters,
// no page documents, no opt-in layers, BM25): the glossary's query variants, exact BM25 with
// the IDF stored per term at build time, RRF over the variants, the agent link's snippets and
// the runtime's sections, highlight spans and excerpts (ragspine_lite.bundle.runtime). Its
// results equal the Python path's bit for bit (tests/test_instant_lane.py); the worker answers
// with it until the full engine is ready. Python's regular expressions are Unicode-aware:
// `\s` is str.isspace() (PY_SPACE below), `\w` str.isalnum() or "_", `\d` a decimal digit.
//
//   const lane = await InstantLane.open(readFile, headerPath);   // readFile(path) → Uint8Array
//   const result = await lane.search("hong kong revenue", { topK: 10 });  // {hits, took_ms}

import {
  BM25_B as B, BM25_K1 as K1, DEFAULT_TOP_K, MAX_QUERY_VARIANTS as MAX_QUERIES, MAX_TOP_K, RRF_K,
} from "./ragspine-contract.mjs";

const EXCERPT_WORDS = 30;
const SNIPPET_FIELDS = ["topic", "entity", "geography", "period", "language", "sensitivity"];

// Python's str.isspace() / `\s`, `\w`, `\d` and the CJK ranges the tokenizer keeps.
const PY_SPACE = "\\t\\n\\v\\f\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const PY_WORD = "\\p{L}\\p{N}_";
const CJK = "\\u3400-\\u4dbf\\u4e00-\\u9fff\\uf900-\\ufaff";
const TOKEN_RE = new RegExp(`[a-z0-9]+|[${CJK}]+`, "g");
const ASCII_TOKEN_RE = /[a-z0-9]+/g;
const CJK_RUN_RE = new RegExp(`[${CJK}]+`, "g");
const CJK_START_RE = new RegExp(`^[${CJK}]`);
const CJK_TEST_RE = new RegExp(`[${CJK}]`);
const WORD_RE = new RegExp(`^[${PY_WORD}]$`, "u");
const SPACE_RE = new RegExp(`^[${PY_SPACE}]$`);
const STRIP_RE = new RegExp(`^[${PY_SPACE}]+|[${PY_SPACE}]+$`, "g");
const SPLIT_RE = new RegExp(`[${PY_SPACE}]+`);
const LOCATOR_RE = /#para([0-9]+)(?:-([0-9]+))?(?=\n?$)/;
const LINE_START = "(?:^|(?<=\\n))"; // Python's MULTILINE `^` (after "\n" only)
const HEADING_LINE_RE = new RegExp(`^[${PY_SPACE}]*#{1,6}[${PY_SPACE}]`);
// A code fence line with its info string ("```javascript"): markup, not text of the excerpt.
const FENCE_LINE_RE = new RegExp(`^[${PY_SPACE}]*(?:\`{3,}|~{3,})[^\`]*$`);
const MD_LINE_RE = new RegExp(
  `${LINE_START}[${PY_SPACE}]*(?:#{1,6}[${PY_SPACE}]+|[-*+][${PY_SPACE}]+|\\p{Nd}{1,9}[.)][${PY_SPACE}]+|>[${PY_SPACE}]?)`, "gu");
const MD_IMAGE_RE = /!\[([^\]]*)\]\([^)]*\)/g;
const MD_LINK_RE = /\[([^\]]+)\]\([^)]*\)/g;
const TAG_RE = /<\/?[A-Za-z][^<>]*>/g;
const MD_MARK_RE = new RegExp(
  `(\\*\\*|__|\`)|(?<![${PY_WORD}*])[*_](?=[^${PY_SPACE}])|(?<=[^${PY_SPACE}])[*_](?![${PY_WORD}*])`, "gu");
const UNIT_RE = new RegExp(`[${CJK}]|[^${PY_SPACE}${CJK}]+`, "g");
const HIGHLIGHT_SKIP = new Set(
  ("a an and are as at by did do does for from how in is it of on or the to was were what " +
    "when where which who why with").split(" "));
const ARRAY_TYPES = { b: Int8Array, B: Uint8Array, h: Int16Array, H: Uint16Array, i: Int32Array, I: Uint32Array,
  q: BigInt64Array, Q: BigUint64Array, f: Float32Array, d: Float64Array };

export class InstantLaneError extends Error {
  constructor(message) {
    super(message);
    this.name = "BundleFormatError";
  }
}

// ------------------------------------------------------------------ Python's string rules

/** str.strip(): Python's whitespace off both ends. */
export const pyStrip = (text) => text.replace(STRIP_RE, "");
/** str.split() without arguments. */
const pySplit = (text) => text.split(SPLIT_RE).filter(Boolean);
/** Whether one character (a code point) is Python's `\w`. */
export const isWordChar = (ch) => ch !== undefined && WORD_RE.test(ch);
/** Whether one character is Python's `\s` (str.isspace()). */
export const isSpaceChar = (ch) => SPACE_RE.test(ch);
const codePointBefore = (text, i) => {
  if (i <= 0) return undefined;
  const low = text.charCodeAt(i - 1);
  const start = low >= 0xdc00 && low <= 0xdfff && i >= 2 ? i - 2 : i - 1;
  return String.fromCodePoint(text.codePointAt(start));
};
const codePointAt = (text, i) => (i < text.length ? String.fromCodePoint(text.codePointAt(i)) : undefined);

/** ragspine_lite.lexical.tokenizer.tokenize: ASCII words, then CJK unigrams and bigrams per run. */
export function tokenize(text) {
  const out = [];
  for (const run of text.toLowerCase().match(TOKEN_RE) || []) {
    if (run.charCodeAt(0) < 0x80) out.push(run);
    else {
      for (const ch of run) out.push(ch);
      for (let i = 0; i + 1 < run.length; i++) out.push(run.slice(i, i + 2));
    }
  }
  return out;
}

// ------------------------------------------------------------------ packs

async function inflate(bytes, where) {
  try {
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  } catch (err) {
    throw new InstantLaneError(`${where} is damaged (${err && err.message ? err.message : err}): rebuild the bundle`);
  }
}

/** ragspine_lite.bundle.shards.unpack: `zlib(JSON line + "\n" + little-endian arrays)`. */
export async function unpack(bytes, where = "pack") {
  const raw = await inflate(bytes, where);
  const cut = raw.indexOf(10);
  if (cut < 0) throw new InstantLaneError(`${where} is damaged (no JSON line): rebuild the bundle`);
  const meta = JSON.parse(new TextDecoder().decode(raw.subarray(0, cut)));
  const arrays = {};
  let offset = cut + 1;
  for (const [name, code, count] of meta.arrays) {
    const Type = ARRAY_TYPES[code];
    if (!Type) throw new InstantLaneError(`${where}: array ${name} has an unknown type ${code}`);
    const end = offset + Type.BYTES_PER_ELEMENT * count;
    if (end > raw.length) throw new InstantLaneError(`${where}: array ${name} is cut short: rebuild the bundle`);
    arrays[name] = new Type(raw.slice(offset, end).buffer);
    offset = end;
  }
  if (offset !== raw.length) throw new InstantLaneError(`${where} has trailing bytes: rebuild the bundle`);
  delete meta.arrays;
  return { meta, arrays };
}

// shard_format.from_byte_planes: 4-byte values stored as their byte planes (lowest bytes first).
function fromBytePlanes(planes, where) {
  const n = planes.length / 4;
  if (!Number.isInteger(n)) throw new InstantLaneError(`${where}: byte planes of ${planes.length} bytes: rebuild the bundle`);
  const out = new Uint32Array(n);
  for (let i = 0; i < n; i++) {
    out[i] = (planes[i] | (planes[n + i] << 8) | (planes[2 * n + i] << 16) | (planes[3 * n + i] << 24)) >>> 0;
  }
  return out;
}

// shard_format.term_shard_path / fragment_path: a name's slot, then the 4 hash bytes the
// header keeps (8 hex digits).
const hex8 = (value) => value.toString(16).padStart(8, "0");
const termShardPath = (term, hash) =>
  `data/terms/t-${Array.from(new TextEncoder().encode(term).subarray(0, 8), (b) => b.toString(16).padStart(2, "0")).join("")}-${hex8(hash)}.bin`;
const fragmentPath = (start, hash) => `data/text/f-${start}-${hex8(hash)}.bin`;

// `bisect_right(starts, value) - 1` (strings compare alike: terms are BMP-only).
function floorIndex(starts, value) {
  let lo = 0;
  let hi = starts.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (value < starts[mid]) hi = mid;
    else lo = mid + 1;
  }
  return lo - 1;
}

// ------------------------------------------------------------------ the glossary

// Python's `\b` around an ASCII term: a `\w` on exactly one side of the position.
const boundary = (text, i) => isWordChar(codePointBefore(text, i)) !== isWordChar(codePointAt(text, i));

/** ragspine_lite.common.glossary.find_terms over `[[term, code], …]`: dict order, then position. */
export function findTerms(text, synonyms) {
  const out = [];
  for (const [term, code] of synonyms) {
    if (!term) continue;
    const ascii = /^[\x00-\x7f]*$/.test(term);
    for (let at = text.indexOf(term); at !== -1;) {
      const end = at + term.length;
      if (!ascii || (boundary(text, at) && boundary(text, end))) {
        out.push({ term, code, start: at, end });
        at = text.indexOf(term, end);
      } else at = text.indexOf(term, at + 1);
    }
  }
  return out;
}

/** GlossaryQueryRewriter.rewrite, de-duplicated (query_variants). */
export function queryVariants(query, glossary) {
  const out = [query];
  const lowered = query.toLowerCase();
  const matches = [];
  for (const synonyms of [glossary.metric, glossary.entity]) {
    for (const m of findTerms(lowered, synonyms)) matches.push([m, synonyms]);
  }
  const add = (candidate) => {
    if (out.length < MAX_QUERIES && !out.includes(candidate)) out.push(candidate);
  };
  const around = (m, text) => lowered.slice(0, m.start) + text + lowered.slice(m.end);
  for (const [m] of matches) add(around(m, m.code));
  for (const [m, synonyms] of matches) {
    for (const [term, code] of synonyms) if (code === m.code && term !== m.term) add(around(m, term));
  }
  return out;
}

/** runtime.with_synonyms: the query plus its glossary terms' other-language synonyms. */
export function withSynonyms(query, glossary) {
  const lowered = query.toLowerCase();
  const extra = [];
  for (const synonyms of [glossary.entity, glossary.metric]) {
    for (const match of findTerms(lowered, synonyms)) {
      const chinese = CJK_TEST_RE.test(match.term);
      for (const [term, code] of synonyms) {
        if (code !== match.code || CJK_TEST_RE.test(term) === chinese) continue;
        if (chinese) extra.push(term);
        else extra.push(...(term.match(CJK_RUN_RE) || []));
      }
    }
  }
  const kept = [...new Set(extra.filter((t) => !lowered.includes(t.toLowerCase())))];
  return [query, ...kept].join(" ");
}

// ------------------------------------------------------------------ highlighting

// The text with each character lowered where that is one ASCII letter or digit (what the
// matching below can see of Python's lower()); every UTF-16 offset stays where it was.
function lowerForMatching(text) {
  if (/^[\x00-\x7f]*$/.test(text)) return text.toLowerCase();
  let out = "";
  for (const ch of text) {
    const low = ch.toLowerCase();
    out += low.length === 1 && /[a-z0-9]/.test(low) ? low : ch;
  }
  return out;
}

const escapeRegExp = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** runtime.highlight_spans: `[start, end)` UTF-16 spans of `text` matching the query. */
export function highlightSpans(query, text) {
  const lowered = lowerForMatching(text);
  const q = query.toLowerCase();
  const spans = [];
  const words = [...new Set((q.match(ASCII_TOKEN_RE) || []).filter((w) => w.length > 1 && !HIGHLIGHT_SKIP.has(w)))]
    .sort((a, b) => b.length - a.length);
  if (words.length) {
    const pattern = new RegExp(`(?<![a-z0-9])(?:${words.map(escapeRegExp).join("|")})(?![a-z0-9])`, "g");
    for (const m of lowered.matchAll(pattern)) spans.push([m.index, m.index + m[0].length]);
  }
  const grams = new Set();
  for (const run of q.match(CJK_RUN_RE) || []) {
    if (run.length === 1) grams.add(run);
    for (let i = 0; i + 1 < run.length; i++) grams.add(run.slice(i, i + 2));
  }
  for (const gram of grams) {
    for (let at = lowered.indexOf(gram); at !== -1; at = lowered.indexOf(gram, at + 1)) spans.push([at, at + gram.length]);
  }
  spans.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const merged = [];
  for (const [start, end] of spans) {
    const last = merged[merged.length - 1];
    if (last && start <= last[1]) last[1] = Math.max(last[1], end);
    else merged.push([start, end]);
  }
  return merged;
}

const nonBlankLines = (text) => text.split("\n").filter((line) => pyStrip(line));

// excerpts._plain: markup stripped (code fences too), on one line; heading lines without a
// match left out.
function plain(text, query) {
  text = text.split("\n").filter((line) => !FENCE_LINE_RE.test(line)).join("\n");
  const body = text.split("\n").filter((line) => !HEADING_LINE_RE.test(line) || highlightSpans(query, line).length).join("\n");
  let out = (pyStrip(body) ? body : text).replace(MD_LINE_RE, "");
  out = out.replace(MD_IMAGE_RE, "$1").replace(MD_LINK_RE, "$1").replace(TAG_RE, " ").replace(MD_MARK_RE, "");
  return pySplit(out).join(" ");
}

/** runtime.excerpt: about `words` words around the best run of matches → {text, highlights}. */
export function excerpt(query, text, { words = EXCERPT_WORDS, startLine = 0 } = {}) {
  const lines = nonBlankLines(text);
  const firstLine = Math.min(Math.max(startLine, 0), Math.max(lines.length - 1, 0));
  const flat = plain(lines.slice(firstLine).join("\n"), query);
  const units = [...flat.matchAll(UNIT_RE)].map((m) =>
    [m.index, m.index + m[0].length, m[0].length === 1 && CJK_START_RE.test(m[0]) ? 0.5 : 1.0]);
  if (!units.length) return { text: "", highlights: [] };
  const hits = new Set();
  for (const [s, e] of highlightSpans(query, flat)) {
    units.forEach(([a, b], i) => {
      if (a < e && s < b) hits.add(i);
    });
  }
  const hitUnits = [...hits].sort((a, b) => a - b);
  const window = (first) => {
    let budget = words;
    let end = first;
    while (end < units.length && budget >= units[end][2]) budget -= units[end++][2];
    return end;
  };
  let bestStart = 0;
  let bestCount = -1;
  const lead = words / 5;
  for (const hit of hitUnits.length ? hitUnits : [0]) {
    let first = hit;
    let back = 0.0;
    while (first > 0 && back + units[first - 1][2] <= lead) back += units[--first][2];
    const end = window(first);
    const count = hitUnits.filter((i) => first <= i && i < end).length;
    if (count > bestCount) [bestStart, bestCount] = [first, count];
  }
  const end = window(bestStart);
  let snippet = flat.slice(units[bestStart][0], units[end - 1][1]);
  if (bestStart > 0 || firstLine > 0) snippet = (CJK_START_RE.test(snippet) ? "…" : "… ") + snippet;
  if (end < units.length) snippet += CJK_START_RE.test(snippet[snippet.length - 1]) ? "…" : " …";
  return { text: snippet, highlights: highlightSpans(query, snippet) };
}

// runtime._section_of: the hit's heading section (the one with most matches) and its line.
function sectionOf(snippet, sections, query) {
  const match = LOCATOR_RE.exec(String(snippet.source_locator));
  if (!match) return [null, 0];
  const first = Number(match[1]);
  const lines = nonBlankLines(snippet.text);
  const last = first + Math.max(lines.length, 1) - 1;
  const spans = [];
  const leadEnd = Math.min(...sections.map((r) => r[0]), last + 1) - 1;
  if (first <= leadEnd) spans.push([first, leadEnd, null]);
  for (const [start, end, heading, anchor, level] of sections) {
    if (start <= last && end >= first) spans.push([Math.max(start, first), Math.min(end, last), { heading, anchor, level }]);
  }
  if (!spans.length) return [null, 0];
  let best = spans[0];
  if (query) {
    const counts = lines.map((line) => highlightSpans(query, line).length);
    const scores = spans.map(([a, b]) => counts.slice(a - first, b - first + 1).reduce((x, y) => x + y, 0));
    best = spans[scores.indexOf(Math.max(...scores))];
  }
  return [best[2], best[0] - first];
}

// ------------------------------------------------------------------ the lane

// sensitivity.is_restricted, fail closed: RESTRICTED unless the label normalises (NFKC, format
// characters removed, stripped, case-folded) to another label of the vocabulary.
const VISIBLE_LABELS = new Set(["public", "internal", "confidential"]);
export const isRestricted = (label) =>
  typeof label !== "string" || !VISIBLE_LABELS.has(pyStrip(label.normalize("NFKC").replace(/\p{Cf}/gu, "")).toLowerCase());

/** Why the instant lane cannot answer this search (null: it can). */
export function declines(args, { pageDocuments = 0 } = {}) {
  if (pageDocuments) return "page documents are searched too";
  if (typeof args.query !== "string") return "not a string query";
  const topK = args.topK ?? DEFAULT_TOP_K;
  if (!Number.isInteger(topK) || topK < 1 || topK > MAX_TOP_K) return "topK out of range";
  const filters = args.filters ?? null;
  const noFilters = filters === null || (Array.isArray(filters) ? !filters.length
    : typeof filters === "object" && Object.values(filters).every((v) => v === null || v === undefined));
  if (!noFilters) return "filters";
  if (args.mode !== undefined && args.mode !== null && args.mode !== "bm25") return "mode";
  if (args.postprocess) return "postprocess";
  return null;
}

export class InstantLane {
  /** Open the index whose header is `headerPath`; `readFile(path)` resolves to its bytes (checked). */
  static async open(readFile, headerPath) {
    const { meta, arrays } = await unpack(await readFile(headerPath), headerPath);
    if (!meta.glossary) throw new InstantLaneError(`${headerPath} has no glossary: rebuild the bundle`);
    return new InstantLane(readFile, meta, arrays);
  }

  constructor(readFile, meta, arrays) {
    this.readFile = readFile;
    this.nDocs = meta.bm25.n_docs;
    this.totalLength = meta.bm25.total_length;
    this.termStarts = meta.bm25.first_terms;
    this.termPaths = this.termStarts.map((term, i) => termShardPath(term, arrays.term_hashes[i]));
    const gaps = fromBytePlanes(arrays.fragment_start_planes, "the header");
    this.fragmentStarts = new Uint32Array(gaps.length);
    for (let i = 0, d = 0; i < gaps.length; i++) this.fragmentStarts[i] = d += gaps[i];
    this.fragmentPaths = Array.from(this.fragmentStarts, (start, i) => fragmentPath(start, arrays.fragment_hashes[i]));
    this.glossary = meta.glossary;
    this.files = new Map(); // path → Promise of the decoded file
    this.documents = new Map(); // doc_id → [url, sections] of every fragment read
    this.avgdl = this.nDocs ? this.totalLength / this.nDocs : 0;
  }

  #load(path, decode) {
    let found = this.files.get(path);
    if (!found) {
      found = Promise.resolve(this.readFile(path)).then((bytes) => unpack(bytes, path)).then(decode);
      found.catch(() => this.files.delete(path));
      this.files.set(path, found);
    }
    return found;
  }

  /** The term shard that would hold `term` (null: before every shard). */
  termPath(term) {
    const i = floorIndex(this.termStarts, term);
    return i >= 0 ? this.termPaths[i] : null;
  }

  // One term shard, decoded (read once; later calls share the first one's promise).
  #termShard(path) {
    return this.#load(path, ({ meta, arrays }) => {
      const entries = new Map();
      let offset = 0;
      let at = 0;
      meta.terms.forEach(([name, df, maxTf, minLen, count], i) => {
        // A very common term's token counts are in a file of their own (meta.lengths).
        const own = Object.hasOwn(meta.lengths, name) ? meta.lengths[name] : null;
        entries.set(name, { df, maxTf, minLen, offset, count, idf: arrays.idf[i], own, at });
        offset += count;
        if (own === null) at += count;
      });
      if (at !== arrays.lens.length) throw new InstantLaneError(`${path}: token counts do not match the postings: rebuild the bundle`);
      return { entries, docs: fromBytePlanes(arrays.doc_planes, path), tfs: arrays.tfs, lens: arrays.lens };
    });
  }

  // A common term's token counts (a length file), decoded once.
  #ownLengths(path) {
    return this.#load(path, ({ arrays }) => arrays.lens);
  }

  async postings(term) {
    const path = this.termPath(term);
    if (path === null) return null;
    const shard = await this.#termShard(path);
    const entry = shard.entries.get(term);
    if (!entry) return null;
    const docs = new Uint32Array(entry.count);
    let d = 0;
    for (let i = 0; i < entry.count; i++) docs[i] = d += shard.docs[entry.offset + i];
    const tfs = shard.tfs.subarray(entry.offset, entry.offset + entry.count);
    const lens = entry.own === null ? shard.lens.subarray(entry.at, entry.at + entry.count) : null;
    return { docs, tfs, lens, own: entry.own, idf: entry.idf, maxTf: entry.maxTf, minLen: entry.minLen };
  }

  // The token counts of `p`'s postings (a common term's are read from their own file).
  async #lens(p) {
    if (p.lens === null) p.lens = await this.#ownLengths(p.own);
    if (p.lens.length !== p.docs.length) throw new InstantLaneError(`${p.own}: token counts do not match the postings: rebuild the bundle`);
    return p.lens;
  }

  /** The files a search for `query` reads before ranking (its term shards). */
  termPathsFor(query) {
    const terms = new Set(queryVariants(query, this.glossary).flatMap(tokenize));
    return [...new Set([...terms].sort().map((t) => this.termPath(t)).filter((p) => p !== null))];
  }

  // BM25Index.rank of one variant: every hit, summed in query order, by (-score, docno).
  async #rank(tokens) {
    const qtf = new Map();
    for (const t of tokens) qtf.set(t, (qtf.get(t) || 0) + 1);
    const acc = new Map();
    const k1p = K1 + 1.0;
    const avgdl = this.avgdl;
    for (const [term, count] of qtf) {
      const p = await this.postings(term);
      if (!p || !p.docs.length || !this.nDocs) continue;
      const wq = count * p.idf;
      const lens = await this.#lens(p);
      for (let i = 0; i < p.docs.length; i++) {
        const d = p.docs[i];
        const f = p.tfs[i];
        acc.set(d, (acc.get(d) ?? 0.0) + (wq * f * k1p) / (f + K1 * (1.0 - B + (B * lens[i]) / avgdl)));
      }
    }
    return [...acc].filter(([, s]) => s > 0).sort((a, b) => b[1] - a[1] || a[0] - b[0]);
  }

  // The first `limit` of #rank(tokens), reading the token counts of fewer postings: the chunks
  // holding the terms of highest score bound ("essential") are scored exactly (every term, in
  // query order, as #rank sums them); once no other chunk can reach the limit-th of those
  // scores (the other terms' bounds add up to less), they are the answer. Else one more term
  // becomes essential, up to all of them (= #rank). A common term is then only looked up in
  // chunks already counted, and the file of its token counts is not read.
  async #top(tokens, limit) {
    const qtf = new Map();
    for (const t of tokens) qtf.set(t, (qtf.get(t) || 0) + 1);
    const k1p = K1 + 1.0;
    const avgdl = this.avgdl;
    const terms = [];
    for (const [term, count] of qtf) {
      const p = await this.postings(term);
      if (!p || !p.docs.length || !this.nDocs) continue;
      const wq = count * p.idf;
      const ub = (wq * p.maxTf * k1p) / (p.maxTf + K1 * (1.0 - B + (B * p.minLen) / avgdl));
      terms.push({ p, wq, ub });
    }
    const order = [...terms].sort((a, b) => b.ub - a.ub);
    const scores = new Map(); // docno → its exact score, for the chunks of the essential terms
    for (let e = 0; e + 1 < order.length; e++) {
      const { p } = order[e];
      const lens = await this.#lens(p);
      for (let i = 0; i < p.docs.length; i++) {
        const d = p.docs[i];
        if (scores.has(d)) continue;
        let total = 0.0;
        for (const { p: q, wq } of terms) {
          const f = tfOf(q, d);
          if (f) total += (wq * f * k1p) / (f + K1 * (1.0 - B + (B * lens[i]) / avgdl));
        }
        scores.set(d, total);
      }
      let rest = 0.0;
      for (let j = e + 1; j < order.length; j++) rest += order[j].ub;
      if (scores.size < limit) continue;
      const best = Float64Array.from(scores.values()).sort().reverse();
      const kth = best[limit - 1];
      if (kth > 0 && rest < kth * (1 - 1e-9)) {
        return [...scores].filter(([, x]) => x >= kth).sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, limit);
      }
    }
    return (await this.#rank(tokens)).slice(0, limit); // every term essential: score every posting
  }

  // ShardedIndex.retrieve without filters: RRF over the variants' rankings, best BM25 per hit.
  // Every term shard the variants read is requested at once (one round trip, not one per
  // shard); the ranking then reads them in the Python path's order.
  async #retrieve(query, limit) {
    const variants = [...new Set(queryVariants(query, this.glossary))];
    await Promise.all(this.termPathsFor(query).map((path) => this.#termShard(path)));
    const rankings = [];
    for (const v of variants) {
      rankings.push(variants.length === 1 ? await this.#top(tokenize(v), limit) : await this.#rank(tokenize(v)));
    }
    const fused = new Map();
    const best = new Map();
    for (const ranking of rankings) {
      ranking.forEach(([d, s], i) => {
        fused.set(d, (fused.get(d) ?? 0.0) + 1.0 / (RRF_K + i + 1));
        if (s > (best.get(d) ?? 0.0)) best.set(d, s);
      });
    }
    const ordered = [...fused].sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, limit);
    return ordered.map(([d, fusedScore]) => ({ docno: d, bm25: best.get(d) ?? 0.0, fused: fusedScore }));
  }

  async #chunks(docnos) {
    const out = new Map();
    await Promise.all(docnos.map(async (d) => {
      const i = floorIndex(this.fragmentStarts, d);
      const fragment = await this.#load(this.fragmentPaths[i], ({ meta }) => {
        for (const [docId, url, sections] of meta.docs) this.documents.set(docId, [url, sections]);
        return meta;
      });
      const row = fragment.rows[d - fragment.start];
      out.set(d, Object.fromEntries(fragment.fields.map((name, j) => [name, row[j]])));
    }));
    return out;
  }

  /** Read what a search for `query` reads (its term shards, the length files of the common terms
   * it scores, its top `topK` hits' fragments);
   * resolves to their paths. */
  async prefetch(query, topK = DEFAULT_TOP_K) {
    if (!pyStrip(query)) return [];
    const found = await this.#retrieve(query, topK);
    await this.#chunks(found.map((h) => h.docno));
    const fragments = found.map(({ docno }) => this.fragmentPaths[floorIndex(this.fragmentStarts, docno)]);
    const owns = [];
    for (const term of new Set(queryVariants(query, this.glossary).flatMap(tokenize))) {
      const p = await this.postings(term);
      if (p && p.own !== null && this.files.has(p.own)) owns.push(p.own);
    }
    return [...new Set([...this.termPathsFor(query), ...owns, ...fragments])];
  }

  /** BundleSearcher.search for a plain query → {hits, took_ms} (see declines()). A bundle
   * holds no RESTRICTED chunk (the build refuses them); meeting one anyway, the lane refuses
   * to answer (the full engine ranks as if it were absent). */
  async search(query, { topK = DEFAULT_TOP_K, highlight = true } = {}) {
    const started = performance.now();
    const outcome = { hits: [], took_ms: 0 };
    if (!pyStrip(query)) return outcome;
    const found = await this.#retrieve(query, topK);
    const chunks = await this.#chunks(found.map((h) => h.docno));
    for (const { docno, bm25, fused } of found) {
      const chunk = chunks.get(docno);
      if (isRestricted(chunk.sensitivity)) throw new InstantLaneError("the index holds a chunk that is not visible: rebuild the bundle");
      outcome.hits.push(this.#hit(query, snippetOf(chunk, bm25, fused), highlight));
    }
    outcome.took_ms = Math.round((performance.now() - started) * 1000) / 1000;
    return outcome;
  }

  #hit(query, snippet, highlight) {
    const [url, sections] = this.documents.get(snippet.doc_id) || ["", []];
    const [section, line] = sectionOf(snippet, sections, query);
    let link = url || null;
    if (link !== null && section !== null && section.anchor) link = `${link}#${section.anchor}`;
    const hit = { snippet, section, highlights: highlight ? highlightSpans(query, snippet.text) : [], url: link };
    if (highlight) hit.excerpt = excerpt(withSynonyms(query, this.glossary), snippet.text, { startLine: line });
    return hit;
  }
}

// The tf of chunk `d` in postings `p` (0: none), by binary search.
function tfOf(p, d) {
  let lo = 0;
  let hi = p.docs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (p.docs[mid] < d) lo = mid + 1;
    else hi = mid;
  }
  return lo < p.docs.length && p.docs[lo] === d ? p.tfs[lo] : 0;
}

// narrative_link._to_snippet plus the multi-index library tag.
function snippetOf(chunk, bm25, fused) {
  const snippet = {
    text: chunk.text, doc_id: chunk.doc_id, title: chunk.title, source_locator: chunk.source_locator,
    chunk_id: chunk.chunk_id,
  };
  for (const name of SNIPPET_FIELDS) snippet[name] = chunk[name];
  snippet.scores = { bm25, vector: 0.0, fused };
  if (chunk.window_text) snippet.prompt_text = chunk.window_text;
  if (chunk.parent_locator) snippet.parent_locator = chunk.parent_locator;
  snippet.library_id = "bundle";
  return snippet;
}
