"""Vector shards of a format-2 bundle: written from the int8 store, scanned to the same integers."""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path

import pytest
from test_bundle_shards import _site

from ragspine_lite.bundle import dense
from ragspine_lite.bundle.dense import DenseLane, ShardScanner, write_vector_shards
from ragspine_lite.bundle.manifest import BundleFormatError
from ragspine_lite.bundle.runtime import BundleSearcher
from ragspine_lite.bundle.shards import DirectoryFiles, ShardedBundle
from ragspine_lite.pipeline import search as search_mod
from ragspine_lite.vector.calibration import DenseCalibration
from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend
from ragspine_lite.vector.quantize import numpy_or_none
from ragspine_lite.vector.sqlite_store import SqliteVectorStore, VectorStoreError
from ragspine_lite.vector.store import VectorRecord

needs_numpy = pytest.mark.skipif(numpy_or_none() is None, reason="numpy not importable")
SCANNERS = [False, pytest.param(True, marks=needs_numpy)]
DIM = 16


class Folder:
    """Files of a bundle folder, counting reads (what a BundleFiles does)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.reads: list[str] = []

    def read(self, path: str) -> bytes:
        self.reads.append(path)
        return (self.root / path).read_bytes()


def gauss(rnd: random.Random) -> tuple[float, ...]:
    return tuple(rnd.gauss(0.0, 1.0) for _ in range(DIM))


def writer(root: Path):
    """What the bundle writer does with a shard: a content-named file under data/vectors."""

    def write(data: bytes) -> str:
        path = f"data/vectors/v-{hashlib.sha256(data).hexdigest()[:16]}.i8"
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
        return path

    return write


def int8_store(path: Path, ids: list[str], seed: int = 7) -> None:
    rnd = random.Random(seed)
    with SqliteVectorStore(path, model_id="m", quantization="int8") as store:
        store.upsert([VectorRecord(cid, gauss(rnd)) for cid in ids])


@pytest.fixture()
def bundle(tmp_path: Path) -> tuple[Path, list[str], dict]:
    """53 chunk ids in docno order (ties in dot are likely: small dim), two without a vector."""
    ids = [f"c{i:03d}" for i in range(53)]
    db = tmp_path / "chunks.db"
    int8_store(db, [cid for cid in ids if cid not in ("c004", "c040")])
    site = tmp_path / "site"
    entry = write_vector_shards(db, ids, writer(site), model_id="m", shard_bytes=20 * DIM)
    return tmp_path / "site", ids, entry


def test_shards_are_content_named_row_ranges_of_the_stored_codes(bundle) -> None:
    root, ids, entry = bundle
    assert entry["model_id"] == "m" and entry["dim"] == DIM
    assert [s[:2] for s in entry["shards"]] == [[0, 20], [20, 20], [40, 13]]
    assert entry["missing"] == [4, 40]
    with SqliteVectorStore(root.parent / "chunks.db", model_id="m", read_only=True) as store:
        codec, codes = store.int8_codes()
    assert entry["scale"] == codec.scale
    flat = b""
    for _start, count, path in entry["shards"]:
        data = (root / path).read_bytes()
        assert path == f"data/vectors/v-{hashlib.sha256(data).hexdigest()[:16]}.i8"
        assert len(data) == count * DIM
        flat += data
    assert flat == b"".join(codes.get(cid, bytes(DIM)) for cid in ids)


def test_writing_again_gives_the_same_files(bundle, tmp_path) -> None:
    root, ids, entry = bundle
    db = tmp_path / "chunks.db"
    again = write_vector_shards(db, ids, writer(root), model_id="m", shard_bytes=20 * DIM)
    assert again == entry


def test_a_float32_store_is_refused(tmp_path) -> None:
    with SqliteVectorStore(tmp_path / "f.db", model_id="m") as store:
        store.upsert([VectorRecord("a", (1.0, 0.0))])
    with pytest.raises(VectorStoreError, match="no int8 vectors"):
        write_vector_shards(tmp_path / "f.db", ["a"], writer(tmp_path), model_id="m")


@pytest.mark.parametrize("numpy", SCANNERS)
def test_scan_and_dots_are_the_exact_integers_without_missing_rows(bundle, numpy) -> None:
    root, _ids, entry = bundle
    files = Folder(root)
    scanner = ShardScanner(files, entry, numpy=numpy)
    flat = b"".join((root / p).read_bytes() for _s, _n, p in entry["shards"])
    rows = [[b - 256 if b > 127 else b for b in flat[i * DIM : (i + 1) * DIM]] for i in range(53)]
    query = bytes(flat[7 * DIM : 8 * DIM])
    q = rows[7]
    want = [sum(a * b for a, b in zip(q, r, strict=True)) for r in rows]
    kept = [(i, d) for i, d in enumerate(want) if i not in (4, 40)]
    assert sorted(scanner.scan(query, None)) == kept
    cut = sorted(want)[30]
    assert sorted(scanner.scan(query, cut)) == [(i, d) for i, d in kept if d > cut]
    assert scanner.dots(query, [9, 4, 0, 52]) == [want[9], 0, want[0], want[52]]
    assert len(files.reads) == 3  # every shard read once, then kept


@needs_numpy
def test_pure_and_numpy_scanners_give_identical_integers(bundle) -> None:
    root, _ids, entry = bundle
    pure, fast = ShardScanner(Folder(root), entry, numpy=False), ShardScanner(Folder(root), entry)
    rnd = random.Random(3)
    for _ in range(5):
        query = bytes(rnd.randrange(256) for _ in range(DIM))
        assert pure.scan(query, None) == fast.scan(query, None)
        assert pure.scan(query, 100) == fast.scan(query, 100)
        assert pure.dots(query, range(53)) == fast.dots(query, range(53))


def test_a_damaged_shard_is_a_clear_error(bundle) -> None:
    root, _ids, entry = bundle
    path = root / entry["shards"][1][2]
    data = bytearray(path.read_bytes())
    data[3] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(BundleFormatError, match="does not match the hash in its name"):
        ShardScanner(Folder(root), entry).scan(bytes(DIM), None)


def test_a_malformed_entry_is_a_clear_error(bundle) -> None:
    root, _ids, entry = bundle
    gap = {**entry, "shards": [entry["shards"][0], entry["shards"][2]]}
    with pytest.raises(BundleFormatError, match="starts at 40, expected 20"):
        ShardScanner(Folder(root), gap)
    with pytest.raises(BundleFormatError, match="malformed"):
        ShardScanner(Folder(root), {**entry, "scale": -1.0})


@pytest.mark.parametrize("numpy", SCANNERS)
def test_the_dense_lane_ranks_like_the_sqlite_int8_store(bundle, numpy) -> None:
    root, ids, entry = bundle
    lane = DenseLane(entry, ShardScanner(Folder(root), entry, numpy=numpy))
    rnd = random.Random(11)
    with SqliteVectorStore(root.parent / "chunks.db", model_id="m", read_only=True) as store:
        for _ in range(8):
            qv = gauss(rnd)
            want = store.query_scores(qv, k=100)
            assert [(ids[d], s) for d, s in lane.ranking(qv)] == want
            floor = want[10][1]  # a floor with ties around it is still cut exactly
            above = [(cid, s) for cid, s in want if s > floor]
            got = lane.ranking(qv, floor=floor)
            assert [(ids[d], s) for d, s in got] == above
            lexical = [ids.index(want[-1][0]), 4, ids.index(want[3][0])]
            with_lexical = lane.ranking(qv, floor=floor, also=lexical)
            wanted = {cid for cid, _ in above} | {want[-1][0]}
            assert [(ids[d], s) for d, s in with_lexical] == [h for h in want if h[0] in wanted]
            odd = lane.ranking(qv, keep=lambda d: d % 2 == 1)
            assert [(ids[d], s) for d, s in odd] == [h for h in want if ids.index(h[0]) % 2]


@pytest.mark.parametrize("numpy", SCANNERS)
@pytest.mark.parametrize("limit", [3, 12, 30, 51, 60])
def test_a_limit_cuts_like_a_store_query_with_k(bundle, numpy, limit) -> None:
    """The chunk store path asks the store for k = the candidate count, then filters."""
    root, ids, entry = bundle
    lane = DenseLane(entry, ShardScanner(Folder(root), entry, numpy=numpy))
    rnd = random.Random(limit)
    keep = set(rnd.sample(range(53), 20))
    with SqliteVectorStore(root.parent / "chunks.db", model_id="m", read_only=True) as store:
        for _ in range(6):
            qv = gauss(rnd)
            top = [h for h in store.query_scores(qv, k=limit) if ids.index(h[0]) in keep]
            got = lane.ranking(qv, limit=limit, keep=keep.__contains__)
            assert [(ids[d], s) for d, s in got] == top
            everything = store.query_scores(qv, k=100)
            floor = everything[8][1]
            lexical = [ids.index(cid) for cid, _ in everything[20:30]] + [4]
            wanted = {cid for cid, s in everything if s > floor}
            wanted |= {ids[d] for d in lexical}
            got = lane.ranking(qv, floor=floor, also=lexical, limit=limit, keep=keep.__contains__)
            assert [(ids[d], s) for d, s in got] == [h for h in top if h[0] in wanted]


NODE_SCRIPT = r"""
import { readFileSync } from "node:fs";
import { DenseScanner } from "%(module)s";
const job = JSON.parse(readFileSync(0, "utf8"));
const scanner = await DenseScanner.load(job.info, async (p) => readFileSync(job.root + "/" + p));
const out = job.queries.map(({ query, threshold, docnos }) => {
  const q = Int8Array.from(query);
  const scan = Array.from(scanner.scan(q, threshold));
  return { scan, dots: Array.from(scanner.dots(q, docnos)) };
});
process.stdout.write(JSON.stringify(out));
"""


def run_dense_module(script: str, job: dict) -> list:
    """Run a Node ``script`` over ``web/ragspine-dense.mjs`` (``%(module)s``) with ``job`` on
    stdin; → its JSON output (skips without Node)."""
    import json
    import shutil
    import subprocess

    node = shutil.which("node")
    if node is None:
        pytest.skip("needs Node")
    module = Path(__file__).resolve().parent.parent / "web" / "ragspine-dense.mjs"
    run = subprocess.run(
        [node, "--input-type=module", "-e", script % {"module": module.as_uri()}],
        input=json.dumps(job), capture_output=True, text=True, check=True, timeout=60,
    )
    out: list = json.loads(run.stdout)
    return out


@pytest.mark.cpython_only
@pytest.mark.parametrize("numpy", SCANNERS)
def test_the_javascript_scanner_gives_the_python_integers(bundle, numpy) -> None:
    root, _ids, entry = bundle
    rnd = random.Random(5)
    queries = [
        {"query": [rnd.randrange(-127, 128) for _ in range(DIM)], "threshold": t,
         "docnos": [*rnd.sample(range(53), 9), 4, 40]}
        for t in (None, 0, 150, -10**6, None)
    ]
    queries[-1]["query"] = [127] * (DIM // 2) + [-127] * (DIM // 2)  # the extremes
    job = {"info": {**entry, "rows": 53}, "root": str(root), "queries": queries}
    scanner = ShardScanner(Folder(root), entry, numpy=numpy)
    for q, got in zip(queries, run_dense_module(NODE_SCRIPT, job), strict=True):
        codes = bytes(b & 0xFF for b in q["query"])
        want = sorted(scanner.scan(codes, q["threshold"]))
        assert [tuple(got["scan"][i : i + 2]) for i in range(0, len(got["scan"]), 2)] == want
        assert got["dots"] == scanner.dots(codes, q["docnos"])
        assert got["dots"][-2:] == [0, 0]


# --- the dense lane of a format-2 bundle: the same results as the chunk store ---------------


class CalibratedHash(DeterministicEmbeddingBackend):
    """The hashed stand-in model with a calibration, so hybrid searches fuse calibrated."""

    calibration = DenseCalibration(floor=0.05, ceiling=0.4)


@pytest.fixture(scope="module", params=["rrf", "calibrated"])
def hybrid(request, tmp_path_factory):
    backend = (DeterministicEmbeddingBackend if request.param == "rrf" else CalibratedHash)(dim=48)
    patch = pytest.MonkeyPatch()
    patch.setattr(dense, "VECTOR_SHARD_BYTES", 48 * 40)  # several shards
    try:
        db, root = _site(tmp_path_factory.mktemp("hybrid"), embedding_backend=backend)
    finally:
        patch.undo()
    return db, root, backend


def hybrid_queries() -> list[str]:
    from _corpus import load_slice

    en = [q["text"] for q in load_slice("squad_slice").queries[:20]]
    zh = [q["text"] for q in load_slice("cmrc_slice").queries[:8]]
    return [*en, *zh, "hk revenue", "zzzz unknown"]


def test_the_bundle_header_lists_the_vector_shards(hybrid) -> None:
    db, root, backend = hybrid
    bundle = ShardedBundle(DirectoryFiles(root))
    entry = bundle.vectors
    assert entry is not None and entry["missing"] == [] and entry["dim"] == 48
    assert len(entry["shards"]) > 1 and sum(n for _, n, _ in entry["shards"]) == bundle.n_docs
    with SqliteVectorStore(db, model_id=f"{type(backend).__name__}/48", read_only=True) as store:
        codec, codes = store.int8_codes()
    assert entry["scale"] == codec.scale
    flat = b"".join((root / p).read_bytes() for _, _, p in entry["shards"])
    assert flat == b"".join(codes[cid] for cid in sorted(codes))


@pytest.mark.parametrize("numpy", SCANNERS)
@pytest.mark.parametrize("kwargs", [
    {}, {"top_k": 3}, {"top_k": 50}, {"filters": {"topic": "drama"}},
    {"filters": ["topic=in:science,history"], "top_k": 20}, {"filters": {"language": "zh"}},
])
def test_hybrid_results_equal_the_chunk_store_path(hybrid, numpy, kwargs) -> None:
    db, root, backend = hybrid
    scanner = ShardScanner(DirectoryFiles(root), ShardedBundle(DirectoryFiles(root)).vectors,
                           numpy=numpy)
    with BundleSearcher(db, embedding_backend=backend) as reference, \
            BundleSearcher.from_files(DirectoryFiles(root), embedding_backend=backend,
                                      scanner=scanner) as lazy:
        for query in hybrid_queries():
            want = reference.search(query, **kwargs).as_dict()
            got = lazy.search(query, **kwargs).as_dict()
            assert got["semantic"] == want["semantic"] == {
                "mode": "hybrid", "channel": "hybrid", "error": None}
            assert got["hits"] == want["hits"], query
        vectors = [s["scores"]["vector"] for s in lazy.search("drama festival", top_k=50).snippets]
        assert any(v != 0.0 for v in vectors)


def test_the_default_scanner_and_use_scanner(hybrid) -> None:
    db, root, backend = hybrid
    files = DirectoryFiles(root)
    with BundleSearcher(db, embedding_backend=backend) as reference, \
            BundleSearcher.from_files(files, embedding_backend=backend) as lazy:
        info = json.loads(lazy.dispatch("vector_shards"))
        assert info["rows"] == lazy.sharded.n_docs and info["dim"] == 48
        assert [s[2] for s in info["shards"]] == [s[2] for s in lazy.sharded.vectors["shards"]]
        seen: list[int] = []

        class Counting(ShardScanner):
            def scan(self, query, threshold):
                seen.append(threshold)
                return super().scan(query, threshold)

        lazy.use_scanner(Counting(files, info))
        for query in hybrid_queries()[:6]:
            assert lazy.search(query).hits == reference.search(query).hits
        assert len(seen) >= 6
        if isinstance(backend, CalibratedHash):  # only rows above the floor are asked for
            assert all(t is not None and t > 0 for t in seen)
        else:
            assert seen[0] is None
    with BundleSearcher.from_files(files) as plain:
        assert plain.vector_shards()["rows"] == plain.sharded.n_docs
        with pytest.raises(ValueError, match="no sharded vectors"):
            plain.use_scanner(ShardScanner(files, info))


def test_bm25_mode_equals_the_chunk_store_path(hybrid) -> None:
    db, root, backend = hybrid
    with BundleSearcher(db, embedding_backend=backend) as reference, \
            BundleSearcher.from_files(DirectoryFiles(root), embedding_backend=backend) as lazy:
        for query in hybrid_queries()[:5]:
            want = reference.search(query, mode="bm25")
            got = lazy.search(query, mode="bm25")
            assert got.semantic == want.semantic == {"mode": "bm25", "channel": "bm25",
                                                     "error": None}
            assert got.hits == want.hits


@pytest.mark.skipif(sys.platform != "emscripten", reason="the JS adapter runs in Pyodide")
def test_the_js_adapter_hands_over_int8_codes_and_reads_int32_results() -> None:
    """A stand-in for the worker's scanner that echoes what it was given, as Int32Arrays."""
    from pyodide.code import run_js

    from ragspine_lite.bundle.dense import JsDenseScanner

    js = run_js("""({
      scan(q, threshold) {
        const kind = q instanceof Int8Array ? 1 : 0;
        return Int32Array.from([kind, q[0], q[1], threshold ?? -999, q.length, -2147483648]);
      },
      dots(q, docnos) {
        return Int32Array.from([docnos instanceof Int32Array ? 1 : 0, ...docnos, q[2]]);
      },
    })""")
    scanner = JsDenseScanner(js)
    query = bytes([0x81, 0x7F, 0x05])  # -127, 127, 5
    assert scanner.scan(query, None) == [(1, -127), (127, -999), (3, -(2**31))]
    assert scanner.scan(query, 42)[1] == (127, 42)
    assert scanner.dots(query, [7, 0, 2**31 - 1]) == [1, 7, 0, 2**31 - 1, 5]


@pytest.mark.parametrize("pool", [2, 6])
def test_a_pooled_hybrid_search_equals_the_full_ranking(hybrid, monkeypatch, pool) -> None:
    """A calibrated hybrid search scores a pool of BM25 hits plus the dense hits, not every
    BM25 hit, and still returns the chunk store path's hits and scores."""
    db, root, backend = hybrid
    if getattr(backend, "calibration", None) is None:
        pytest.skip("RRF reads every lexical hit")
    monkeypatch.setattr(search_mod, "LEXICAL_POOL", pool)
    proven: list[bool] = []
    original = search_mod.pooled_ranking

    def spy(*args, **kwargs):
        found = original(*args, **kwargs)
        proven.append(found is not None)
        return found

    monkeypatch.setattr(search_mod, "pooled_ranking", spy)
    with BundleSearcher(db, embedding_backend=backend) as reference, \
            BundleSearcher.from_files(DirectoryFiles(root), embedding_backend=backend) as lazy:
        for query in hybrid_queries():
            for top_k in (1, 3, 10):
                want = reference.search(query, top_k=top_k).as_dict()["hits"]
                assert lazy.search(query, top_k=top_k).as_dict()["hits"] == want, (query, top_k)
    assert any(proven)
