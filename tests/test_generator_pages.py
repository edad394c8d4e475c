"""Clean text from real generators' pages, and the language of a site.

The fixtures (``tests/_generator_pages.py``) reproduce the markup MkDocs/Material, Sphinx,
Hugo, Docusaurus and VitePress put around headings and code, and Markdown in the shape of a
Chinese book: result titles lose the site-name suffix, section crumbs the permalink signs,
excerpts the code-fence info strings and line numbers; a site's ``<html lang>`` and words
follow its text.
"""

from __future__ import annotations

import re

import pytest
from _generator_pages import ES6_BOOK, GENERATOR_SITES, write_pages

from ragspine_lite.bundle.export import (
    assign_urls,
    export_store,
    load_corpus,
    shared_title_suffix,
)
from ragspine_lite.bundle.language import normalise_language, page_string, site_language
from ragspine_lite.bundle.runtime import BundleSearcher

# What a generator adds around the text and must not reach a title, a crumb or an excerpt.
NOISE = re.compile(r"[¶§\u200b]|(^|\s)#(\s|$)| \| | - Material| — Sphinx|Copy|^\d+$|^sh$")

TITLES = {
    "mkdocs": {"Material for MkDocs", "Changing the colors", "Setting up versioning"},
    "sphinx": {"Installing Sphinx", "Getting started"},
    "hugo": {"Installing Hugo", "Getting started"},
    "docusaurus": {"Installation", "Deployment"},
    "vitepress": {"Getting Started", "Deploy Your VitePress Site"},
}
# (query, a section heading the best hit must carry, its anchor)
QUERIES = {
    "mkdocs": ("primary color palette", "Color palette", "color-palette"),
    "sphinx": ("apt-get python3-sphinx", "Linux", "linux"),
    "hugo": ("homebrew extended edition", "macOS", "macos"),
    "docusaurus": ("Node.js version required", "Requirements", "requirements"),
    "vitepress": ("existing project", "Installation", "installation"),
}


@pytest.fixture(scope="module", params=sorted(GENERATOR_SITES))
def generated(request, tmp_path_factory):
    """(name, corpus, searcher) of one generator's site, exported to a chunk store."""
    name = request.param
    root = write_pages(tmp_path_factory.mktemp(name) / "public", GENERATOR_SITES[name])
    corpus = load_corpus([root])
    assign_urls(corpus, "/")
    db = root.parent / "chunks.db"
    export_store(corpus, db)
    with BundleSearcher(db) as searcher:
        yield name, corpus, searcher


def test_titles_lose_the_site_name_the_pages_share(generated):
    name, corpus, _ = generated
    assert {d.meta.title for d in corpus} == TITLES[name]


def test_headings_keep_their_text_and_anchor_without_permalink_signs(generated):
    name, corpus, _ = generated
    sections = [s for d in corpus for s in d.sections]
    assert sections
    for section in sections:
        assert not NOISE.search(section.heading), section
    _, heading, anchor = QUERIES[name]
    assert (heading, anchor) in {(s.heading, s.anchor) for s in sections}


def test_the_text_has_no_line_numbers_labels_or_repeated_headings(generated):
    _, corpus, _ = generated
    for doc in corpus:
        for line in doc.body.split("\n"):
            assert not NOISE.search(line.lstrip("#").strip()), (doc.rel_path, line)
        headings = [line for line in doc.body.split("\n") if line.startswith("#")]
        plain = [line.lstrip("#").strip() for line in doc.body.split("\n")]
        for heading in headings:  # an in-page table of contents repeats none of them
            assert plain.count(heading.lstrip("#").strip()) == 1, heading


def test_hits_show_clean_titles_crumbs_and_excerpts(generated):
    name, _, searcher = generated
    query, heading, anchor = QUERIES[name]
    hits = searcher.search(query, top_k=5).hits
    assert hits
    best = hits[0]
    assert best["section"]["heading"] == heading
    assert best["url"].endswith(f"#{anchor}")
    for hit in hits:
        assert hit["snippet"]["title"] in TITLES[name]
        assert not NOISE.search(hit["excerpt"]["text"]), hit["excerpt"]
        if hit["section"]:
            assert not NOISE.search(hit["section"]["heading"])


def test_in_page_links_keep_their_words_apart():
    from ragspine_lite.chunking.sources import extract_html

    markup = '<p><a href="#a"><b>first</b> <i>second</i></a> <a href="#n1">¶</a> tail</p>'
    assert extract_html(markup).text == "first second tail"


def test_a_shared_suffix_needs_two_pages_and_half_of_them():
    assert shared_title_suffix(["A | Site", "B | Site", "C"]) == " | Site"
    assert shared_title_suffix(["A | Site"]) == ""  # one page: the name cannot be told
    assert shared_title_suffix(["A - x", "B - y", "C - z"]) == ""
    assert shared_title_suffix(["A | S", "B | S", "C", "D", "E"]) == ""  # not half of them
    assert shared_title_suffix(["Home", "Tips — Blog", "News — Blog"]) == " — Blog"


def test_markdown_titles_are_never_cut(tmp_path):
    root = write_pages(tmp_path / "docs", {
        "a.md": "---\ntitle: Notes - Team\n---\nalpha\n",
        "b.md": "---\ntitle: Plans - Team\n---\nbeta\n",
    })
    assert {d.meta.title for d in load_corpus([root])} == {"Notes - Team", "Plans - Team"}


# ---------------------------------------------------------------- the Chinese book


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    root = write_pages(tmp_path_factory.mktemp("es6") / "es6tutorial", ES6_BOOK)
    corpus = load_corpus([root])
    assign_urls(corpus, "/")
    db = root.parent / "chunks.db"
    export_store(corpus, db, max_chars=240, overlap_chars=80)
    with BundleSearcher(db) as searcher:
        yield corpus, searcher


def test_excerpts_drop_code_fence_info_strings(book):
    _, searcher = book
    hits = searcher.search("typeof 死区", top_k=10).hits
    assert hits
    fenced = [h for h in hits if "```javascript" in h["snippet"]["text"]]
    assert fenced, "the chunk text keeps the fence (BM25 indexes it unchanged)"
    for hit in hits:
        assert "javascript" not in hit["excerpt"]["text"], hit["excerpt"]
        assert "`" not in hit["excerpt"]["text"]


def test_overlapping_chunks_of_one_section_share_its_link(book):
    """The runtime returns every chunk; the element lists each section once (e2e test)."""
    _, searcher = book
    hits = searcher.search("块级作用域 暂时性死区", top_k=20).hits
    urls = [h["url"] for h in hits]
    assert len(urls) > len(set(urls)), urls


def test_the_book_is_a_simplified_chinese_site(book):
    corpus, _ = book
    assert site_language(corpus) == "zh-CN"
    assert site_language(corpus, "zh_Hant") == "zh-TW"  # --language wins
    assert site_language(corpus, "en") == "en"


def test_site_language_weighs_text_and_tells_the_chinese_scripts_apart(tmp_path):
    root = write_pages(tmp_path / "tw", {
        "index.html": '<html lang="zh"><title>首頁</title><p>這個網站說明學習與開發的經驗。</p>',
        "about.md": "# About\n\nShort English page.\n",
    })
    assert site_language(load_corpus([root])) == "zh-TW"
    assert site_language([]) == "en"
    assert normalise_language("zh-Hans-SG") == "zh-CN"
    assert normalise_language("pt_br") == "pt-BR"
    assert page_string("zh-HK", "search") == "搜尋"
    assert page_string("zh", "search") == "搜索"
    assert page_string("fr", "search") == "Search"
