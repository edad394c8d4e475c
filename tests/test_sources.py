"""Document loading: front matter, defaults and their precedence, encodings, discovery."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragspine_lite.chunking.chunking import chunk_document
from ragspine_lite.chunking.sources import (
    FRONT_MATTER_KEYS,
    SUPPORTED_EXTENSIONS,
    discover_documents,
    load_document,
    parse_front_matter,
)

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
    lines = "".join(f"{key}: v_{key}\n" for key in FRONT_MATTER_KEYS)
    _, meta = load_document(write(tmp_path / "all.md", f"---\n{lines}---\nbody"))
    assert meta.doc_id == "v_doc_id"
    assert meta.geography == "v_geography"
    assert meta.sensitivity == "V_SENSITIVITY"


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


@pytest.mark.parametrize("name", ["report.pdf", "notes.html", "README"])
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
