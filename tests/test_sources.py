"""Document loading: front matter, defaults and their precedence, encodings, discovery."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragspine_lite.chunking.chunking import chunk_document
from ragspine_lite.chunking.sources import (
    FRONT_MATTER_KEYS,
    HTML_EXTENSIONS,
    SUPPORTED_EXTENSIONS,
    discover_documents,
    document_from_text,
    extract_html,
    heading_sections,
    load_document,
    load_sections,
    parse_front_matter,
    slugify,
)
from ragspine_lite.common.sensitivity import SensitivityError

FRONT = (
    "---\n"
    'title: "Quarterly note"\n'
    "topic: 'REVENUE'\n"
    "entity: ACME_HK\n"
    "period: 2024\n"
    "language: en\n"
    "sensitivity: internal\n"
    "---\n"
)
BODY = "# Heading in body\nRevenue grew in Hong Kong.\n\nProfit was flat."


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_bytes(content.encode("utf-8"))
    return path


def test_front_matter_sets_metadata_and_is_not_part_of_the_body(tmp_path):
    path = write(tmp_path / "note.md", FRONT + BODY)
    text, meta = load_document(path)
    assert text == BODY
    assert (meta.title, meta.topic, meta.entity, meta.period, meta.language) == (
        "Quarterly note",
        "REVENUE",
        "ACME_HK",
        "2024",
        "en",
    )
    assert meta.geography == ""


def test_quotes_are_stripped_only_when_they_match(tmp_path):
    fields, _ = parse_front_matter("---\ntitle: \"A 'b' c\"\ntopic: 'x\"\n---\n")
    assert fields == {"title": "A 'b' c", "topic": "'x\""}


def test_sensitivity_is_normalised_to_upper_case(tmp_path):
    _, meta = load_document(write(tmp_path / "a.md", FRONT + BODY))
    assert meta.sensitivity == "INTERNAL"
    _, meta = load_document(write(tmp_path / "b.md", "---\nsensitivity: ' restricted '\n---\nx"))
    assert meta.sensitivity == "RESTRICTED"


def test_chunks_of_the_body_are_substrings_of_the_body_and_never_the_front_matter(tmp_path):
    text, meta = load_document(write(tmp_path / "note.md", FRONT + BODY))
    chunks = chunk_document(text, meta)
    paragraphs = "\n".join(line.strip() for line in text.split("\n") if line.strip())
    assert chunks
    for chunk in chunks:
        assert chunk.text in paragraphs
        assert "sensitivity:" not in chunk.text
    assert chunks[0].source_locator.startswith("note.md#para1")


def test_unknown_front_matter_key_names_the_key_and_the_file(tmp_path):
    path = write(tmp_path / "bad.md", "---\nauthor: me\n---\nbody")
    with pytest.raises(ValueError) as info:
        load_document(path)
    message = str(info.value)
    assert "'author'" in message
    assert "bad.md" in message
    assert "sensitivity" in message  # lists the valid keys


def test_front_matter_line_without_colon_is_rejected_with_its_line_number(tmp_path):
    path = write(tmp_path / "bad.md", "---\ntitle: ok\njust words\n---\nbody")
    with pytest.raises(ValueError, match=r"bad\.md.*line 3"):
        load_document(path)


def test_duplicate_front_matter_key_is_rejected(tmp_path):
    path = write(tmp_path / "dup.md", "---\ntopic: A\ntopic: B\n---\nbody")
    with pytest.raises(ValueError, match="'topic'"):
        load_document(path)


def test_unclosed_front_matter_is_rejected(tmp_path):
    path = write(tmp_path / "open.md", "---\ntitle: never closed\nbody text")
    with pytest.raises(ValueError, match=r"open\.md.*never closed"):
        load_document(path)


def test_blank_lines_and_comments_inside_front_matter_are_ignored():
    fields, body = parse_front_matter("---\n\n# a comment\nentity: ACME_CN\n---\nBody")
    assert fields == {"entity": "ACME_CN"}
    assert body == "Body"


def test_every_documented_key_is_accepted(tmp_path):
    values = {key: f"v_{key}" for key in FRONT_MATTER_KEYS} | {"sensitivity": "confidential"}
    lines = "".join(f"{key}: {value}\n" for key, value in values.items())
    _, meta = load_document(write(tmp_path / "all.md", f"---\n{lines}---\nbody"))
    assert meta.doc_id == "v_doc_id"
    assert meta.geography == "v_geography"
    assert meta.sensitivity == "CONFIDENTIAL"


def test_text_without_a_leading_fence_has_no_front_matter():
    text = "Intro line\n---\ntitle: not front matter\n---\n"
    assert parse_front_matter(text) == ({}, text)


def test_bom_is_stripped_and_crlf_becomes_lf(tmp_path):
    raw = ("\ufeff" + FRONT + BODY).replace("\n", "\r\n").encode("utf-8")
    text, meta = load_document(write(tmp_path / "win.md", raw))
    assert text == BODY
    assert "\r" not in text and "\ufeff" not in text
    assert meta.entity == "ACME_HK"  # the front matter was still recognised


def test_lone_carriage_returns_become_line_feeds(tmp_path):
    text, _ = load_document(write(tmp_path / "mac.txt", b"one\rtwo\r"))
    assert text == "one\ntwo\n"


def test_doc_id_defaults_to_the_path_relative_to_the_root_with_slashes(tmp_path):
    path = write(tmp_path / "corpus" / "en" / "deep" / "note.md", BODY)
    _, meta = load_document(path, root=tmp_path / "corpus")
    assert meta.doc_id == "en/deep/note.md"


def test_doc_id_without_a_root_is_the_file_name(tmp_path):
    _, meta = load_document(write(tmp_path / "x" / "note.txt", "hello"))
    assert meta.doc_id == "note.txt"


def test_front_matter_doc_id_beats_the_keyword_and_the_path(tmp_path):
    path = write(tmp_path / "note.md", "---\ndoc_id: custom-id\n---\nhello")
    _, meta = load_document(path, root=tmp_path, doc_id="from-keyword")
    assert meta.doc_id == "custom-id"
    _, meta = load_document(write(tmp_path / "plain.md", "hello"), doc_id="from-keyword")
    assert meta.doc_id == "from-keyword"


def test_title_defaults_to_the_first_level_one_heading(tmp_path):
    path = write(tmp_path / "t.md", "intro\n## Second level\n# Real title \nmore")
    _, meta = load_document(path)
    assert meta.title == "Real title"


def test_title_falls_back_to_the_file_stem(tmp_path):
    _, meta = load_document(write(tmp_path / "annual-report.txt", "## not level one\ntext"))
    assert meta.title == "annual-report"


def test_front_matter_wins_over_keyword_defaults_which_fill_the_rest(tmp_path):
    path = write(tmp_path / "n.md", "---\nentity: ACME_CN\nsensitivity: RESTRICTED\n---\nbody")
    _, meta = load_document(
        path, entity="ACME_HK", sensitivity="PUBLIC", period="2023", language="zh", title="T"
    )
    assert meta.entity == "ACME_CN"
    assert meta.sensitivity == "RESTRICTED"
    assert (meta.period, meta.language, meta.title) == ("2023", "zh", "T")


def test_default_sensitivity_is_internal(tmp_path):
    _, meta = load_document(write(tmp_path / "n.txt", "body"))
    assert meta.sensitivity == "INTERNAL"


@pytest.mark.parametrize("name", ["report.pdf", "notes.docx", "README"])
def test_unsupported_extension_names_the_file_and_the_supported_ones(tmp_path, name):
    path = write(tmp_path / name, "body")
    with pytest.raises(ValueError) as info:
        load_document(path)
    message = str(info.value)
    assert name in message
    for ext in SUPPORTED_EXTENSIONS:
        assert ext in message


def test_extension_match_is_case_insensitive(tmp_path):
    text, _ = load_document(write(tmp_path / "UPPER.MD", "body"))
    assert text == "body"


def test_undecodable_file_names_the_file(tmp_path):
    path = write(tmp_path / "latin1.txt", "caf\xe9".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1\.txt.*UTF-8"):
        load_document(path)


def test_missing_file_raises_oserror(tmp_path):
    with pytest.raises(OSError):
        load_document(tmp_path / "nope.md")


def test_discover_walks_directories_recursively_in_sorted_order(tmp_path):
    root = tmp_path / "docs"
    for rel in ["b.md", "a/z.txt", "a/b.md", "c/d/e.md"]:
        write(root / rel, "x")
    write(root / "skip.pdf", "x")
    write(root / ".hidden.md", "x")
    write(root / ".git" / "inside.md", "x")
    found = discover_documents([root])
    assert [p.relative_to(root).as_posix() for p, _ in found] == [
        "a/b.md",
        "a/z.txt",
        "b.md",
        "c/d/e.md",
    ]
    assert all(r == root for _, r in found)


def test_discover_gives_a_direct_file_its_parent_as_root(tmp_path):
    path = write(tmp_path / "sub" / "one.md", "x")
    assert discover_documents([path]) == [(path, path.parent)]


def test_discover_rejects_an_unsupported_file_named_directly(tmp_path):
    path = write(tmp_path / "slides.pptx", "x")
    with pytest.raises(ValueError, match=r"slides\.pptx"):
        discover_documents([path])


def test_discover_rejects_a_missing_path(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        discover_documents([tmp_path / "missing"])


def test_discover_loads_a_file_reached_twice_only_once(tmp_path):
    root = tmp_path / "docs"
    path = write(root / "a.md", "x")
    write(root / "b.md", "x")
    found = discover_documents([root, path])
    assert [p.name for p, _ in found] == ["a.md", "b.md"]
    assert found[0][1] == root  # the first occurrence (and its root) wins


# ---------------------------------------------------------------- HTML

PAGE = """<!doctype html>
<html lang="zh-CN">
<head>
  <title> ACME  annual   review </title>
  <meta name="entity" content="ACME_HK">
  <meta name="sensitivity" content="public">
  <meta name="description" content="ignored: not a front matter key">
  <style>body { color: red }</style>
  <script>var secret = "never indexed";</script>
</head>
<body>
  <nav><a href="/">Home</a></nav>
  <h1 id="top">Annual review</h1>
  <p>Revenue <b>grew</b>   12%
     in 2024.</p>
  <h2><a id="growth"></a>Growth &amp; channels</h2>
  <ul><li>Bancassurance</li><li>Agency</li></ul>
  <pre>line one
  line two</pre>
  <h2>No id here</h2>
  <table><tr><td>Hong Kong</td><td>18.6</td></tr></table>
  <template><p>template text is not content</p></template>
</body>
</html>
"""


def test_html_is_supported_next_to_text_and_markdown():
    assert set(HTML_EXTENSIONS) <= set(SUPPORTED_EXTENSIONS)
    assert {".md", ".txt"} <= set(SUPPORTED_EXTENSIONS)


def test_extract_html_gives_one_line_per_block_and_markdown_headings():
    extracted = extract_html(PAGE)
    assert extracted.text.split("\n") == [
        "# Annual review",
        "Revenue grew 12% in 2024.",
        "## Growth & channels",
        "Bancassurance",
        "Agency",
        "line one",
        "line two",
        "## No id here",
        "Hong Kong",
        "18.6",
    ]
    assert extracted.title == "ACME annual review"
    assert extracted.language == "zh"
    assert extracted.meta == {"entity": "ACME_HK", "sensitivity": "public"}
    assert extracted.anchors == {1: "top", 3: "growth"}


def test_extract_html_drops_scripts_styles_and_templates():
    text = extract_html(PAGE).text
    for hidden in ("never indexed", "color: red", "template text", "ignored"):
        assert hidden not in text


def test_extract_html_never_raises_on_broken_markup():
    assert extract_html("<p>open <b>bold <i>unclosed").text == "open bold unclosed"
    assert extract_html("").text == ""


def test_html_document_metadata_comes_from_meta_tags_title_and_lang(tmp_path):
    body, meta = load_document(write(tmp_path / "site" / "review.html", PAGE), root=tmp_path)
    assert meta.doc_id == "site/review.html"
    assert meta.title == "ACME annual review"
    assert (meta.entity, meta.language, meta.sensitivity) == ("ACME_HK", "zh", "PUBLIC")
    assert body == extract_html(PAGE).text


def test_html_front_matter_block_wins_over_meta_tags(tmp_path):
    text = "---\nsensitivity: PUBLIC\ntitle: Memo\n---\n" + PAGE
    _, meta = load_document(write(tmp_path / "memo.htm", text))
    assert meta.sensitivity == "PUBLIC"
    assert meta.title == "Memo"
    assert meta.entity == "ACME_HK"
    # A label that disagrees with the page's own fails closed instead of winning.
    with pytest.raises(ValueError, match="sensitivity labels"):
        load_document(write(tmp_path / "memo2.htm", text.replace("PUBLIC", "RESTRICTED")))


def test_html_front_matter_and_meta_tag_labels_must_agree(tmp_path):
    path = write(tmp_path / "memo.htm", "---\nsensitivity: RESTRICTED\n---\n" + PAGE)
    with pytest.raises(SensitivityError, match=r"memo\.htm.*'RESTRICTED', 'PUBLIC'"):
        load_document(path)


def test_html_caller_language_default_beats_the_lang_attribute(tmp_path):
    _, meta = load_document(write(tmp_path / "a.html", "<html lang=en><p>x</p>"), language="zh")
    assert meta.language == "zh"


def test_html_chunks_are_contiguous_substrings_of_the_extracted_text(tmp_path):
    body, meta = load_document(write(tmp_path / "review.html", PAGE))
    chunks = chunk_document(body, meta, max_chars=40, overlap_chars=10)
    assert len(chunks) > 2
    for chunk in chunks:
        assert chunk.text in body
        paragraphs = [line.strip() for line in body.split("\n") if line.strip()]
        span = "\n".join(paragraphs[chunk.para_start - 1 : chunk.para_end])
        assert chunk.text in span


def test_html_sections_use_real_ids_only(tmp_path):
    sections = load_sections(write(tmp_path / "review.html", PAGE))
    assert [(s.heading, s.level, s.anchor, s.para_start, s.para_end) for s in sections] == [
        ("Annual review", 1, "top", 1, 2),
        ("Growth & channels", 2, "growth", 3, 7),
        ("No id here", 2, "", 8, 10),  # no id in or around it: the page itself
    ]


def test_html_heading_anchor_falls_back_to_a_preceding_anchor_then_an_enclosing_id():
    markup = (
        '<main id="content"><a name="intro"></a><h2>Intro</h2><p>a</p>'
        '<section id="setup"><div><h2>Setup</h2><p>b</p></div></section>'
        "<h2>Plain</h2><p>c</p></main><h2>Outside</h2><p>d</p>"
    )
    assert extract_html(markup).anchors == {1: "intro", 3: "setup", 5: "content"}


def test_html_skips_page_chrome_and_ignored_elements():
    markup = (
        "<header><h1>Site name</h1></header><nav><ul><li>Home<li>Blog</ul></nav>"
        "<article><h1 id=t>Post</h1><p>Kept text.</p>"
        "<div data-ragspine-ignore><p>Share this</p><div><p>nested</p></div></div>"
        "<p>After.</p></article><footer>© 2026</footer>"
        '<footer data-ragspine-body><p>Footer kept when marked</p></footer>'
    )
    assert extract_html(markup).text == "Footer kept when marked"
    unmarked = markup.replace(" data-ragspine-body", "")
    assert extract_html(unmarked).text.split("\n") == ["# Post", "Kept text.", "After."]


def test_html_body_attribute_limits_the_text_and_keeps_headings_and_anchors():
    markup = (
        "<div class=sidebar><p>Sidebar</p></div>"
        '<main data-ragspine-body><h2 id="a">A</h2><p>one</p></main>'
        "<p>between</p><section data-ragspine-body><h2>B</h2><p>two</p></section>"
    )
    extracted = extract_html(markup)
    assert extracted.text.split("\n") == ["## A", "one", "## B", "two"]
    assert extracted.anchors == {1: "a"}
    # The attribute name as mere text does not switch body-only mode on.
    assert extract_html("<p>use data-ragspine-body on main</p>").text == (
        "use data-ragspine-body on main"
    )


def test_html_data_meta_sets_metadata_from_text_pairs_and_attributes():
    markup = (
        '<meta name="topic" content="FROM_META">'
        '<h1 data-ragspine-meta="title">Real <b>title</b></h1>'
        '<span hidden data-ragspine-meta="period:2024, entity:ACME_HK, colour:red"></span>'
        '<img data-ragspine-meta="topic[alt]" alt="ignored: meta tag came first" src=x.png>'
        '<div data-ragspine-ignore data-ragspine-meta="geography">HK</div>'
    )
    extracted = extract_html(markup)
    assert extracted.meta == {
        "topic": "FROM_META",
        "title": "Real title",
        "period": "2024",
        "entity": "ACME_HK",
        "geography": "HK",
    }
    assert extracted.text == "# Real title"


def test_html_unclosed_elements_do_not_swallow_the_rest_of_the_page():
    markup = "<nav><ul><li>a<li>b</ul></nav><p>content</p><div data-ragspine-ignore><p>x</div><p>y"
    assert extract_html(markup).text.split("\n") == ["content", "y"]


def test_markdown_sections_get_github_style_slugs_deduplicated():
    body = "Intro line\n\n# Revenue 2024!\ntext\n## Revenue 2024\nmore\n# 营收 回顾\nzh"
    sections = heading_sections(body)
    assert [(s.anchor, s.para_start, s.para_end) for s in sections] == [
        ("revenue-2024", 2, 3),
        ("revenue-2024-1", 4, 5),
        ("营收-回顾", 6, 7),
    ]
    assert heading_sections("no headings at all\njust text") == []


def test_slugify_keeps_letters_digits_and_hyphens():
    assert slugify("  Q1: Profit & Loss (HK) ") == "q1-profit--loss-hk"


def test_document_from_text_matches_load_document(tmp_path):
    for name, text in (("note.md", FRONT + BODY), ("page.html", PAGE), ("plain.txt", "a\r\nb")):
        from_file = load_document(write(tmp_path / name, text))
        assert document_from_text(text, name=name) == from_file


def test_document_from_text_rejects_unsupported_names_and_non_text():
    with pytest.raises(ValueError, match=r"notes\.pdf"):
        document_from_text("x", name="notes.pdf")
    with pytest.raises(TypeError):
        document_from_text(b"bytes", name="a.md")  # type: ignore[arg-type]


def test_load_sections_accepts_text_in_memory():
    sections = load_sections("dropped.md", text="# Title\nbody")
    assert [(s.heading, s.anchor) for s in sections] == [("Title", "title")]


def test_html_sensitivity_labels_from_meta_tags_and_data_meta_must_agree(tmp_path):
    page = (
        '<meta name="sensitivity" content="public">'
        '<p data-ragspine-meta="sensitivity:RESTRICTED">board notes</p>'
    )
    assert extract_html(page).sensitivity_labels == ("public", "RESTRICTED")
    with pytest.raises(ValueError, match="sensitivity labels"):
        load_document(write(tmp_path / "a.html", page))
    agreeing = (
        '<meta name="sensitivity" content="RESTRICTED">'
        '<span data-ragspine-meta="sensitivity">restricted</span>'
    )
    _, meta = load_document(write(tmp_path / "b.html", agreeing))
    assert meta.sensitivity == "RESTRICTED"
    with pytest.raises(ValueError, match="sensitivity labels"):
        load_document(write(tmp_path / "c.html", "---\nsensitivity: PUBLIC\n---\n" + agreeing))


# ---------------------------------------------------------------- HTML: linear time

UNCLOSABLE = ["<a ", "</a", "<!-- >", "<?x", "<!x", "<a x='"]


@pytest.mark.parametrize("unit", UNCLOSABLE)
def test_html_constructs_that_never_close_are_text_and_never_parsed_as_tags(unit, monkeypatch):
    # html.parser rescans the rest of the input for every construct it cannot close: 16,000
    # "<a " took 20 s. Those are now text before the parser sees them: no tag is attempted.
    import html.parser

    attempts = []
    for name in ("parse_starttag", "parse_endtag", "parse_comment", "parse_html_declaration",
                 "parse_pi", "parse_bogus_comment"):
        real = getattr(html.parser.HTMLParser, name)
        monkeypatch.setattr(
            html.parser.HTMLParser, name,
            lambda self, i, _real=real, _name=name: attempts.append(_name) or _real(self, i),
        )
    markup = "<p>intro</p>" + unit * 50_000
    extracted = extract_html(markup)
    assert len(attempts) <= 4  # the <p> and </p> of the intro, whatever the input size
    assert extracted.text.split("\n")[0] == "intro"
    assert extracted.text.count(unit.strip()[:2]) == 50_000


def test_html_with_150_kb_of_unclosed_tags_is_extracted_quickly():
    import time

    started = time.perf_counter()
    extract_html("<p>x</p>" + "<a " * 50_000)  # 150 KB: did not finish in 60 s before
    assert time.perf_counter() - started < 10  # generous: linear takes well under a second


def _lines_run(markup: str) -> int:
    """Lines of ``html_text.py`` that ``extract_html(markup)`` executes: a deterministic count
    of the work done (no clock involved)."""
    import sys

    from ragspine_lite.chunking import html_text

    count = 0

    def local(frame, event, arg):
        nonlocal count
        count += event == "line"
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename == html_text.__file__ else None

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        extract_html(markup)
    finally:
        sys.settrace(previous)
    return count


NESTED_CAPTURES = {
    "unclosed": ('<span data-ragspine-meta="title">x ', ""),
    "closed": ('<span data-ragspine-meta="title">x ', "</span>"),
    "labels": ('<b data-ragspine-meta="sensitivity">x ', "</b>"),
}


@pytest.mark.parametrize("shape", NESTED_CAPTURES)
def test_nested_data_meta_captures_take_linear_work(shape):
    # Every capture once copied all the text inside it: n nested captures did n² work
    # (16k of them took 15.6 s). Doubling n must now about double the work, not quadruple it.
    opening, closing = NESTED_CAPTURES[shape]
    work = [_lines_run(opening * n + closing * n) for n in (500, 1000)]
    assert work[1] / work[0] < 2.3, work


def test_sixteen_thousand_nested_captures_are_read_and_refused_correctly():
    opening, closing = NESTED_CAPTURES["closed"]
    title = extract_html(opening * 16_000 + closing * 16_000).meta["title"]
    assert title == "x"  # the innermost closes first and wins; nothing is lost or mixed
    opening, closing = NESTED_CAPTURES["labels"]
    with pytest.raises(SensitivityError, match="holds 202 characters, not a label"):
        document_from_text(opening * 16_000 + closing * 16_000, name="deep.html")


def test_html_marked_sections_never_crash_the_parser():
    # html.parser raised AssertionError on "<![" not followed by a known keyword.
    assert extract_html("<p>a</p><![<![ x]><p>b</p>").text == "a\nb"
    assert extract_html("<p>a</p><![").text == "a\n<!["
