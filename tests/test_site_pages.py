"""Site search builds: result URLs and anchors, rendered Markdown pages, the owner's page."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from html.parser import HTMLParser
from pathlib import Path

import pytest
from _site import SITE_PAGES, SITE_TITLE, html_site, kept_store, load_build_wasm, shared_wheels

from ragspine_lite.bundle.export import SourceDocument, assign_urls
from ragspine_lite.bundle.manifest import PAGE_TABLE
from ragspine_lite.bundle.pages import normalise_base_url, page_url, render_page
from ragspine_lite.bundle.runtime import BundleSearcher, excerpt, with_synonyms
from ragspine_lite.bundle.shards import DirectoryFiles
from ragspine_lite.chunking.chunking import DocumentMeta
from ragspine_lite.chunking.sources import heading_sections

# Words only the ACME demo page carries.
DEMO_WORDS = ("ACME", "hong kong revenue", "营运利润", "RESTRICTED", "ragspine_lite demo")


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.ids.update(v for k, v in attrs if k in ("id", "name") and v)


def ids_of(markup: str) -> set[str]:
    parser = _Ids()
    parser.feed(markup)
    return parser.ids


# ---------------------------------------------------------------- pure pieces


def test_page_urls_join_the_base_and_shorten_index_pages():
    assert page_url("guide/index.html", "/") == "/guide/"
    assert page_url("index.html", "https://example.com/docs") == "https://example.com/docs/"
    assert page_url("a b/营收.html", "/") == "/a%20b/%E8%90%A5%E6%94%B6.html"
    with pytest.raises(ValueError, match="base URL"):
        normalise_base_url("  ")
    with pytest.raises(ValueError, match="spaces"):
        normalise_base_url("/my docs/")


def test_assign_urls_links_html_to_itself_and_renders_the_rest_without_clashes():
    def doc(rel, sensitivity="INTERNAL"):
        return SourceDocument(rel, "x", DocumentMeta(rel, sensitivity=sensitivity), rel_path=rel)

    docs = [doc("a.html"), doc("n/a.md"), doc("n/a.txt"), doc("b.md"), doc("s.md", "RESTRICTED")]
    to_render = assign_urls(docs, "/site/")
    assert [d.url for d in docs] == [
        "/site/a.html", "pages/n/a.md.html", "pages/n/a.txt.html", "pages/b.html", "",
    ]
    assert sorted(to_render) == ["pages/b.html", "pages/n/a.md.html", "pages/n/a.txt.html"]


def test_rendered_markdown_pages_carry_the_section_anchors_and_escape_everything():
    body = (
        "# Title <x>\n\nIntro with `code` and [a link](https://example.com) and "
        "[bad](javascript:alert(1)).\n\n## Part one\n- item **bold**\n- item *em*\n\n"
        "## Part one\n```\n<script>no</script>\n```\n"
    )
    markup = render_page(title="T", body=body, sections=heading_sections(body), markdown=True)
    assert {"title-x", "part-one", "part-one-1"} <= ids_of(markup)
    assert "<script>no" not in markup and "&lt;script&gt;no" in markup
    assert '<a href="https://example.com">a link</a>' in markup
    assert "javascript:" not in markup
    assert "<strong>bold</strong>" in markup and "<em>em</em>" in markup


NUL_BODY = "# Notes\n\nA\x000\x00 and `x` and \x001\x00 and `y`.\n- item \x00\n"


def test_nul_characters_in_markdown_render_as_u_fffd_and_never_break_code_spans():
    markup = render_page(title="T", body=NUL_BODY, sections=heading_sections(NUL_BODY),
                         markdown=True)
    assert "\x00" not in markup
    assert "A\ufffd0\ufffd and <code>x</code> and \ufffd1\ufffd and <code>y</code>." in markup


@pytest.mark.cpython_only
def test_build_site_renders_a_markdown_file_with_nul_characters(tmp_path, tmp_path_factory):
    bw = load_build_wasm()
    wheel, micropip = shared_wheels(tmp_path_factory)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "nul.md").write_text(NUL_BODY, encoding="utf-8")
    manifest = bw.build_site([docs], tmp_path / "site", wheel=wheel, micropip=micropip)
    assert manifest["counts"]["documents"] == 1
    page = (tmp_path / "site" / "pages" / "nul.html").read_text("utf-8")
    assert "<code>x</code>" in page and "\ufffd1\ufffd" in page


def test_excerpts_are_short_stripped_and_marked_also_across_languages():
    text = "# Heading\n" + " ".join(f"w{i}" for i in range(60)) + " **revenue** grew. " + "z " * 40
    out = excerpt("revenue", text)
    assert len(out["text"].split()) <= 34 and out["text"].startswith("…")
    assert "**" not in out["text"] and "Heading" not in out["text"]
    (start, end), = out["highlights"]
    assert out["text"][start:end] == "revenue"
    zh = excerpt(with_synonyms("revenue"), "香港营收增长了百分之十二。")
    assert [zh["text"][s:e] for s, e in zh["highlights"]] == ["营收"]


# ---------------------------------------------------------------- a built site (CPython)

cpython = pytest.mark.cpython_only


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return html_site(tmp_path_factory)


@pytest.fixture(scope="module")
def bundle(site):
    return site / "_search"


@cpython
def test_the_site_is_indexed_in_place_without_its_search_folder(site, bundle, tmp_path_factory):
    manifest = json.loads((bundle / "manifest.json").read_text("utf-8"))
    assert manifest["counts"]["documents"] == 6
    assert "excluded_restricted_documents" not in manifest["counts"]
    assert manifest["title"] == SITE_TITLE
    assert manifest["entry"]["page"] == "index.html"
    assert manifest["entry"]["element"] == "ragspine-search.mjs"
    assert not (bundle / "data" / "chunks.db").exists()
    with sqlite3.connect(kept_store(bundle)) as conn:
        urls = dict(conn.execute(f"SELECT doc_id, url FROM {PAGE_TABLE}"))
    assert urls == {
        "index.html": "/",
        "guide/index.html": "/guide/",
        "guide/tagging.html": "/guide/tagging.html",
        "guide/burrows.html": "/guide/burrows.html",
        "zh/index.html": "/zh/",
        "notes/changelog.md": "pages/notes/changelog.html",
    }
    # A second build into the same folder does not index the first one's pages.
    bw = load_build_wasm()
    wheel, micropip = shared_wheels(tmp_path_factory)
    again = shutil.copytree(site, tmp_path_factory.mktemp("again") / "public")
    manifest = bw.build_site([again], again / "_search", wheel=wheel, micropip=micropip)
    assert manifest["counts"]["documents"] == 6


@cpython
def test_every_result_url_names_an_existing_page_and_id(site, bundle):
    searcher = BundleSearcher.from_files(DirectoryFiles(bundle))
    seen = set()
    for query in ("quokka heat", "tag numbers", "2026 season", "高温", "clipboard", "welcome"):
        for hit in searcher.search(query, top_k=10).hits:
            url = hit["url"]
            path, _, anchor = url.partition("#")
            if path.startswith("/"):
                file = site / path.lstrip("/")
            else:
                file = bundle / path
            if file.is_dir() or not file.suffix:
                file = file / "index.html"
            assert file.is_file(), url
            if anchor:
                assert anchor in ids_of(file.read_text("utf-8")), url
            seen.add(url)
    assert "/guide/#weather" in seen or "/guide/#transects" in seen
    assert "pages/notes/changelog.html#2026-season" in seen
    assert "/zh/#zh-heat" in seen
    searcher.close()


@cpython
def test_page_chrome_and_ignored_parts_are_not_searchable(bundle):
    searcher = BundleSearcher.from_files(DirectoryFiles(bundle))
    for query in ("membership", "social media", "copyright", "wallaby"):
        assert searcher.search(query).hits == [], query
    searcher.close()


@cpython
def test_the_default_page_is_the_owners_and_has_no_demo_text(bundle):
    page = (bundle / "index.html").read_text("utf-8")
    assert f"<h1>{SITE_TITLE}</h1>" in page
    assert "quokka heat" in page  # the configured example
    shipped = page + (bundle / "ragspine-search.mjs").read_text("utf-8")
    for word in DEMO_WORDS:
        assert word not in shipped, word
    assert not (bundle / "demo.mjs").exists()


@pytest.fixture
def builder(tmp_path_factory):
    """``(build_wasm, wheel, micropip)``."""
    return (load_build_wasm(), *shared_wheels(tmp_path_factory))


def docs_folder(folder: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, "utf-8")
    return folder


@cpython
def test_title_and_examples_are_escaped(tmp_path, builder):
    bw, wheel, micropip = builder
    docs = docs_folder(tmp_path / "docs", {"a.md": "# A\n\nalpha text\n"})
    out = tmp_path / "out"
    bw.build_site([docs], out, wheel=wheel, micropip=micropip, title='<b>"T"</b>',
                  examples=['a "quoted" <query>'])
    page = (out / "index.html").read_text("utf-8")
    assert "<b>" not in page and "&lt;b&gt;&quot;T&quot;&lt;/b&gt;" in page
    examples = re.search(r'examples="([^"]*)"', page).group(1)
    assert "<" not in examples
    no_page = tmp_path / "bare"
    manifest = bw.build_site([docs], no_page, wheel=wheel, micropip=micropip, page=False)
    assert not (no_page / "index.html").exists() and "page" not in manifest["entry"]
    assert (no_page / "pages" / "a.html").is_file()
    # Without --title: the folder's name (no index.html with a <title>).
    assert bw.build_site([docs], out, wheel=wheel, micropip=micropip)["title"] == "docs"


@cpython
def test_the_build_site_command_takes_the_page_options(tmp_path, builder):
    bw, wheel, micropip = builder
    docs = docs_folder(
        tmp_path / "public", {"p.html": "<title>P</title><h1 id=h>Heading</h1><p>body text</p>"}
    )
    code = bw.main([
        "build", str(docs), "--out", str(docs / "_search"), "--base-url", "https://ex.org/doc",
        "--title", "Docs", "--examples", "body", "--wheel", str(wheel), "--micropip",
        str(micropip), "--quiet", "--keep-store", str(tmp_path / "kept" / "chunks.db"),
    ])
    assert code == 0
    with sqlite3.connect(tmp_path / "kept" / "chunks.db") as conn:
        assert list(conn.execute(f"SELECT url FROM {PAGE_TABLE}")) == [("https://ex.org/doc/p.html",)]
    assert "<h1>Docs</h1>" in (docs / "_search" / "index.html").read_text("utf-8")
    assert bw.main(["build", str(docs), "--out", str(tmp_path / "x"), "--base-url", " "]) == 1


@cpython
def test_the_demo_switch_writes_the_acme_demo_page(tmp_path_factory):
    from _site import demo_site

    site = demo_site(tmp_path_factory)
    assert "ragspine_lite" in (site / "index.html").read_text("utf-8")
    assert (site / "demo.mjs").is_file()
    manifest = json.loads((site / "manifest.json").read_text("utf-8"))
    assert manifest["entry"]["demo"] == "index.html" and "page" not in manifest["entry"]


@cpython
def test_sources_keep_their_path_relative_to_the_docs_folder(site):
    from ragspine_lite.bundle.export import load_corpus

    corpus = load_corpus([site], exclude=[site / "_search"])
    assert sorted(d.rel_path for d in corpus) == sorted(SITE_PAGES)
    assert all(not Path(d.path).is_relative_to(site / "_search") for d in corpus)


@cpython
def test_serve_takes_the_site_folder_and_names_the_search_page(site):
    import subprocess
    import sys
    import urllib.request

    from _site import REPO

    proc = subprocess.Popen(
        [sys.executable, str(REPO / "build_wasm.py"), "serve", str(site), "--port", "0", "--quiet"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        line = proc.stdout.readline()
        url = re.search(r"http://\S+", line).group(0)
        assert url.endswith("/_search/"), line
        with urllib.request.urlopen(url, timeout=10) as response:
            assert f"<h1>{SITE_TITLE}</h1>" in response.read().decode("utf-8")
        with urllib.request.urlopen(url.replace("_search/", "guide/"), timeout=10) as response:
            assert "Walking a transect" in response.read().decode("utf-8")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@cpython
def test_the_output_folder_may_not_be_or_hold_the_documents(tmp_path, builder):
    bw, wheel, micropip = builder
    docs = docs_folder(tmp_path / "public", {"a.html": "<title>A</title><p>alpha</p>"})
    for out in (docs, tmp_path):
        with pytest.raises(bw.BuildError, match="would replace the documents"):
            bw.build_site([docs], out, wheel=wheel, micropip=micropip, force=True)
    assert (docs / "a.html").is_file()
