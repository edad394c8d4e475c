"""Bundle format 2: sharded files read per query, bit-identical to the SQLite chunk store."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from _corpus import load_slice

from ragspine_lite.bundle import shard_writer, shards
from ragspine_lite.bundle.export import export_store, load_corpus, verify_no_leaks
from ragspine_lite.bundle.manifest import BUNDLE_FORMAT_VERSION, BundleFormatError
from ragspine_lite.bundle.runtime import BundleSearcher
from ragspine_lite.bundle.shards import (
    DirectoryFiles,
    ShardedBM25Index,
    ShardedBundle,
    pack,
    unpack,
    write_shards,
)
from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.contextual import make_index_text_fn
from ragspine_lite.lexical.inverted_index import StoreBM25Index
from ragspine_lite.lexical.tokenizer import tokenize

TOPICS = ("drama", "science", "history")


def _write_docs(folder: Path, n_en: int = 160, n_zh: int = 90) -> Path:
    """Markdown documents from the test slices, with topics and languages to filter on."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = load_slice("squad_slice").corpus[:n_en] + load_slice("cmrc_slice").corpus[:n_zh]
    for i, row in enumerate(rows):
        language = "zh" if row["id"].startswith("zh") else "en"
        text = row["text"]
        body = f"# {row.get('title') or row['id']}\n\n{text}\n\n## More\n\n{text[:200]}\n"
        (folder / f"{row['id']}.md").write_text(
            f"---\ntitle: Page {i}\ntopic: {TOPICS[i % 3]}\nlanguage: {language}\n"
            f"sensitivity: PUBLIC\n---\n{body}",
            encoding="utf-8",
        )
    return folder


def _site(tmp: Path, **export: object) -> tuple[Path, Path]:
    """(exported chunk store, bundle root with the shards); ``export``: export_store kwargs."""
    db = tmp / "chunks.db"
    export_store(load_corpus([_write_docs(tmp / "docs")]), db, **export)  # type: ignore[arg-type]
    root = tmp / "site"
    report = write_shards(db, root)
    (root / "manifest.json").write_text(
        json.dumps({"format_version": BUNDLE_FORMAT_VERSION, "entry": {"index": report.header},
                    "files": {p: {} for p in report.files}}),
        encoding="utf-8",
    )
    return db, root


@pytest.fixture(scope="module")
def small_files(tmp_path_factory):
    """Small shard targets, so the corpus spreads over many files; terms held by 16 chunks and
    one in 8 keep their token counts in files of their own."""
    patch = pytest.MonkeyPatch()
    patch.setattr(shard_writer, "TERM_SHARD_BYTES", 4096)
    patch.setattr(shard_writer, "FRAGMENT_BYTES", 4096)
    patch.setattr(shard_writer, "LENGTHS_FILE_MIN_DF", 16)
    try:
        yield _site(tmp_path_factory.mktemp("shards"))
    finally:
        patch.undo()


class CountingFiles(DirectoryFiles):
    """A bundle folder that logs every path read through it."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reads: list[str] = []

    def read(self, path: str) -> bytes:
        self.reads.append(path)
        return super().read(path)


def _queries() -> list[str]:
    en = [q["text"] for q in load_slice("squad_slice").queries[:40]]
    zh = [q["text"] for q in load_slice("cmrc_slice").queries[:25]]
    return en + zh + ["the", "drama tragedy festivals", "zzzz unknown", "a"]


def test_pack_round_trips_and_refuses_damage():
    data = pack({"x": "营收"}, {"a": shards.array("I", [1, 2**31]), "b": shards.array("B", [7])})
    meta, arrays = unpack(data)
    assert meta == {"x": "营收"} and list(arrays["a"]) == [1, 2**31] and list(arrays["b"]) == [7]
    with pytest.raises(BundleFormatError, match=r"t\.bin is damaged"):
        unpack(data[:-3], "t.bin")


@pytest.mark.slow  # the slow lane: scripts/test.sh --quick skips it
def test_the_corpus_spreads_over_many_files(small_files):
    _, root = small_files
    names = [p.name for p in (root / "data").rglob("*.bin")]
    assert sum(n.startswith("t-") for n in names) > 20
    assert sum(n.startswith("f-") for n in names) > 20
    for path in (root / "data").rglob("*.bin"):  # every name ends with its content hash
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        named = path.stem.rpartition("-")[2]
        assert digest.startswith(named) and len(named) == (8 if path.stem[:2] in ("t-", "f-")
                                                           else 16), path.name


def test_the_header_names_every_term_shard_and_fragment_in_four_bytes(small_files):
    _, root = small_files
    bundle = ShardedBundle(DirectoryFiles(root))
    on_disk = {p.relative_to(root).as_posix() for p in (root / "data").rglob("*.bin")
               if p.name[:2] in ("t-", "f-")}
    assert set(bundle.term_paths) | set(bundle.fragment_paths) == on_disk
    assert any(any(ord(c) > 127 for c in t) for t in bundle.term_starts)  # CJK slots too
    meta, arrays = unpack((root / bundle.header_path).read_bytes())
    assert arrays["term_hashes"].itemsize == arrays["fragment_hashes"].itemsize == 4
    assert "paths" not in meta["bm25"] and "fragments" not in meta


def test_vector_files_come_out_of_the_site_file_budget(small_files, tmp_path, monkeypatch):
    db, root = small_files
    shards_of = sum(1 for p in (root / "data").rglob("*.bin") if p.name[:2] in ("t-", "f-"))

    def vectors(out, *args):  # a hybrid export's vector files, written before the index
        for i in range(40):
            out.write("data/vectors", "v", bytes([i]), ".i8")
        return {"model_id": "fake"}

    monkeypatch.setattr(shard_writer, "SITE_FILES", shards_of + 20)
    monkeypatch.setattr(shard_writer, "RESERVED_FILES", 10)
    monkeypatch.setattr(shard_writer, "MIN_INDEX_FILES", 1)
    source = shard_writer.read_source(db)
    plain = shard_writer.write_index(source, tmp_path / "plain")
    monkeypatch.setattr(shard_writer, "_vector_entry", vectors)
    hybrid = shard_writer.write_index(source, tmp_path / "hybrid")
    counts = [r.count_by_kind["t"] + r.count_by_kind["f"] for r in (plain, hybrid)]
    assert counts[0] == shards_of and hybrid.count_by_kind["v"] == 40
    assert counts[1] <= shards_of + 20 - 10 - 40 < counts[0]  # bigger files, fewer of them


def test_bm25_scores_and_ranking_are_bit_identical_to_the_sqlite_index(small_files):
    db, root = small_files
    bundle = ShardedBundle(DirectoryFiles(root))
    sharded = ShardedBM25Index(bundle)
    with ChunkStore(db, read_only=True) as store:
        reference = StoreBM25Index.attach(store)
        ids = sorted(c.chunk_id for c in store.iter_chunks())
        rowid_of = {c.chunk_id: r for r, c in store.iter_chunk_rows()}
        with reference.reading():
            assert sharded.n_docs == reference.n_docs == len(ids)
        some = [rowid_of[i] for i in ids[::3]]
        for query in _queries():
            tokens = tokenize(query)
            for limit in (None, 1, 10):
                want = [(cid, s) for _, cid, s in reference.rank(tokens, limit=limit)]
                got = [(ids[d], s) for d, _, s in sharded.rank(tokens, limit=limit)]
                assert got == want, (query, limit)
            want = reference.rank(tokens, candidates=reference.candidates(some), limit=5)
            got = sharded.rank(tokens, candidates=sharded.candidates(range(0, len(ids), 3)),
                               limit=5)
            assert [(ids[d], s) for d, _, s in got] == [(c, s) for _, c, s in want], query


def _outcome(searcher: BundleSearcher, query: str, **kwargs) -> list:
    return searcher.search(query, **kwargs).as_dict()["hits"]


@pytest.mark.slow  # the slow lane: scripts/test.sh --quick skips it
@pytest.mark.parametrize("kwargs", [
    {}, {"top_k": 3}, {"filters": {"topic": "drama"}}, {"filters": {"language": "zh"}},
    {"filters": ["topic=in:science,history"], "top_k": 20}, {"highlight": False},
])
def test_search_results_equal_the_sqlite_bundle(small_files, kwargs):
    db, root = small_files
    with BundleSearcher(db) as reference, BundleSearcher.from_files(DirectoryFiles(root)) as lazy:
        for query in _queries():
            assert _outcome(lazy, query, **kwargs) == _outcome(reference, query, **kwargs), query
        assert lazy.stats()["bundle"] == reference.stats()["bundle"]
        assert lazy.stats()["facets"] == reference.stats()["facets"]


def test_hits_link_to_their_page_section(small_files):
    db, root = small_files
    with BundleSearcher(db) as reference, BundleSearcher.from_files(DirectoryFiles(root)) as lazy:
        hits = lazy.search("More").hits
        assert hits and all(h["section"] for h in hits)
        assert [h["section"] for h in hits] == [h["section"] for h in reference.search("More").hits]


def test_a_search_reads_the_header_its_term_shards_and_its_hits_fragments_only(small_files):
    _, root = small_files
    files = CountingFiles(root)
    searcher = BundleSearcher.from_files(files)
    bundle = searcher.sharded
    assert files.reads == ["manifest.json", bundle.header_path]  # opening: the header only
    files.reads.clear()
    query = "Greek drama festivals"
    outcome = searcher.search(query)
    terms = {bundle.term_path(t) for q in ("Greek drama festivals",) for t in tokenize(q)}
    read_terms = {p for p in files.reads if "/terms/" in p}
    assert terms <= read_terms
    fragments = [p for p in files.reads if "/text/f-" in p]
    assert len(fragments) <= len(outcome.hits)
    assert not any("/text/m-" in p for p in files.reads)  # no filter: no filter file
    total = len(list((root / "data" / "terms").iterdir()))
    assert len(read_terms) < total / 4


def test_prefetched_files_are_not_read_again(small_files):
    _, root = small_files
    files = CountingFiles(root)
    searcher = BundleSearcher.from_files(files)
    query = "tragedy festivals religious"
    wanted = searcher.files_for(query)
    assert wanted and all(p.startswith("data/terms/t-") for p in wanted)
    for path in wanted:
        searcher.provide(path, files.read(path))
    assert searcher.files_for(query) == []
    files.reads.clear()
    searcher.search(query)
    assert files.reads and not any("/terms/" in p for p in files.reads)
    assert json.loads(searcher.dispatch("files_for", json.dumps({"query": query}))) == {"paths": []}


@pytest.mark.parametrize(
    ("query", "filters"),
    [("tragedy festivals religious", None), ("drama history", {"topic": "drama"}),
     ("the", ["language=in:zh"])],
)
def test_asking_files_for_until_nothing_is_missing_loads_all_a_search_reads(
    small_files, query, filters
):
    _, root = small_files
    files = CountingFiles(root)
    searcher = BundleSearcher.from_files(files)
    asked = []
    while paths := searcher.files_for(query, filters=filters, top_k=10):
        asked.append(paths)
        for path in paths:
            searcher.provide(path, files.read(path))
    # First the postings shards (and the filter and token-count files), then any length
    # file the ranking reads, one at a time, then the fragments of the hits.
    assert len(asked) >= 2 and all("/text/f-" not in p for p in asked[0])
    assert ("data/text/m-" in " ".join(asked[0])) == (filters is not None)
    assert ("data/terms/n-" in " ".join(asked[0])) == (filters is not None)
    assert all(len(a) == 1 and a[0].startswith("data/terms/l-") for a in asked[1:-1])
    assert asked[-1] and all(p.startswith("data/text/f-") for p in asked[-1])
    files.reads.clear()
    outcome = searcher.search(query, filters=filters, top_k=10)
    assert outcome.hits and files.reads == []
    assert len(asked[-1]) <= len(outcome.hits)
    request = {"query": query, "filters": filters, "topK": 10, "mode": "bm25"}
    assert json.loads(searcher.dispatch("files_for", json.dumps(request))) == {"paths": []}


def test_a_damaged_or_mixed_up_file_is_refused_by_name(small_files, tmp_path):
    _, root = small_files
    searcher = BundleSearcher.from_files(DirectoryFiles(root))
    path = searcher.files_for("tragedy")[0]
    with pytest.raises(BundleFormatError, match=re.escape(path) + ".*does not match the hash"):
        searcher.provide(path, b"not the file")


@pytest.mark.slow  # the slow lane: scripts/test.sh --quick skips it
def test_contextual_bundles_index_their_index_text_in_the_shards(tmp_path):
    db, root = _site(tmp_path, index_text_fn=make_index_text_fn("contextual"))
    with BundleSearcher(db) as reference, BundleSearcher.from_files(DirectoryFiles(root)) as lazy:
        assert lazy.index_text_fn is not None
        for query in [*_queries()[::4], "Page 3"]:  # titles are in the context header
            assert _outcome(lazy, query) == _outcome(reference, query), query


def test_a_canary_inside_a_compressed_fragment_fails_the_self_check(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("---\nsensitivity: PUBLIC\n---\nThe codename is ZEBRA-CANARY-77.\n")
    db = tmp_path / "chunks.db"
    export_store(load_corpus([docs]), db)
    root = tmp_path / "site"
    write_shards(db, root)
    db.unlink()
    assert b"ZEBRA" not in b"".join(p.read_bytes() for p in root.rglob("*.bin"))  # compressed
    with pytest.raises(Exception, match=r"data/text/f-.*canary #1"):
        verify_no_leaks(root, ["ZEBRA-CANARY-77"])


def test_a_missing_header_in_the_manifest_says_rebuild(tmp_path):
    manifest = {"format_version": BUNDLE_FORMAT_VERSION, "files": {}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleFormatError, match="rebuild"):
        BundleSearcher.from_files(DirectoryFiles(tmp_path))


def test_a_common_terms_token_counts_are_read_only_when_every_posting_is_scored(small_files):
    db, root = small_files
    files = CountingFiles(root)
    searcher = BundleSearcher.from_files(files)
    bundle = searcher.sharded
    own = bundle._load(bundle.term_path("the")).own.get("the")
    assert own and own.startswith("data/terms/l-") and own in searcher.index_paths()
    files.reads.clear()
    query = "the Greek tragedy festivals"
    with BundleSearcher(db) as reference:
        assert _outcome(searcher, query, top_k=3) == _outcome(reference, query, top_k=3)
        assert own not in files.reads  # pruned: "the" is only looked up in counted chunks
        assert not any("/terms/n-" in p for p in files.reads)
        assert _outcome(searcher, "the", top_k=3) == _outcome(reference, "the", top_k=3)
        assert own in files.reads  # scored on its own: every posting, every count
