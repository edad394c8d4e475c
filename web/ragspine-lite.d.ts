// Types for ragspine-lite.mjs, the browser API of ragspine_lite.

/** Bundle format this runtime reads (must equal manifest.json's format_version). */
export declare const FORMAT_VERSION: number;
export declare const VERSION: string;

/** One retrieved chunk: the snippet dict of Python's agent link, plus its library. */
export interface Snippet {
  /** The chunk text: a contiguous substring of the source document's extracted text. */
  text: string;
  doc_id: string;
  title: string;
  /** Real paragraph span, e.g. "en/report.md#para2-3". */
  source_locator: string;
  chunk_id: string;
  topic: string;
  entity: string;
  geography: string;
  period: string;
  language: string;
  /** Never "RESTRICTED": those are dropped before a snippet is built. */
  sensitivity: string;
  scores: { bm25: number; vector: number; fused: number };
  /** "bundle" for the prebuilt corpus, "page" for documents added in the page. */
  library_id: "bundle" | "page" | string;
  /** Generation context only (a window, or the `compress` postprocessor's extract); cite `text`. */
  prompt_text?: string;
  parent_locator?: string;
}

export interface Section {
  /** Heading text (without Markdown # markers). */
  heading: string;
  /** The heading's HTML id (or an enclosing element's); a Markdown heading's slug; "" = the page. */
  anchor: string;
  level: number;
}

export interface Hit {
  snippet: Snippet;
  /** The heading section the chunk starts in, if any. */
  section: Section | null;
  /** [start, end) ranges of snippet.text (UTF-16 units) that match query terms. */
  highlights: Array<[number, number]>;
  /**
   * Where the hit lives: the page URL (+ "#anchor" of its section), relative to the bundle
   * URL (resolve it with `new URL(url, bundleURL)`); null for documents added in the page.
   */
  url: string | null;
  /** About 30 words around the best match, markup stripped, with highlight ranges (glossary
   * synonyms in other languages too); absent when searched with highlight: false. */
  excerpt?: { text: string; highlights: Array<[number, number]> };
}

export interface DetailedResults {
  query: string;
  results: Snippet[];
  hits: Hit[];
  tookMs: number;
  /** Set only while a reranker is configured (see configureReranker). */
  rerank: RerankReport | null;
  /** Set only for bundles with vectors whose model is loaded. */
  semantic: SemanticReport | null;
  /** Set only while LLM query layers are configured (see configureLLM). */
  queryLayers: QueryLayersReport | null;
  /** What the worker did for this search: the bundle files it loaded (`files`), how long
   * Python waited for files fetched while it searched (`fetchMs`: a large hybrid site's vector
   * lists and blocks, the fragments of hits only the dense lane found; with JSPI) and, for
   * bundles with vectors, how it ran the model (`path`, `totalMs`, `modelMs`). */
  worker: {
    files: FileLoad[];
    fetchMs?: number;
    path?: "jspi" | "primed";
    totalMs?: number;
    modelMs?: number;
    /** "instant" when the instant lane answered (absent: the full engine). */
    lane?: "instant";
  } | null;
  /** Which lane answered: "instant" (JavaScript, before Pyodide is up; the same results as the
   * full engine's) or "full" (Pyodide). */
  lane: "instant" | "full";
  /** How it was searched: "hybrid" (BM25 + the bundle's model) or "bm25". A hybrid bundle's
   * default searches are "bm25" until its model joined the engine (see RagSpineLite.engine). */
  mode: SearchMode;
}

/** A bundle file (index shard, text fragment, vectors) the worker loaded for a request. */
export interface FileLoad {
  /** Relative to the bundle, e.g. "data/terms/t-0123456789abcdef.bin". */
  path: string;
  bytes: number;
  /** "cache": the Cache API (an earlier visit); "network": fetched ahead (by prefetch, or
   * before the search ran); "sync": read by Python while searching (e.g. a hybrid search's
   * result fragments). */
  from: "cache" | "network" | "sync";
}

export interface PrefetchResult {
  /** The index files a search for the query reads that were not in memory yet (now they are). */
  paths: string[];
  /** Every file the prefetch loaded: those, and a hybrid search's vector lists and blocks. */
  files: FileLoad[];
  /** How often Python was asked what was still missing (shards, then result fragments). */
  rounds: number;
  ms: number;
}

export interface SemanticReport {
  mode: SearchMode;
  /** "hybrid", "bm25", "bm25:outside-vocabulary" (e.g. Chinese for MiniLM) or "bm25:embedding-failed". */
  channel: string;
  error: string | null;
}

export interface RerankReport {
  /** e.g. "remote:colbert". */
  spec: string;
  /** False when the reranker failed and the fused order was kept. */
  applied: boolean;
  /** Why the reranker failed (null when applied). */
  error: string | null;
  ms: number;
}

export interface QueryLayerOutcome {
  /** "hyde", "rag_fusion", "step_back" or "decompose". */
  transform: string;
  /** "applied", "provider_error", "unparsed", "refused" (the gate dropped every generated query) or "not_decomposed". */
  status: string;
  /** The generated queries that were searched (a HyDE passage is a probe, never a result). */
  generated: string[];
  /** Generated queries the gate refused (never searched). */
  refused: number;
  error: string | null;
}

export interface QueryLayersReport {
  /** The layers that changed this search, outermost last; empty: the plain search ran. */
  applied: string[];
  outcomes: QueryLayerOutcome[];
}

export interface LLMOptions {
  /** The endpoint's base URL (`ragspine-lite serve-remote` with an LLM); null switches the layers off. */
  url?: string | null;
  token?: string | null;
  /** Per-request timeout in seconds (default 60). */
  timeoutS?: number | null;
  /** "none" (default), "hyde", "rag_fusion" ("fusion") or "step_back" ("stepback"). */
  transform?: string;
  /** "none" (default) or "llm": split questions into at most 4 sub-questions. */
  decompose?: string;
  /** "none" (default), "heuristic" or "llm": decompose only multi-part questions. */
  adaptive?: string;
  /** Ask the endpoint's /v1/models now (default true). */
  check?: boolean;
}

export interface LLMInfo {
  transform: string;
  decompose: string;
  adaptive: string;
  url: string | null;
  enabled: boolean;
  models?: unknown;
  /** Why the check failed; later searches run the plain search while it fails. */
  error?: string;
}

export interface RerankerOptions {
  /** "none" (off), "cross_encoder", "colbert", "splade", "llm", or "remote:<method>". */
  reranker?: string;
  /** The endpoint's base URL, e.g. "http://127.0.0.1:8765"; it must allow this page's origin (CORS). */
  url?: string | null;
  /** Bearer token, when the endpoint requires one. */
  token?: string | null;
  /** Per-request timeout in seconds (default 10). */
  timeoutS?: number | null;
  /** Ask the endpoint's /v1/models now (default true). */
  check?: boolean;
}

export interface RerankerInfo {
  spec: string;
  url: string | null;
  enabled: boolean;
  /** What the endpoint reported it has loaded (when checked and reachable). */
  models?: unknown;
  /** Why the check failed; later searches keep the fused order while it fails. */
  error?: string;
}

export type FilterValue = string | string[] | { op: FilterOp; value: string | string[] };
/** An object of field → value (eq) / list (in) / {op, value}, or "field=op:value" expressions. */
export type Filters = Partial<Record<FilterField, FilterValue | null>> | string[];

// <contract> generated by `python -m ragspine_lite.bundle.contract --write`: do not edit until </contract>
export type SearchMode = "hybrid" | "bm25";
export type FilterOp = "eq" | "ne" | "in" | "nin" | "gt" | "gte" | "lt" | "lte" | "between";
export type FilterField = "doc_id" | "title" | "topic" | "entity" | "geography" | "period" | "language";

export interface SearchOptions {
  filters?: Filters | null;
  /** 1 … 200, default 10. */
  topK?: number;
  /**
   * Snippet postprocessors run after the RESTRICTED exit (and the reranker), in order:
   * "mmr" (diversity), "lost_in_middle" (best at both ends), "compress" (adds `prompt_text`,
   * `text` unchanged), as a comma list or an array. Default none: results unchanged.
   */
  postprocess?: string | string[] | null;
}

export interface DetailedSearchOptions extends SearchOptions {
  /** Compute highlight spans (default true). */
  highlight?: boolean;
  /** Apply the configured reranker (default true). */
  rerank?: boolean;
  /**
   * "hybrid" or "bm25"; default (null): hybrid when the bundle has vectors and its model
   * is loaded, else BM25. In the page a hybrid bundle answers BM25 until its model joined
   * (`mode` of the results says which); a search asked for "hybrid" waits for it.
   */
  mode?: SearchMode | null;
  /** Apply the configured LLM query layers (default true). */
  queryLayers?: boolean;
}

/** What prefetch() takes (with a search's defaults). */
export interface PrefetchOptions {
  /**
   * "hybrid" or "bm25"; default (null): hybrid when the bundle has vectors and its model
   * is loaded, else BM25. In the page a hybrid bundle answers BM25 until its model joined
   * (`mode` of the results says which); a search asked for "hybrid" waits for it.
   */
  mode?: SearchMode | null;
  filters?: Filters | null;
  /** 1 … 200, default 10. */
  topK?: number;
}
// </contract>

/** A hybrid bundle's "model" phase comes after "index" (the full engine answers meanwhile). */
export type ProgressPhase = "manifest" | "boot" | "install" | "model" | "index" | "restore" | "ingest" | "ready";

export interface ProgressEvent {
  phase: ProgressPhase;
  message: string;
  /** Bytes (downloads) or documents (restore/ingest) done so far, when known. */
  loaded?: number;
  total?: number;
  /** While opening: bytes of every file the boot downloads, done so far and in all. */
  overall?: { loaded: number; total: number };
}

export interface OpenOptions {
  /** URL of the bundle folder (the one holding manifest.json); default "./". */
  bundle?: string;
  onProgress?: ((event: ProgressEvent) => void) | null;
  /** Python stdout/stderr and worker warnings; default: warnings to console.warn. */
  onLog?: ((level: "info" | "warn" | "error", message: string) => void) | null;
  /** Where ragspine-worker.mjs lives; default: next to ragspine-lite.mjs. */
  workerURL?: string | URL | null;
  /** Reject open() after this many milliseconds (default 180000; 0 = never). */
  timeoutMs?: number;
  /** Load the bundle's embedding model when it has one (default true; false: BM25 only). */
  embeddings?: boolean;
  /** Let Python await onnxruntime-web through JSPI where the browser has it (default true);
   * false computes query vectors in JS before each search instead. */
  jspi?: boolean;
  /** Keep the runtime files in the browser's Cache API for the next visit (default true).
   * Entries are checked against the manifest's sha256s; without a usable Cache API the files
   * come from the network (logged). */
  cache?: boolean;
  /** "unpack" (default): unpack the wheel into site-packages; "micropip": install it with
   * micropip (slower; kept for comparison). */
  install?: "unpack" | "micropip";
  /** Keep a Pyodide memory snapshot (taken after importing ragspine_lite) in the Cache API and
   * restore it on the next visit instead of starting Python afresh (default true; needs
   * `cache`). Experimental in Pyodide; any failure falls back to a plain boot. */
  snapshot?: boolean;
  /** Answer plain BM25 searches from the instant lane (JavaScript) until Pyodide is up, so
   * open() resolves after the manifest and the index header (default true; a hybrid bundle's
   * default searches too, with BM25, until its model joined). false: open() waits for the
   * full engine and, on a hybrid bundle, its model. */
  instant?: boolean;
}

export interface Manifest {
  format_version: number;
  title: string;
  runtimes: Record<string, string>;
  entry: {
    /** The index header (term and fragment directories), e.g. "data/header-<sha256 prefix>.bin". */
    index: string;
    pyodide: string;
    wheels: { micropip: string; ragspine_lite: string };
    api: string;
    worker: string;
    demo?: string;
    embeddings?: {
      name: string;
      model_id: string;
      dim: number;
      /** null for models that do not truncate (use-multilingual). */
      max_length: number | null;
      model: string;
      vocab: string;
      config: string;
      ort: { dir: string; module: string };
      vectors: number;
    };
  };
  counts: {
    documents: number;
    chunks: number;
    empty_documents: number;
    languages: Record<string, number>;
    sections: number;
  };
  files: Record<string, { sha256: string; bytes: number }>;
  [key: string]: unknown;
}

/** Which engine answers: the instant lane (JavaScript), the full engine (Pyodide; BM25 on a
 * hybrid bundle whose model is still loading), or the full engine with the model joined. */
export type Engine = "instant" | "full" | "hybrid";

export interface OpenInfo {
  /** "instant": open() resolved on the instant lane (the other fields are filled by the full
   * engine's info, see RagSpineLite.fullEngine()); "full": Pyodide is up; "hybrid": the
   * bundle's model joined it. */
  engine: Engine;
  /** The bundle's model: "none" (a BM25 bundle, or embeddings: false), "loading", "ready"
   * (joined: engine "hybrid") or "failed" (embeddingsError says why; searches stay BM25). */
  dense: "none" | "loading" | "ready" | "failed";
  manifest: Manifest;
  /** Milliseconds per phase: manifest, boot, install, index, restore, total; and
   * bootEndedAt, when Pyodide was up (epoch milliseconds, comparable across realms). */
  timings: Record<string, number>;
  /** Whether page documents are stored in IndexedDB (null before the full engine is up). */
  persistence: boolean | null;
  restored: number;
  restoreErrors: string[];
  versions: { python: string; pyodide: string; ragspine_lite: string } | null;
  /** The loaded embedding model (null: a BM25-only bundle or embeddings: false). */
  embeddings: { name: string; modelId: string; dim: number; jspi: boolean; loadMs: number } | null;
  /** Why the bundle's embedding model could not be loaded (search then runs BM25 only). */
  embeddingsError: string | null;
  /** Where the runtime files came from (once the boot's downloads are done, the model's
   * included; null before): paths served by the Cache API (`cached`), fetched
   * from the network (`fetched`), cache failures (the files then came from the network), and
   * whether Python was restored from a stored snapshot, took one for the next visit, or neither. */
  cache: {
    enabled: boolean; cached: string[]; fetched: string[]; errors: string[];
    snapshot: "restored" | "taken" | "none";
  } | null;
}

export interface PageDocument {
  doc_id: string;
  name: string;
  /** Empty for a RESTRICTED document: its title is RESTRICTED too. */
  title: string;
  chunks: number;
  language: string;
  restricted: boolean;
  /** With the bundle's embedding model: how many chunk vectors it got (kept in IndexedDB). */
  embedded?: number;
  /** Why the model could not embed it (the document is then searched with BM25 only). */
  embedding_error?: string;
}

export interface Stats {
  ragspine_lite: string;
  format_version: number;
  bundle: { documents: number; chunks: number } | null;
  page: { documents: number; chunks: number; restricted_documents: number };
  /** Distinct values per metadata field, for filter controls. */
  facets: Record<"topic" | "entity" | "geography" | "period" | "language", string[]>;
  timings: Record<string, number>;
  persistence: boolean;
  manifest: Manifest;
  /** Bundle files loaded since open (the header not counted): how many, their bytes, how
   * many came from the Cache API, from the network before Python read them, or were read
   * synchronously, and how many of them were loaded by prefetch(). */
  files: { files: number; bytes: number; cache: number; network: number; sync: number; prefetched: number };
}

export interface DocumentInput {
  /** A file name; its extension picks the format (.txt, .md, .html, .htm). */
  name: string;
  text: string;
}

export declare class RagSpineLiteError extends Error {
  /** Python exception type or "RagSpineLiteError"/"BundleError"/"BundleFormatError". */
  name: string;
  /** The phase or operation that failed. */
  phase?: string;
}

/** The "engine" event's detail: the engine now answering and its info; or, when the full
 * engine could not start, engine "failed" and the error (plain searches still work on the
 * instant lane; a hybrid bundle's info.dense is then "failed"). */
export interface EngineEventDetail {
  engine: Engine | "failed";
  info: OpenInfo;
  error?: { name: string; message: string };
}

export declare class RagSpineLite extends EventTarget {
  static open(options?: OpenOptions): Promise<RagSpineLite>;
  readonly manifest: Manifest;
  /** open()'s info; replaced by the engine's as it moves on (Pyodide up, the model joined). */
  readonly info: OpenInfo;
  /** "instant" until the full engine (Pyodide) is up, then "full"; "hybrid" once a hybrid
   * bundle's model joined it. Each change fires an "engine" event (CustomEvent with
   * EngineEventDetail): `rs.addEventListener("engine", (e) => ...)`. */
  readonly engine: Engine;
  /** Resolves to the full engine's info once Pyodide is up (and starts its boot now, if the
   * instant lane had deferred it); rejects if it cannot start. */
  fullEngine(): Promise<OpenInfo>;
  /** Resolves to the engine's info once the bundle's model joined it (engine "hybrid") or
   * could not (dense "failed"); for a BM25 bundle once the full engine is up. Starts the boot
   * now; rejects if the full engine cannot start. */
  denseReady(): Promise<OpenInfo>;
  search(query: string, options?: SearchOptions): Promise<Snippet[]>;
  searchDetailed(query: string, options?: DetailedSearchOptions): Promise<DetailedResults>;
  /** Fetch what a search for `query` will read, while the visitor types (debounce it): its
   * term shards and BM25 hits' text; in hybrid mode on a site with coarse vector lists also
   * the query's vector and the lists and blocks its scan reads. */
  prefetch(query: string, options?: PrefetchOptions): Promise<PrefetchResult>;
  configureReranker(options?: RerankerOptions): Promise<RerankerInfo>;
  /** Run HyDE / RAG-Fusion / step-back / decomposition through the endpoint's LLM on later searches. */
  configureLLM(options?: LLMOptions): Promise<LLMInfo>;
  /** Vectors from the bundle's embedding model; rejects for bundles without one. */
  embed(texts: Iterable<string>): Promise<number[][]>;
  ingest(docs: Array<File | Blob | DocumentInput> | FileList | File | DocumentInput): Promise<{
    documents: PageDocument[];
    persisted: boolean;
  }>;
  documents(): Promise<PageDocument[]>;
  forget(docIds?: Iterable<string> | null): Promise<{ removed: number }>;
  stats(): Promise<Stats>;
  close(): void;
}

export default RagSpineLite;
