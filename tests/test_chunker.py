"""chunking.chunker: the Chunker seam, DefaultChunker and make_chunker."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import pytest

from ragspine_lite.chunking import chunker as chunker_module
from ragspine_lite.chunking.chunker import (
    CHUNKER_ENTRY_POINT_GROUP,
    CHUNKER_ENV,
    Chunker,
    DefaultChunker,
    make_chunker,
)
from ragspine_lite.chunking.chunking import Chunk, DocumentMeta, chunk_document
from ragspine_lite.chunking.domain_presets import (
    BookChunker,
    LawsChunker,
    ParentChildChunker,
    QaChunker,
)
from ragspine_lite.chunking.layout_chunker import LayoutAwareChunker
from ragspine_lite.chunking.semantic_chunker import SemanticChunker
from ragspine_lite.chunking.sentence_window_chunker import SentenceWindowChunker

TEXT = "\n".join(
    [
        "# Overview",
        "Revenue grew strongly in 2024. Profit fell slightly.",
        "第一章 风险因素",
        "利率下降影响投资收益。" * 40,
        "Closing remarks",
    ]
)
META = DocumentMeta("doc", topic="finance")


class _OrthogonalEmbedder:
    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] if i % 2 == 0 else [0.0, 1.0] for i in range(len(texts))]


class _FakeEntryPoint:
    def __init__(self, name: str, target: Any) -> None:
        self.name = name
        self.group = CHUNKER_ENTRY_POINT_GROUP
        self._target = target
        self.loaded = 0

    def load(self) -> Any:
        self.loaded += 1
        return self._target


class PluginChunker:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs

    def chunk(
        self, text: str, meta: DocumentMeta, *, max_chars: int = 480, overlap_chars: int = 80
    ) -> list[Chunk]:
        return []


def _patch_entry_points(monkeypatch: pytest.MonkeyPatch, eps: list[_FakeEntryPoint]) -> list[str]:
    groups: list[str] = []

    def fake_entry_points(**kwargs: Any) -> list[_FakeEntryPoint]:
        groups.append(kwargs.get("group", ""))
        return eps

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    return groups


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CHUNKER_ENV, raising=False)


def test_constants() -> None:
    assert CHUNKER_ENV == "RAGSPINE_CHUNKER"
    assert CHUNKER_ENTRY_POINT_GROUP == "ragspine.chunkers"


def test_default_chunker_equals_chunk_document_with_default_params() -> None:
    assert DefaultChunker().chunk(TEXT, META) == chunk_document(TEXT, META)


def test_default_chunker_equals_chunk_document_with_explicit_params() -> None:
    got = DefaultChunker().chunk(TEXT, META, max_chars=90, overlap_chars=30)
    assert got == chunk_document(TEXT, META, max_chars=90, overlap_chars=30)
    assert len(got) > 3


def test_default_chunker_validates_like_chunk_document() -> None:
    with pytest.raises(ValueError, match="overlap_chars"):
        DefaultChunker().chunk("", META, max_chars=10, overlap_chars=10)


@pytest.mark.parametrize(
    "instance",
    [
        DefaultChunker(),
        LayoutAwareChunker(),
        ParentChildChunker(),
        LawsChunker(),
        BookChunker(),
        QaChunker(),
        SentenceWindowChunker(),
        SemanticChunker(_OrthogonalEmbedder()),
    ],
    ids=lambda c: type(c).__name__,
)
def test_every_builtin_satisfies_the_protocol(instance: object) -> None:
    assert isinstance(instance, Chunker)


def test_protocol_rejects_objects_without_chunk() -> None:
    assert not isinstance(object(), Chunker)


@pytest.mark.parametrize("spec", ["none", "  NONE ", "None", ""])
def test_none_spec_turns_the_seam_off(spec: str) -> None:
    assert make_chunker(spec) is None


def test_unset_env_means_none() -> None:
    assert make_chunker() is None


@pytest.mark.parametrize(
    ("spec", "cls"),
    [
        ("default", DefaultChunker),
        ("recursive", DefaultChunker),
        ("structural", DefaultChunker),
        ("layout", LayoutAwareChunker),
        ("parent_child", ParentChildChunker),
        ("parent-child", ParentChildChunker),
        ("small_to_big", ParentChildChunker),
        ("small-to-big", ParentChildChunker),
        ("sentence_window", SentenceWindowChunker),
        ("sentence-window", SentenceWindowChunker),
        ("laws", LawsChunker),
        ("law", LawsChunker),
        ("legal", LawsChunker),
        ("qa", QaChunker),
        ("faq", QaChunker),
        ("book", BookChunker),
        ("chapter", BookChunker),
        ("  Layout\t", LayoutAwareChunker),
        ("PARENT-CHILD", ParentChildChunker),
    ],
)
def test_builtin_names_resolve(spec: str, cls: type) -> None:
    made = make_chunker(spec)
    assert type(made) is cls


def test_semantic_name_resolves_with_injected_embedder() -> None:
    embedder = _OrthogonalEmbedder()
    made = make_chunker("semantic", embedder=embedder, breakpoint_percentile=50.0)
    assert isinstance(made, SemanticChunker)
    assert made.embedder is embedder
    assert made.breakpoint_percentile == 50.0


@pytest.mark.parametrize("spec", ["parent child", "sentence window", "small to big"])
def test_spaces_are_not_normalised(spec: str) -> None:
    with pytest.raises(ValueError, match="unknown chunker"):
        make_chunker(spec)


def test_kwargs_reach_the_chunker() -> None:
    made = make_chunker("sentence_window", window_size=2)
    assert isinstance(made, SentenceWindowChunker)
    assert made.window_size == 2


def test_kwargs_a_chunker_does_not_take_are_a_type_error() -> None:
    with pytest.raises(TypeError):
        make_chunker("default", window_size=2)


def test_env_is_read_when_spec_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CHUNKER_ENV, " Layout ")
    assert type(make_chunker()) is LayoutAwareChunker
    monkeypatch.setenv(CHUNKER_ENV, "none")
    assert make_chunker() is None


def test_explicit_spec_beats_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CHUNKER_ENV, "layout")
    assert type(make_chunker("qa")) is QaChunker
    assert make_chunker("none") is None
    monkeypatch.setenv(CHUNKER_ENV, "not-a-chunker")
    assert type(make_chunker("book")) is BookChunker


def test_bad_env_value_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CHUNKER_ENV, "bogus")
    with pytest.raises(ValueError, match="bogus"):
        make_chunker()


def test_unknown_spec_names_it_and_lists_valid_names(monkeypatch: pytest.MonkeyPatch) -> None:
    _patch_entry_points(monkeypatch, [_FakeEntryPoint("Plugin-X", PluginChunker)])
    with pytest.raises(ValueError) as info:
        make_chunker("Fancy-Splitter")
    message = str(info.value)
    assert "'Fancy-Splitter'" in message
    for name in ("default", "layout", "parent_child", "small_to_big", "semantic", "qa", "book",
                 "none", "plugin_x"):
        assert name in message


def test_entry_point_is_matched_by_normalised_name(monkeypatch: pytest.MonkeyPatch) -> None:
    ep = _FakeEntryPoint("  My_Chunker ", PluginChunker)
    groups = _patch_entry_points(monkeypatch, [ep])
    made = make_chunker("MY_CHUNKER", size=3)
    assert isinstance(made, PluginChunker)
    assert made.kwargs == {"size": 3}
    assert set(groups) == {CHUNKER_ENTRY_POINT_GROUP}
    assert ep.loaded == 1


def test_entry_points_are_looked_up_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError):
        make_chunker("late_plugin")
    _patch_entry_points(monkeypatch, [_FakeEntryPoint("late_plugin", PluginChunker)])
    assert isinstance(make_chunker("late_plugin"), PluginChunker)


def test_builtins_win_over_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    ep = _FakeEntryPoint("layout", PluginChunker)
    _patch_entry_points(monkeypatch, [ep])
    assert type(make_chunker("layout")) is LayoutAwareChunker
    assert ep.loaded == 0


def test_broken_entry_point_discovery_keeps_builtins_working(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(**kwargs: Any) -> list[Any]:
        raise RuntimeError("corrupt metadata")

    monkeypatch.setattr(importlib.metadata, "entry_points", broken)
    assert type(make_chunker("book")) is BookChunker
    with pytest.raises(ValueError, match="unknown chunker"):
        make_chunker("plugin")


def test_non_str_spec_is_rejected() -> None:
    with pytest.raises(TypeError, match="spec"):
        make_chunker(42)  # type: ignore[arg-type]


def test_valid_name_list_comes_from_the_dispatch_table() -> None:
    with pytest.raises(ValueError) as info:
        make_chunker("??")
    for name in chunker_module.CHUNKERS.names():
        assert name in str(info.value)


# ---------------------------------------------------------------- what chunk text is


MESSY = (
    "  # Title  \n\n\tIntro line one.   \n\n\n  Q: What grew?\nA: Revenue grew 12%. It rose.\n"
    "## Chapter 2\n第一条 规定。第二句。\n" + "Long sentence here. " * 60 + "\n   end   "
)


@pytest.mark.parametrize("name", ["default", "layout", "parent_child", "sentence_window",
                                  "semantic", "laws", "qa", "book"])
def test_every_chunk_is_a_substring_of_the_normalised_text_not_of_the_source(name):
    normalised = "\n".join(line.strip() for line in MESSY.split("\n") if line.strip())
    chunks = make_chunker(name).chunk(MESSY, DocumentMeta("d"), max_chars=120, overlap_chars=20)
    assert chunks and all(c.text in normalised for c in chunks)


@pytest.mark.cpython_only
def test_the_docs_say_what_chunk_text_is_a_substring_of():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text(encoding="utf-8")
    api = (root / "docs" / "python-api.md").read_text(encoding="utf-8")
    # The old claim was false: a chunk joining two paragraphs is not in the raw source.
    (chunk,) = chunk_document("alpha\n\n  beta", DocumentMeta("d"))
    assert chunk.text == "alpha\nbeta" and chunk.text not in "alpha\n\n  beta"
    assert "contiguous substrings of the source" not in readme + api
    assert "contiguous substrings of the normalised text" in readme
    assert "every line\nstripped of surrounding whitespace, blank lines dropped" in api
