"""Coarse (IVF) vector lists: built deterministically, probed, rescored to the exact integers."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest
from test_bundle_dense import (
    CalibratedHash,
    Folder,
    gauss,
    hybrid_queries,
    int8_store,
    run_dense_module,
)
from test_bundle_shards import _site

from ragspine_lite.bundle import coarse
from ragspine_lite.bundle.coarse import CoarseScanner, build_lists, open_scanner, write_vectors
from ragspine_lite.bundle.dense import ShardScanner, stored_codes
from ragspine_lite.bundle.manifest import BundleFormatError
from ragspine_lite.bundle.options import SEARCH_DEFAULTS
from ragspine_lite.bundle.runtime import BundleSearcher
from ragspine_lite.bundle.shards import DirectoryFiles, ShardedBundle
from ragspine_lite.vector.quantize import Int8Codec, numpy_or_none
from ragspine_lite.vector.sqlite_store import SqliteVectorStore
from ragspine_lite.vector.store import VectorRecord

needs_numpy = pytest.mark.skipif(numpy_or_none() is None, reason="numpy not importable")
SCANNERS = [False, pytest.param(True, marks=needs_numpy)]
DIM = 16
ROWS = 300


def writer(root: Path):
    """What the bundle writer does with a file: content-named under its folder."""

    def write(folder: str, data: bytes) -> str:
        path = f"{folder}/v-{hashlib.sha256(data).hexdigest()[:16]}.i8"
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
        return path

    return write


@pytest.fixture()
def lists(tmp_path: Path) -> tuple[Path, dict, list[list[int]]]:
    """300 rows (3 without a vector) in coarse lists; → (root, entry, rows as ints)."""
    ids = [f"c{i:03d}" for i in range(ROWS)]
    db = tmp_path / "chunks.db"
    int8_store(db, [cid for cid in ids if cid not in ("c004", "c100", "c299")], seed=11)
    root = tmp_path / "site"
    entry = write_vectors(db, ids, writer(root), model_id="m", min_rows=0)
    _codec, dim, flat, _missing = stored_codes(db, ids, "m")
    rows = [[b - 256 if b > 127 else b for b in flat[i * dim : (i + 1) * dim]] for i in range(ROWS)]
    return root, entry, rows


def exact(rows: list[list[int]], q: list[int], threshold: int | None) -> list[tuple[int, int]]:
    dots = [(i, sum(a * b for a, b in zip(q, r, strict=True))) for i, r in enumerate(rows)]
    kept = [(i, d) for i, d in dots if i not in (4, 100, 299)]
    return [(i, d) for i, d in kept if threshold is None or d > threshold]


def signed(codes: bytes) -> list[int]:
    return [b - 256 if b > 127 else b for b in codes]


def test_small_bundles_keep_the_exact_shards(tmp_path: Path) -> None:
    ids = [f"c{i}" for i in range(30)]
    int8_store(tmp_path / "c.db", ids)
    entry = write_vectors(tmp_path / "c.db", ids, writer(tmp_path), model_id="m", min_rows=31)
    assert "shards" in entry and "lists" not in entry
    assert isinstance(open_scanner(DirectoryFiles(tmp_path), entry), ShardScanner)


def parsed(root: Path, entry: dict, j: int) -> coarse._List:
    count, path, blocks = entry["lists"][j]
    return coarse._List((root / path).read_bytes(), count, blocks, DIM, path)


def directory(root: Path, entry: dict) -> coarse._Directory:
    return coarse._Directory((root / entry["blocks"]).read_bytes(), entry["rows"],
                             entry["blocks"])


def block_paths(root: Path, entry: dict, j: int) -> list[str]:
    """List ``j``'s block files, in order (numbered list by list in the directory)."""
    first = sum(b for _, _, b in entry["lists"][:j])
    return [directory(root, entry).path(first + b) for b in range(entry["lists"][j][2])]


def test_the_lists_partition_the_rows_and_the_build_is_deterministic(lists, tmp_path) -> None:
    root, entry, rows = lists
    assert entry["rows"] == ROWS and entry["missing"] == [4, 100, 299]
    assert "shards" not in entry and len(entry["lists"]) == coarse.list_count(ROWS - 3)
    assert 1 <= entry["probe"] < len(entry["lists"]) and entry["candidates"] >= 1
    cents = (root / entry["centroids"]).read_bytes()
    seen: list[int] = []
    homes = directory(root, entry)
    number = 0  # blocks are numbered list by list
    for j, (count, _path, _blocks) in enumerate(entry["lists"]):
        if not count:
            continue
        found = parsed(root, entry, j)
        assert found.docnos == sorted(found.docnos) and len(found.docnos) == count
        in_blocks = []
        for b, block in enumerate(block_paths(root, entry, j)):
            data = (root / block).read_bytes()
            n = len(data) // (4 + DIM)
            docnos = [int.from_bytes(data[4 * i : 4 * i + 4], "little") for i in range(n)]
            assert all(homes.block(d) == number for d in docnos)  # the directory's docno map
            number += 1
            assert docnos == sorted(d for d, k in zip(found.docnos, found.block_of, strict=True)
                                    if k == b)
            assert [signed(data[4 * n + i * DIM : 4 * n + (i + 1) * DIM])
                    for i in range(n)] == [rows[d] for d in docnos]
            in_blocks += docnos
        assert sorted(in_blocks) == found.docnos
        cent = signed(cents[j * DIM : (j + 1) * DIM])
        for i, d in enumerate(found.docnos):  # the residual's scale and sign bits
            res = [x - c for x, c in zip(rows[d], cent, strict=True)]
            assert found.scales[i] == (16 * sum(map(abs, res)) + DIM // 2) // DIM
            bits = found.signs[i * 2 : i * 2 + 2]
            assert [bool(bits[k // 8] >> (k % 8) & 1) for k in range(DIM)] == [x > 0 for x in res]
        seen += found.docnos
    assert sorted(seen) == [d for d in range(ROWS) if d not in (4, 100, 299)]
    assert [homes.block(d) for d in (4, 100, 299)] == [None] * 3 and len(homes.hashes) == 8 * number
    again = write_vectors(root.parent / "chunks.db", [f"c{i:03d}" for i in range(ROWS)],
                          writer(tmp_path / "again"), model_id="m", min_rows=0, numpy=False)
    assert again == entry  # pure Python builds the same files


@pytest.mark.parametrize("numpy", SCANNERS)
def test_an_estimate_is_the_centroid_dot_plus_the_scaled_sign_dot(lists, numpy) -> None:
    root, entry, rows = lists
    cents = (root / entry["centroids"]).read_bytes()
    rnd = random.Random(8)
    q = [rnd.randrange(-127, 128) for _ in range(DIM)]
    for j in range(len(entry["lists"])):
        if not entry["lists"][j][0]:
            continue
        found = parsed(root, entry, j)
        cent = signed(cents[j * DIM : (j + 1) * DIM])
        cdot = sum(a * b for a, b in zip(q, cent, strict=True))
        want = []
        for i, d in enumerate(found.docnos):
            sign = [1 if x > c else -1 for x, c in zip(rows[d], cent, strict=True)]
            want.append(16 * cdot + found.scales[i] * sum(map(int.__mul__, q, sign)))
        assert found.estimates(q, cdot, numpy) == want


@needs_numpy
def test_numpy_and_pure_python_k_means_agree() -> None:
    rnd = random.Random(2)
    centers = [[rnd.gauss(0, 1) for _ in range(DIM)] for _ in range(9)]
    codec = Int8Codec(60.0)
    codes = b"".join(codec.encode([c + rnd.gauss(0, 0.5) for c in centers[i % 9]])
                     for i in range(500))
    fast = build_lists(codes, DIM, 20, codec, numpy=True)
    assert fast == build_lists(codes, DIM, 20, codec, numpy=False)
    assert len(set(fast[1])) > 9  # the rows spread over the lists


@pytest.mark.parametrize("numpy", SCANNERS)
def test_probing_every_list_is_the_exact_scan(lists, numpy) -> None:
    root, entry, rows = lists
    scanner = CoarseScanner(Folder(root), entry, probe=len(entry["lists"]), candidates=ROWS,
                            numpy=numpy)
    rnd = random.Random(4)
    for threshold in (None, 0, 200):
        q = [rnd.randrange(-127, 128) for _ in range(DIM)]
        query = bytes(b & 0xFF for b in q)
        assert sorted(scanner.scan(query, threshold)) == exact(rows, q, threshold)


@pytest.mark.parametrize("numpy", SCANNERS)
def test_a_probe_reads_its_lists_and_blocks_once_and_scores_them_exactly(lists, numpy) -> None:
    root, entry, rows = lists
    files = Folder(root)
    scanner = CoarseScanner(files, entry, candidates=12, numpy=numpy)
    q = rows[17]
    query = bytes(b & 0xFF for b in q)
    probed = scanner.probed(query)
    assert len(probed) == entry["probe"] and files.reads == [entry["centroids"]]
    blocks = scanner.blocks(query)
    assert files.reads[1:] == [entry["lists"][j][1] for j in probed]
    assert 1 <= len(blocks) <= 12 and {j for j, _ in blocks} <= set(probed)
    found = scanner.scan(query, None)
    paths = [block_paths(root, entry, j)[b] for j, b in blocks]
    assert files.reads[1 + len(probed)] == entry["blocks"]  # the directory names the blocks
    assert files.reads[2 + len(probed) :] == list(dict.fromkeys(paths))
    want = dict(exact(rows, q, None))
    assert found and all(want[d] == dot for d, dot in found)
    assert (17, want[17]) in found  # the row itself has the best estimate here
    reads = len(files.reads)
    assert scanner.scan(query, 0) == [h for h in found if h[1] > 0] and len(files.reads) == reads
    # dots of any rows are exact: their blocks are read on need, not their lists
    picked = [3, 4, 250, 17, 299]
    lists_read = {p for p in files.reads if p in {path for _, path, _ in entry["lists"]}}
    assert scanner.dots(query, picked) == [want.get(d, 0) for d in picked]
    assert {p for p in files.reads if p in {path for _, path, _ in entry["lists"]}} == lists_read


@pytest.mark.parametrize("numpy", SCANNERS)
def test_a_scan_also_reads_the_blocks_of_the_rows_it_is_given(lists, numpy) -> None:
    """``scan_also``: the rows of ``also`` and every row of their blocks, scored exactly,
    besides what the scan reads; rows without a vector are never there."""
    root, entry, rows = lists
    scanner = CoarseScanner(Folder(root), entry, probe=1, candidates=1, numpy=numpy)
    q = rows[17]
    query = bytes(b & 0xFF for b in q)
    found = scanner.scan(query, None)
    far = [d for d, _ in sorted(exact(rows, [-x for x in q], None), key=lambda h: (-h[1], h[0]))]
    also = [far[0], far[1], 4]  # two rows far from the query, one without a vector
    wide = scanner.scan_also(query, None, also)
    want = dict(exact(rows, q, None))
    assert set(found) < set(wide) and all(want[d] == dot for d, dot in wide)
    assert {far[0], far[1]} <= {d for d, _ in wide} and 4 not in {d for d, _ in wide}
    blocks = set(scanner.blocks(query)) | {scanner._home(d) for d in far[:2]}
    assert scanner.blocks(query, also) == sorted(blocks)
    assert [d for d, _ in wide] == [d for j, b in sorted(blocks)
                                    for d in scanner._block(j, b).ids]


@pytest.mark.parametrize("numpy", SCANNERS)
def test_copies_with_equal_vectors_share_a_block_and_rank_by_docno(tmp_path, numpy) -> None:
    """Rows with the same codes (a text stored twice) get the same list and block, so a scan
    finds all or none of them, and their equal dots rank by docno as in the exact scan."""
    ids = [f"c{i:03d}" for i in range(120)]
    rnd = random.Random(3)
    vectors = [gauss(rnd) for _ in range(60)]
    with SqliteVectorStore(tmp_path / "c.db", model_id="m", quantization="int8") as store:
        store.upsert(VectorRecord(cid, vectors[i % 60]) for i, cid in enumerate(ids))
    _codec, dim, flat, _ = stored_codes(tmp_path / "c.db", ids, "m")
    entry = write_vectors(tmp_path / "c.db", ids, writer(tmp_path / "site"), model_id="m",
                          min_rows=0, numpy=numpy)
    scanner = CoarseScanner(Folder(tmp_path / "site"), entry, numpy=numpy)
    exact_scan = CoarseScanner(Folder(tmp_path / "site"), entry, probe=10**6,
                               candidates=10**6, numpy=numpy)
    home = {}
    for j, (count, path, blocks) in enumerate(entry["lists"]):
        if count:
            found = coarse._List((tmp_path / "site" / path).read_bytes(), count, blocks, dim, path)
            home.update((d, (j, b)) for d, b in zip(found.docnos, found.block_of, strict=True))
    assert all(scanner._home(d) == home[d] for d in home)  # the directory agrees
    for i in range(0, 60, 7):
        query = flat[i * dim : (i + 1) * dim]
        assert home[i] == home[60 + i]
        got = {d: dot for d, dot in scanner.scan(query, None)}
        assert (i in got) == (60 + i in got) and got.get(i) == got.get(60 + i)
        top = sorted(exact_scan.scan(query, None), key=lambda h: (-h[1], h[0]))[:2]
        assert [d for d, _ in top] == [i, 60 + i]


def test_more_candidates_find_more_of_the_exact_top_ten(lists) -> None:
    root, entry, rows = lists
    rnd = random.Random(5)
    queries = [[rnd.randrange(-127, 128) for _ in range(DIM)] for _ in range(20)]
    found = []
    for wanted in (4, 64, ROWS):
        scanner = CoarseScanner(Folder(root), entry, probe=len(entry["lists"]),
                                candidates=wanted)
        hits = 0
        for q in queries:
            top = {d for d, _ in sorted(exact(rows, q, None), key=lambda h: (-h[1], h[0]))[:10]}
            got = scanner.scan(bytes(b & 0xFF for b in q), None)
            hits += len(top & {d for d, _ in sorted(got, key=lambda h: (-h[1], h[0]))[:10]})
        found.append(hits)
    assert found[0] < found[1] <= found[2] == 200


def test_a_damaged_list_or_entry_is_a_clear_error(lists) -> None:
    root, entry, _rows = lists
    _count, path, _blocks = next(item for item in entry["lists"] if item[0])
    (root / path).write_bytes((root / path).read_bytes()[:-1])
    scanner = CoarseScanner(DirectoryFiles(root), {**entry, "probe": len(entry["lists"])})
    with pytest.raises(BundleFormatError, match="rebuild"):
        scanner.scan(bytes(DIM), None)
    old = {k: v for k, v in entry.items() if k != "candidates"}  # the int8 lists of format 3
    with pytest.raises(BundleFormatError, match="older layout: rebuild"):
        CoarseScanner(DirectoryFiles(root), old)
    old = {k: v for k, v in entry.items() if k != "blocks"}  # a docno → list map, no directory
    with pytest.raises(BundleFormatError, match="older layout: rebuild"):
        CoarseScanner(DirectoryFiles(root), old)
    with pytest.raises(BundleFormatError, match="malformed"):  # a list without blocks
        CoarseScanner(DirectoryFiles(root), {**entry, "lists": [
            [n, p, 0] for n, p, _ in entry["lists"]]})
    short = writer(root)("data/lists", (root / entry["blocks"]).read_bytes()[:-2])
    with pytest.raises(BundleFormatError, match=r"directory .* rebuild"):
        CoarseScanner(DirectoryFiles(root), {**entry, "blocks": short}).dots(bytes(DIM), [0])
    with pytest.raises(BundleFormatError, match="malformed"):
        CoarseScanner(DirectoryFiles(root), {**entry, "probe": 0})
    with pytest.raises(BundleFormatError, match="malformed"):
        CoarseScanner(DirectoryFiles(root), {k: v for k, v in entry.items() if k != "centroids"})


NODE_SCRIPT = r"""
import { readFileSync } from "node:fs";
import { CoarseScanner } from "%(module)s";
const job = JSON.parse(readFileSync(0, "utf8"));
const out = [];
for (const { query, threshold, docnos, probe, candidates } of job.queries) {
  const read = (p) => readFileSync(job.root + "/" + p);
  const scanner = new CoarseScanner(job.info, read, probe, candidates);
  const q = Int8Array.from(query);
  const scan = Array.from(scanner.scan(q, threshold));
  const dots = Array.from(scanner.dots(q, docnos));
  // The same with the files fetched ahead (async, in parallel): no synchronous read after.
  let late = 0;
  const ahead = new CoarseScanner(job.info, (p) => { late += 1; return read(p); }, probe,
    candidates, async (p) => read(p));
  await ahead.prefetch(q);
  const scanAhead = Array.from(ahead.scan(q, threshold));
  await ahead.prefetch(q, Int32Array.from(docnos));
  const dotsAhead = Array.from(ahead.dots(q, docnos));
  // A scan that also reads the blocks of `also`: begun (its lists on their way), then its
  // lists and blocks and those of `also` fetched together, nothing read synchronously.
  const also = Int32Array.from(docnos);
  const wide = Array.from(scanner.scan(q, threshold, also));
  let lateWide = 0;
  const both = new CoarseScanner(job.info, (p) => { lateWide += 1; return read(p); }, probe,
    candidates, async (p) => read(p));
  both.begin(q);
  await both.prefetch(q, also, true);
  const wideAhead = Array.from(both.scan(q, threshold, also));
  out.push({ scan, dots, scanAhead, dotsAhead, late, wide, wideAhead, lateWide });
}
process.stdout.write(JSON.stringify(out));
"""


@pytest.mark.cpython_only
@pytest.mark.parametrize("numpy", SCANNERS)
def test_the_javascript_coarse_scanner_gives_the_python_pairs(lists, numpy) -> None:
    root, entry, rows = lists
    rnd = random.Random(6)
    queries = [
        {"query": rows[rnd.randrange(ROWS)] if t != -1 else [127] * DIM, "threshold": t,
         "docnos": [*rnd.sample(range(ROWS), 7), 4, 299], "probe": probe, "candidates": c}
        for t, probe, c in ((None, None, None), (0, None, 5), (150, 3, 40), (-1, None, None),
                            (None, 10**6, 10**6), (None, 10**6, 1))
    ]
    job = {"info": entry, "root": str(root), "queries": queries}
    for q, got in zip(queries, run_dense_module(NODE_SCRIPT, job), strict=True):
        scanner = CoarseScanner(Folder(root), entry, probe=q["probe"],
                                candidates=q["candidates"], numpy=numpy)
        codes = bytes(b & 0xFF for b in q["query"])
        pairs = [tuple(got["scan"][i : i + 2]) for i in range(0, len(got["scan"]), 2)]
        assert pairs == scanner.scan(codes, q["threshold"])  # same pairs, same order
        assert got["dots"] == scanner.dots(codes, q["docnos"]) and got["dots"][-2:] == [0, 0]
        assert got["scanAhead"] == got["scan"] and got["dotsAhead"] == got["dots"]
        assert got["late"] == 1  # the centroids only: prefetch read every list and block
        wide = [tuple(got["wide"][i : i + 2]) for i in range(0, len(got["wide"]), 2)]
        assert wide == scanner.scan_also(codes, q["threshold"], q["docnos"])
        assert got["wideAhead"] == got["wide"] and got["lateWide"] == 1


# --- a coarse bundle end to end ---------------------------------------------------------------


@pytest.fixture(scope="module")
def coarse_site(tmp_path_factory):
    backend = CalibratedHash(dim=48)
    patch = pytest.MonkeyPatch()
    patch.setattr(coarse, "COARSE_MIN_ROWS", 1)
    try:
        db, root = _site(tmp_path_factory.mktemp("coarse"), embedding_backend=backend)
    finally:
        patch.undo()
    return db, root, backend


def test_the_header_has_the_coarse_lists_and_the_worker_info(coarse_site) -> None:
    _db, root, backend = coarse_site
    bundle = ShardedBundle(DirectoryFiles(root))
    entry = bundle.vectors
    assert entry is not None and "lists" in entry and entry["rows"] == bundle.n_docs
    with BundleSearcher.from_files(DirectoryFiles(root), embedding_backend=backend) as s:
        info = s.vector_shards()
    assert {"centroids", "probe", "candidates", "lists", "blocks", "dim", "scale",
            "missing"} <= set(info)


@pytest.mark.slow  # the slow lane: scripts/test.sh --quick skips it
@pytest.mark.parametrize("numpy", SCANNERS)
def test_probing_every_list_equals_the_chunk_store_path(coarse_site, numpy) -> None:
    db, root, backend = coarse_site
    files = DirectoryFiles(root)
    entry = ShardedBundle(files).vectors
    scanner = CoarseScanner(files, entry, probe=len(entry["lists"]), candidates=entry["rows"],
                            numpy=numpy)
    with BundleSearcher(db, embedding_backend=backend) as reference, \
            BundleSearcher.from_files(files, embedding_backend=backend, scanner=scanner) as lazy:
        for query in hybrid_queries():
            for kwargs in ({}, {"top_k": 3}, {"filters": {"topic": "drama"}}):
                assert lazy.search(query, **kwargs).as_dict()["hits"] == \
                    reference.search(query, **kwargs).as_dict()["hits"], query


def test_the_default_probe_scores_what_it_finds_exactly(coarse_site) -> None:
    """A result's vector score is the best exact cosine among the query variants' rows found
    (never above the exact path's best over all rows)."""
    db, root, backend = coarse_site
    files = Folder(root)
    with BundleSearcher(db, embedding_backend=backend) as reference, \
            BundleSearcher.from_files(files, embedding_backend=backend) as lazy:
        for query in hybrid_queries()[:10]:
            want = {h["chunk_id"]: h["scores"]["vector"] for h in
                    reference.search(query, top_k=50).snippets}
            got = lazy.search(query, top_k=10).snippets
            assert got and all(h["scores"]["vector"] <= want.get(h["chunk_id"], 1.0)
                               for h in got)
    lists = {p for _, p, _ in ShardedBundle(DirectoryFiles(root)).vectors["lists"]}
    assert 0 < len(lists & set(files.reads)) <= len(lists)


def test_a_hybrid_search_reads_the_rows_of_its_best_bm25_hits(coarse_site) -> None:
    """However few rows the coarse scan reads, the BM25 hits a calibrated fusion can rank
    high (each ranking's top ``RESCORED · top_k``) fuse with their exact dense evidence: their
    fused scores are the exact path's."""
    from ragspine_lite.pipeline.search import RESCORED

    db, root, backend = coarse_site
    files = DirectoryFiles(root)
    scanner = CoarseScanner(files, ShardedBundle(files).vectors, probe=1, candidates=1)
    checked = 0
    with BundleSearcher(db, embedding_backend=backend) as reference, \
            BundleSearcher.from_files(files, embedding_backend=backend, scanner=scanner) as lazy:
        for query in hybrid_queries():
            want = {h["chunk_id"]: h["scores"]["fused"]
                    for h in reference.search(query, top_k=200).snippets}
            bm25 = {h["chunk_id"] for h in
                    lazy.search(query, top_k=RESCORED * 5, mode="bm25").snippets}
            for hit in lazy.search(query, top_k=5).snippets:
                if hit["chunk_id"] in bm25:
                    assert hit["scores"]["fused"] == want[hit["chunk_id"]], query
                    checked += 1
    assert checked >= 20


def test_a_hybrid_search_has_its_bm25_hits_fragments_fetched_ahead(coarse_site) -> None:
    """``files_for`` with ``top_k`` names the fragments of the BM25 top ``top_k`` for a
    hybrid searcher too (most of its results are among them): once they are provided, the
    hybrid search reads only the fragments of hits the dense lane found."""
    _db, root, backend = coarse_site
    for query in hybrid_queries()[:6]:
        files = Folder(root)
        with BundleSearcher.from_files(files, embedding_backend=backend) as s:
            asked: list[str] = []
            while paths := s.files_for(query, top_k=5):
                asked += paths
                for path in paths:
                    s.provide(path, files.read(path))
            bm25 = s.search(query, top_k=5, mode="bm25").snippets
            assert bm25 and any(p.startswith("data/text/f-") for p in asked), query
            files.reads.clear()
            hybrid = s.search(query, top_k=5).snippets
            read = [p for p in files.reads if p.startswith("data/text/")]
            assert len(read) <= len({h["chunk_id"] for h in hybrid}
                                    - {h["chunk_id"] for h in bm25}), query


class Primed(CalibratedHash):
    """The hashed model with the browser backend's ``plan``: it names the texts not embedded
    yet (a text is primed once embedded)."""

    model_id = "CalibratedHash/48"  # the bundle's vectors' model

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.primed: set[str] = set()

    def plan(self, texts):
        return {"texts": [t for t in dict.fromkeys(texts) if t not in self.primed]}

    def embed_texts(self, texts):
        self.primed.update(texts)
        return super().embed_texts(texts)


class Recording:
    """A coarse scanner that records the query codes and rows each scan is given."""

    def __init__(self, scanner: CoarseScanner) -> None:
        self.scanner, self.scans = scanner, []

    def scan(self, query, threshold):
        return self.scan_also(query, threshold, ())

    def scan_also(self, query, threshold, also):
        self.scans.append((bytes(query), list(also)))
        return self.scanner.scan_also(query, threshold, also)

    def dots(self, query, docnos):
        return self.scanner.dots(query, docnos)


NOTHING = {"queries": [], "rows": [], "missing": []}
VECTOR_DIRS = ("data/lists/", "data/vectors/")


def test_vectors_for_names_what_the_scan_of_a_primed_query_is_given(coarse_site) -> None:
    """``vectors_for`` hands the worker, before a hybrid search, the query codes its scan gets
    and rows it reads (the best BM25 hits; a file their ranking lacks is named first): the
    vector files can be fetched while the visitor types. Nothing before the query vector is
    primed, in BM25 mode or for a blank query."""
    _db, root, _backend = coarse_site
    files = DirectoryFiles(root)
    backend = Primed(dim=48)
    scanner = Recording(CoarseScanner(files, ShardedBundle(files).vectors))
    provided = 0  # files the BM25 ranking lacked (its term shards), named one at a time
    with BundleSearcher.from_files(files, embedding_backend=backend, scanner=scanner) as s:
        for query in hybrid_queries()[:8]:
            assert s.vectors_for(query, top_k=5) == NOTHING, query
            backend.embed_texts(s.embedding_plan(query)["texts"])  # primed, as the worker does
            ask = json.dumps({"query": query, "topK": 5})
            while (ahead := json.loads(s.dispatch("vectors_for", ask)))["missing"]:
                assert ahead["queries"] == ahead["rows"] == [], query
                s.provide(ahead["missing"][0], files.read(ahead["missing"][0]))
                provided += 1
            scanner.scans.clear()
            s.search(query, top_k=5)
            assert [signed(codes) for codes, _ in scanner.scans] == ahead["queries"], query
            assert ahead["rows"] and set(ahead["rows"]) <= set(scanner.scans[0][1]), query
            assert s.vectors_for(query, top_k=5, mode="bm25") == NOTHING
            unset = json.loads(s.dispatch("vectors_for", json.dumps({"query": query,
                                                                     "topK": None})))
            assert unset == s.vectors_for(query, top_k=SEARCH_DEFAULTS["top_k"]), query
        assert s.vectors_for("  ") == NOTHING
        with pytest.raises(ValueError, match="'fuzzy'"):
            s.vectors_for("hk revenue", mode="fuzzy")
    assert provided >= 8


def test_files_for_a_primed_hybrid_question_names_the_fused_hits_text(coarse_site) -> None:
    """Once a hybrid question's vector is primed, ``files_for`` ranks it as the search will
    (fused, from memory) and names its hits' fragments and the files that ranking reads: the
    search that follows reads vector files only."""
    _db, root, _backend = coarse_site
    backend = Primed(dim=48)
    for query in hybrid_queries()[:10]:
        files = Folder(root)
        with BundleSearcher.from_files(files, embedding_backend=backend) as s:
            backend.embed_texts(s.embedding_plan(query)["texts"])
            while paths := s.files_for(query, top_k=5):
                for path in paths:
                    s.provide(path, files.read(path))
            files.reads.clear()
            assert s.search(query, top_k=5).snippets, query
            assert [p for p in files.reads if not p.startswith(VECTOR_DIRS)] == [], query
