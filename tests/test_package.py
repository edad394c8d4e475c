"""The package as users see it: public names, every module importable, zero dependencies."""

from __future__ import annotations

import importlib
import sys
import tomllib
from pathlib import Path

import pytest

import ragspine_lite

PUBLIC_MODULES = [
    "ragspine_lite.chunking.chunking",
    "ragspine_lite.chunking.chunk_store",
    "ragspine_lite.chunking.chunker",
    "ragspine_lite.chunking.sources",
    "ragspine_lite.chunking.html_text",
    "ragspine_lite.lexical.retrieval",
    "ragspine_lite.filtering.metadata_filter",
    "ragspine_lite.filtering.automatic",
    "ragspine_lite.routing.router",
    "ragspine_lite.routing.multi_index",
    "ragspine_lite.vector.embedding_backends",
    "ragspine_lite.vector.store",
    "ragspine_lite.vector.persistence_policy",
    "ragspine_lite.vector.chunk_vectors",
    "ragspine_lite.vector.browser_backend",
    "ragspine_lite.vector.onnx_backend",
    "ragspine_lite.vector.wordpiece",
    "ragspine_lite.vector.sqlite_store",
    "ragspine_lite.rerank.listwise_rerank",
    "ragspine_lite.link.narrative_link",
    "ragspine_lite.link.droppable_filter",
    "ragspine_lite.query.layers",
    "ragspine_lite.mode",
    "ragspine_lite.postprocess",
    "ragspine_lite.corrective",
    "ragspine_lite.raptor",
    "ragspine_lite.contextual",
    "ragspine_lite.bundle.manifest",
    "ragspine_lite.bundle.export",
    "ragspine_lite.bundle.runtime",
    "ragspine_lite.cli",
    "ragspine_lite.common.glossary",
    "ragspine_lite.common.groundedness",
    "ragspine_lite.common.llm",
    "ragspine_lite.common.registry",
    "ragspine_lite.common.settings",
    "ragspine_lite.common.validators",
    "ragspine_lite.common.observability",
    "ragspine_lite.common.sensitivity",
    "ragspine_lite.common.sqlite",
    "ragspine_lite.common.vectors",
    "ragspine_lite.common.company_profile",
    "ragspine_lite.common.security_gate",
    "ragspine_lite.storage.fact_store",
    "ragspine_lite.graph",
    "ragspine_lite.graph.reads",
    "ragspine_lite.graph.store",
    "ragspine_lite.graph.relation",
    "ragspine_lite.graph.query",
    "ragspine_lite.graph.narrative",
    "ragspine_lite.graph.extractor",
    "ragspine_lite.graph.cli",
]

TOP_LEVEL = [
    "Chunk",
    "ChunkStore",
    "DocumentMeta",
    "HybridRetriever",
    "NarrativeIndex",
    "NarrativeIndexRetriever",
    "RESTRICTED",
    "RetrievalResult",
    "__version__",
    "build_narrative_retriever",
    "chunk_document",
    "make_embedding_backend",
    "make_filter",
    "tokenize",
]


def test_top_level_all_is_exactly_the_entry_points():
    assert sorted(ragspine_lite.__all__) == TOP_LEVEL
    for name in TOP_LEVEL:
        assert hasattr(ragspine_lite, name), name


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_public_module_imports_and_declares_all(name):
    mod = importlib.import_module(name)
    assert isinstance(getattr(mod, "__all__", None), list | tuple), name
    for public in mod.__all__:
        assert hasattr(mod, public), f"{name}.__all__ names missing {public!r}"


def test_importing_everything_pulls_in_no_third_party_module():
    for name in PUBLIC_MODULES:
        importlib.import_module(name)
    allowed = set(sys.stdlib_module_names) | {"ragspine_lite", "builtins"}
    origins: dict[str, str] = {}
    # The core modules only: adapters (server, ONNX) import their extras lazily by design.
    for modname in PUBLIC_MODULES:
        mod = sys.modules[modname]
        for attr, value in vars(mod).items():
            if type(value).__name__ == "module":
                origin = value.__name__
            elif isinstance(value, type) or callable(value):
                origin = getattr(value, "__module__", None) or ""
            else:
                continue
            top = origin.split(".")[0]
            if top and top not in allowed:
                origins[f"{modname}.{attr}"] = origin
    assert origins == {}


def test_distribution_declares_no_dependencies_and_python_311():
    meta = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text("utf-8"))
    project = meta["project"]
    assert project["name"] == "ragspine-lite"
    assert project["dependencies"] == []
    assert project["requires-python"] == ">=3.11"
    assert project["scripts"]["ragspine-lite"] == "ragspine_lite.cli:main"
