"""The worker's door: :func:`dispatch` runs one JSON operation on a
:class:`~ragspine_lite.bundle.runtime.BundleSearcher` and answers JSON (errors propagate).

Ops: ``search`` {query, the options of :data:`~ragspine_lite.bundle.options.SEARCH_OPTIONS`
(filters?, topK?, ...)}; ``ingest`` {name, text, vectors?}; ``page_vectors`` {docId};
``check`` {name, text}; ``forget`` {docIds?}; ``documents``; ``stats``; ``files_for``
{query, filters?, topK?, mode?}; ``vectors_for`` {query, filters?, topK?, mode?}; ``vector_shards``;
``configure`` {reranker, url?, token?, timeout?, check?}; ``configure_llm`` {url?, token?,
timeout?, transform?, decompose?, adaptive?, check?}; ``embed_plan`` {query, mode?}, {texts}
or {document: {name, text}}; ``embed`` {texts}.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ragspine_lite.bundle.options import search_keywords

__all__ = ["OPERATIONS", "dispatch"]

Args = dict[str, Any]


def _search(searcher: Any, args: Args) -> Any:
    options = {name: value for name, value in args.items() if name != "query"}
    return searcher.search(args.get("query", ""), **search_keywords(options)).as_dict()


def _embed_plan(searcher: Any, args: Args) -> Any:
    if "texts" in args:
        return searcher.embedding_plan_for(args["texts"])
    if "document" in args:
        doc = args["document"] if isinstance(args["document"], dict) else {}
        return searcher.document_embedding_plan(doc.get("name", ""), doc.get("text", ""))
    return searcher.embedding_plan(args.get("query", ""), args.get("mode"))


def _files_for(searcher: Any, args: Args) -> Any:
    return {"paths": searcher.files_for(
        args.get("query", ""), filters=args.get("filters"), top_k=args.get("topK"),
        mode=args.get("mode"),
    )}


def _vectors_for(searcher: Any, args: Args) -> Any:
    return searcher.vectors_for(
        args.get("query", ""), filters=args.get("filters"), top_k=args.get("topK"),
        mode=args.get("mode"),
    )


def _configure(searcher: Any, args: Args) -> Any:
    return searcher.configure_reranker(
        args.get("reranker"),
        url=args.get("url"),
        token=args.get("token"),
        timeout=args.get("timeout"),
        check=bool(args.get("check", True)),
    )


def _configure_llm(searcher: Any, args: Args) -> Any:
    return searcher.configure_llm(
        args.get("url"),
        token=args.get("token"),
        timeout=args.get("timeout"),
        transform=args.get("transform") or "none",
        decompose=args.get("decompose") or "none",
        adaptive=args.get("adaptive") or "none",
        check=bool(args.get("check", True)),
    )


#: Operation name → handler(searcher, arguments) → a JSON-ready result.
OPERATIONS: dict[str, Callable[[Any, Args], Any]] = {
    "check": lambda s, a: s.check_document(a.get("name", ""), a.get("text", "")),
    "configure": _configure,
    "configure_llm": _configure_llm,
    "documents": lambda s, a: s.page_documents(),
    "embed": lambda s, a: {"vectors": s.embed(a.get("texts", []))},
    "embed_plan": _embed_plan,
    "files_for": _files_for,
    "forget": lambda s, a: {"removed": s.forget(a.get("docIds"))},
    "ingest": lambda s, a: s.ingest(a.get("name", ""), a.get("text", ""), a.get("vectors")),
    "page_vectors": lambda s, a: s.page_vectors(a.get("docId", "")),
    "search": _search,
    "stats": lambda s, a: s.stats(),
    "vector_shards": lambda s, a: s.vector_shards(),
    "vectors_for": _vectors_for,
}


def dispatch(searcher: Any, op: str, payload: str = "{}") -> str:
    """Run ``op`` with JSON arguments on ``searcher``; → the JSON result."""
    args = json.loads(payload) if payload else {}
    if not isinstance(args, dict):
        raise ValueError(f"arguments for {op!r} must be a JSON object, got {payload!r:.80}")
    handler = OPERATIONS.get(op)
    if handler is None:
        raise ValueError(f"unknown operation {op!r}; valid: {', '.join(sorted(OPERATIONS))}")
    return json.dumps(handler(searcher, args), ensure_ascii=False)
