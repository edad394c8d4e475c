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


def test_content_defined_cuts_stay_put_around_an_edit_and_under_the_file_cap(monkeypatch):
    import random

    from ragspine_lite.bundle import shard_writer as sw

    rng = random.Random(7)
    keys = sorted(f"term{rng.randrange(10**9):09d}" for _ in range(5000))
    sizes = [rng.randrange(20, 400) for _ in keys]
    target = sw._target(sum(sizes), 4096)

    def runs(ks: list[str], ss: list[int]) -> set[tuple[str, ...]]:
        return {tuple(ks[a:b]) for a, b in sw._groups(ks, ss, target)}

    before = runs(keys, sizes)
    grown = sizes.copy()
    grown[2500] += 300  # one term's postings grow: the files far from it keep their terms
    after = runs(keys, grown)
    assert len(before - after) <= 3 and len(before) > 100
    monkeypatch.setattr(sw, "MAX_FILES", 40)  # a huge site: bigger files, never more of them
    target = sw._target(sum(sizes), 4096)
    assert target > 4096 and len(sw._groups(keys, sizes, target)) <= 40


def test_a_rebuild_parses_only_what_changed_and_clean_forgets(tmp_path, tmp_path_factory):
    from ragspine_lite.bundle.build_cache import cache_dir

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
    assert b"quasar9" not in (cache_dir(site) / "parsed.db").read_bytes()  # never cached
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
    from ragspine_lite.bundle.build_cache import cache_dir

    wheel, micropip = shared_wheels(tmp_path_factory)
    docs, site = tmp_path / "docs", tmp_path / "site"
    write_pages(docs, 3)
    base = ["build-site", str(docs), "--out", str(site), "--no-page", "--quiet",
            "--wheel", str(wheel), "--micropip", str(micropip)]
    assert cli.main([*base, "--jobs", "2"]) == 0, capsys.readouterr().err
    assert (cache_dir(site) / "parsed.db").is_file()
    before = files_of(site)
    assert cli.main([*base, "--clean"]) == 0, capsys.readouterr().err
    assert files_of(site) == before
    assert cli.main([*base, "--jobs", "0"]) == 1  # a build error, named
    assert "--jobs must be a positive integer, got 0" in capsys.readouterr().err
