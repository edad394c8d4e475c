"""Network exit canary: every byte sent to the endpoint, across operations and opt-in
combinations, is recorded by a TCP relay; no RESTRICTED text may be among them.

The sample corpus holds two RESTRICTED documents (one English, one Chinese) marked with the
word ZEPHYRCANARY. Combinations: each remote reranker (cross_encoder, colbert, splade, llm)
with and without the remote embedding backend, the glossary query rewriter, metadata
filters, automatic filter extraction, the sentence-window chunker, the factory path from
the environment, direct judge calls on labelled results, and the visual page operations.
The bytes the endpoint sends on to the LLM back end are checked too.
"""

from __future__ import annotations

import itertools
import json

import pytest

pytestmark = pytest.mark.cpython_only

pytest.importorskip("numpy")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from _remote_models import tiny_models  # noqa: E402
from _remote_server import EndpointServer, RecordingRelay, StubHTTPServer, reverse_llm  # noqa: E402

from ragspine_lite.chunking.chunk_store import ChunkStore  # noqa: E402
from ragspine_lite.chunking.sources import discover_documents, load_document  # noqa: E402
from ragspine_lite.cli import samples_dir  # noqa: E402
from ragspine_lite.common.sensitivity import is_restricted  # noqa: E402
from ragspine_lite.lexical.retrieval import GlossaryQueryRewriter, NarrativeIndex  # noqa: E402
from ragspine_lite.link.narrative_link import NarrativeIndexRetriever  # noqa: E402
from ragspine_lite.remote.client import (  # noqa: E402
    RemoteEmbeddingBackend,
    RemoteListwiseJudge,
    RemoteReranker,
    RemoteVisualEmbedder,
)
from ragspine_lite.remote.server import ServerConfig, create_app  # noqa: E402
from ragspine_lite.remote.server.app import build_models  # noqa: E402
from ragspine_lite.rerank.factory import make_reranker  # noqa: E402
from ragspine_lite.vector.embedding_backends import make_embedding_backend  # noqa: E402
from ragspine_lite.vector.persistence_policy import PersistEverythingPolicy  # noqa: E402
from ragspine_lite.vision.colpali import ColPaliVisualRetriever, VisualPage  # noqa: E402

CANARY = "ZEPHYRCANARY"
QUERIES = [
    "Macau broker acquisition",
    "Hong Kong revenue growth in 2024",
    "why did operating profit fall",
    "deal team board memo price",
    "中国内地营运利润",
    "董事会 关闭 亏损 分支机构",
    "香港银保渠道营收增长",
]
FILTERS = [None, {"entity": "ACME_HK"}, {"language": "zh"}]


@pytest.fixture(scope="module")
def docs():
    return [load_document(path, root=root) for path, root in discover_documents([samples_dir()])]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    models = tiny_models(tmp_path_factory.mktemp("canary-models"))
    with StubHTTPServer(reverse_llm) as llm:
        config = ServerConfig(llm_url=llm.url + "/v1", llm_model="stub")
        app = create_app(config, models=build_models(config, **models))
        with EndpointServer(app) as server, RecordingRelay(server.port) as relay:
            yield relay, llm


def _markers(docs) -> list[bytes]:
    """Byte patterns of RESTRICTED text (raw UTF-8 and JSON-escaped) absent from open docs."""
    open_text = "\n".join(text for text, meta in docs if not is_restricted(meta.sensitivity))
    out: set[bytes] = {CANARY.encode()}
    for text, meta in docs:
        if not is_restricted(meta.sensitivity):
            continue
        for line in text.splitlines():
            line = line.strip().lstrip("#").strip()
            for piece in (line, line[:24], line[-24:]):
                if len(piece) >= 12 and piece not in open_text:
                    out.add(piece.encode("utf-8"))
                    out.add(json.dumps(piece)[1:-1].encode("ascii"))
    return sorted(out)


def _index(tmp_path, docs, **kw):
    store = ChunkStore(tmp_path / f"c{len(list(tmp_path.iterdir()))}.db")
    store.init_schema()
    index = NarrativeIndex(store, **kw)
    for text, meta in docs:
        index.ingest(text, meta)
    return index


def _judges(url):
    return [
        RemoteReranker(url, "cross_encoder"),
        RemoteReranker(url, "colbert"),
        RemoteReranker(url, "splade"),
        RemoteListwiseJudge(url),
    ]


def _assert_clean(data: bytes, markers: list[bytes], where: str) -> None:
    found = [m.decode("utf-8", "replace") for m in markers if m in data]
    assert not found, f"RESTRICTED text reached {where}: {found[:3]}"


def test_no_restricted_byte_reaches_the_endpoint(stack, docs, tmp_path, monkeypatch):
    relay, llm = stack
    markers = _markers(docs)
    assert len(markers) > 6
    url = relay.url
    judges = _judges(url)

    # retrieval pipelines: every judge × embedding on/off × rewriter on/off × filters
    for judge, embed, rewrite in itertools.product(judges, (False, True), (False, True)):
        index = _index(
            tmp_path, docs, judge=judge,
            embedding_backend=RemoteEmbeddingBackend(url) if embed else None,
            query_rewriter=GlossaryQueryRewriter() if rewrite else None,
        )
        link = NarrativeIndexRetriever(index)
        for query, filters in itertools.product(QUERIES, FILTERS):
            snippets = link.retrieve(query, filters=filters, top_k=5)
            assert all(not is_restricted(s["sensitivity"]) for s in snippets)
        index.store.close()
    assert all(j.client.failures == 0 for j in judges)  # every judge really answered
    for method in ("cross_encoder", "colbert", "splade", "llm"):
        assert f'"method":"{method}"'.encode() in relay.received

    # opt-in layers: automatic filters, sentence windows, the env-driven factories
    from ragspine_lite.chunking.chunker import make_chunker
    from ragspine_lite.filtering.automatic import make_filter_extractor

    monkeypatch.setenv("RAGSPINE_RERANKER", "remote:colbert")
    monkeypatch.setenv("RAGSPINE_REMOTE_URL", url)
    monkeypatch.setenv("RAGSPINE_EMBEDDING_BACKEND", "remote")
    index = _index(
        tmp_path, docs, judge=make_reranker(), embedding_backend=make_embedding_backend(),
        filter_extractor=make_filter_extractor("keyword"), chunker=make_chunker("sentence_window"),
    )
    for query in QUERIES:
        NarrativeIndexRetriever(index).retrieve(query, top_k=5)
        # the judge called directly on labelled results, RESTRICTED ones included
        results = index.retrieve(query, rerank=False)
        RemoteReranker(url, "splade").judge(query, results)
    held_back = index.retrieve("Macau broker acquisition", rerank=False)
    assert any(is_restricted(r.chunk.sensitivity) for r in held_back)  # the exit was exercised
    index.store.close()

    # visual: upload + local retriever over the remote embedder, RESTRICTED pages included
    vis = RemoteVisualEmbedder(url)
    pages = [VisualPage("annual", 1, b"open page about revenue"),
             VisualPage("memo", 1, f"{CANARY} memo page".encode(), sensitivity="RESTRICTED"),
             VisualPage("minutes", 2, "董事会 ZEPHYRCANARY".encode(), sensitivity="restricted")]
    assert vis.register_pages(pages) == 1
    vis.search("revenue")
    local = ColPaliVisualRetriever(vis, pages)
    assert len(local) == 1 and local.retrieve("revenue")

    sent = relay.received
    assert b"POST /v1/rerank" in sent and b"POST /v1/embed" in sent
    assert b"POST /v1/visual/pages" in sent and b"/v1/visual/embed_images" in sent
    open_chunk = next(t for t, m in docs if not is_restricted(m.sensitivity)).splitlines()[-1]
    assert open_chunk.strip()[:30].encode() in sent  # positive control: open text does flow
    _assert_clean(sent, markers, "the endpoint")
    _assert_clean(b"".join(r[3] for r in llm.requests), markers, "the LLM back end")
    assert llm.requests  # the LLM judge was exercised


# ------------------------------------------------- callers that embed plain strings
# Here the *caller* hands texts to an EmbeddingBackend as plain strings, so a remote
# backend cannot tell RESTRICTED apart: the callers check ``sends_text_off_host``.


def test_persist_everything_never_sends_restricted_to_a_remote_embedder(stack, docs, tmp_path):
    relay, _llm = stack
    before = len(relay.received)
    _index(tmp_path, docs, embedding_backend=RemoteEmbeddingBackend(relay.url),
           persistence_policy=PersistEverythingPolicy()).store.close()
    _assert_clean(relay.received[before:], _markers(docs), "the endpoint")


def test_hybrid_retriever_never_sends_restricted_to_a_remote_embedder(stack, docs, tmp_path):
    from ragspine_lite.chunking.chunking import chunk_document
    from ragspine_lite.lexical.retrieval import HybridRetriever

    relay, _llm = stack
    before = len(relay.received)
    chunks = [c for text, meta in docs for c in chunk_document(text, meta)]
    HybridRetriever(chunks, embedding_backend=RemoteEmbeddingBackend(relay.url)).search(
        "Macau broker acquisition"
    )
    _assert_clean(relay.received[before:], _markers(docs), "the endpoint")


def test_semantic_chunker_never_sends_restricted_paragraphs_to_a_remote_embedder(stack, docs):
    from ragspine_lite.chunking.semantic_chunker import SemanticChunker

    relay, _llm = stack
    before = len(relay.received)
    chunker = SemanticChunker(embedder=RemoteEmbeddingBackend(relay.url))
    for text, meta in docs:
        chunker.chunk(text, meta)
    _assert_clean(relay.received[before:], _markers(docs), "the endpoint")


def test_sync_chunk_vectors_never_sends_restricted_off_host(stack, docs, tmp_path):
    """persist-everything + an off-host embedder (the endpoint's native route, and its
    OpenAI-compatible one through OpenAIEmbeddingBackend): RESTRICTED gets no vector."""
    from ragspine_lite.vector.chunk_vectors import sync_chunk_vectors
    from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend
    from ragspine_lite.vector.openai_backend import OpenAIEmbeddingBackend
    from ragspine_lite.vector.store import InProcessVectorStore

    relay, _llm = stack
    index = _index(tmp_path, docs)
    chunks = index.store.iter_chunks()
    index.store.close()
    n_open = sum(not is_restricted(c.sensitivity) for c in chunks)
    assert 0 < n_open < len(chunks)
    everything = PersistEverythingPolicy()
    for backend in (RemoteEmbeddingBackend(relay.url),
                    OpenAIEmbeddingBackend(base_url=relay.url + "/v1", model="default")):
        before = len(relay.received)
        store = InProcessVectorStore()
        embedded, _ = sync_chunk_vectors(chunks, backend, store, persistence_policy=everything)
        sent = relay.received[before:]
        assert embedded == n_open == store.count()
        assert chunks[0].text[:20].encode() in sent or chunks[1].text[:20].encode() in sent
        _assert_clean(sent, _markers(docs), f"the endpoint through {type(backend).__name__}")
    # reverse proof: an on-host backend under persist-everything does embed RESTRICTED
    store = InProcessVectorStore()
    embedded, _ = sync_chunk_vectors(chunks, DeterministicEmbeddingBackend(dim=8), store,
                                     persistence_policy=everything)
    assert embedded == len(chunks)
