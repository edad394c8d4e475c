"""The endpoint's OpenAPI 3.1 document (pure data, built from the wire constants)."""

from __future__ import annotations

from typing import Any

from ragspine_lite.remote import wire

__all__ = ["openapi_schema"]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(required: list[str], **props: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": props}


_NUM = {"type": "number"}
_STR = {"type": "string"}
_VEC = {"type": "array", "items": _NUM}
_MULTI = {"type": "array", "items": _VEC}

_SCHEMAS: dict[str, Any] = {
    "Item": _obj(
        ["text", "sensitivity"],
        text=_STR,
        sensitivity={**_STR, "description": "the item's label; RESTRICTED is refused (422)"},
    ),
    "Image": _obj(["image_b64", "sensitivity"], image_b64=_STR, sensitivity=_STR),
    "Page": _obj(
        ["doc_id", "page_no", "sensitivity", "image_b64"],
        doc_id=_STR,
        page_no={"type": "integer", "minimum": 0},
        sensitivity=_STR,
        image_b64=_STR,
        title={"type": ["string", "null"]},
        source_locator={"type": ["string", "null"]},
    ),
    "RerankRequest": _obj(
        ["method", "query", "candidates"],
        method={"type": "string",
                "enum": [*wire.RERANK_METHODS, *sorted(wire.RERANK_METHOD_ALIASES)]},
        query=_STR,
        candidates={"type": "array", "items": _ref("Item")},
    ),
    "RerankResponse": _obj(
        ["method", "model", "ranking", "scores"],
        method=_STR,
        model=_STR,
        ranking={"type": "array", "items": {"type": "integer"},
                 "description": "a permutation of the candidate indices, best first"},
        scores={"type": ["array", "null"], "items": _NUM,
                "description": "per candidate, in request order (null for llm)"},
    ),
    "EmbedRequest": _obj(["inputs"], inputs={"type": "array", "items": _ref("Item")}),
    "EmbedResponse": _obj(
        ["model", "dim", "vectors"], model=_STR, dim={"type": "integer"},
        vectors={"type": "array", "items": _VEC},
    ),
    "ChatRequest": _obj(
        ["messages"],
        messages={
            "type": "array",
            "items": _obj(
                ["role", "content", "sensitivity"],
                role={"type": "string", "enum": list(wire.CHAT_ROLES)},
                content=_STR,
                sensitivity={**_STR, "description": "RESTRICTED is refused (422)"},
            ),
        },
    ),
    "ChatResponse": _obj(["model", "content"], model=_STR, content=_STR),
    "QueryRequest": _obj(["query"], query=_STR),
    "QueryVectorsResponse": _obj(["model", "vectors"], model=_STR, vectors=_MULTI),
    "ImagesRequest": _obj(["images"], images={"type": "array", "items": _ref("Image")}),
    "ImagesResponse": _obj(
        ["model", "embeddings"], model=_STR, embeddings={"type": "array", "items": _MULTI}
    ),
    "PagesRequest": _obj(["pages"], pages={"type": "array", "items": _ref("Page")},
                         index=_STR),
    "PagesResponse": _obj(
        ["registered", "total", "index"], registered={"type": "integer"},
        total={"type": "integer"}, index=_STR,
    ),
    "SearchRequest": _obj(["query", "index"], query=_STR, index=_STR,
                          top_k={"type": "integer", "minimum": 1}),
    "SearchResponse": _obj(
        ["model", "hits"],
        model=_STR,
        hits={
            "type": "array",
            "items": _obj(
                ["doc_id", "page_no", "locator", "title", "score"],
                doc_id=_STR, page_no={"type": "integer"}, locator=_STR,
                title={"type": ["string", "null"]}, score=_NUM,
            ),
        },
    ),
    "TextSearchRequest": _obj(
        ["query"], query=_STR, top_k={"type": "integer", "minimum": 1},
        filters={"type": "object", "additionalProperties": _STR,
                 "description": "equality filters: topic, entity, geography, period, language"},
    ),
    "TextSearchResponse": _obj(
        ["hits", "channel"], channel=_STR,
        hits={"type": "array", "items": {"type": "object", "description": (
            "a snippet: text, doc_id, title, source_locator, chunk_id, the filter fields, "
            "sensitivity (never RESTRICTED) and scores")}},
    ),
    "Error": _obj(
        ["error"], error=_obj(["code", "message"], code=_STR, message=_STR)
    ),
    "Health": _obj(["status"], status=_STR, version=_STR),
    "Models": _obj(["object", "data"], object=_STR, data={"type": "array"}, limits={}),
}

_ERRORS = {
    "400": "body is not one JSON object (invalid, a repeated key, nested too deeply)",
    "401": "bearer token missing",
    "403": "bearer token wrong",
    "408": "headers or body not received within the read timeout",
    "413": "body too large",
    "422": "invalid request, too many items, or an item labelled RESTRICTED",
    "502": "the LLM back end failed",
    "503": "the operation's model is not available",
    "504": "the request ran past the per-request timeout",
}


def _post(summary: str, request: str, response: str) -> dict[str, Any]:
    responses: dict[str, Any] = {
        "200": {"description": "ok", "content": {"application/json": {"schema": _ref(response)}}}
    }
    for code, text in _ERRORS.items():
        responses[code] = {
            "description": text,
            "content": {"application/json": {"schema": _ref("Error")}},
        }
    return {
        "post": {
            "summary": summary,
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref(request)}},
            },
            "responses": responses,
        }
    }


def _get(summary: str, response: str, *, public: bool = False) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "responses": {
            "200": {"description": "ok",
                    "content": {"application/json": {"schema": _ref(response)}}}
        },
    }
    if public:
        op["security"] = []
    return {"get": op}


def openapi_schema(version: str) -> dict[str, Any]:
    """The OpenAPI document served at ``/openapi.json``."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "ragspine-lite remote endpoint",
            "version": version,
            "description": (
                "Heavy retrieval layers behind HTTP: rerank (cross_encoder, colbert = late "
                "interaction MaxSim, splade, llm listwise judge), embeddings and ColPali-style "
                "visual page search. Every text travels with its sensitivity label; "
                "RESTRICTED items are refused."
            ),
        },
        "components": {
            "schemas": _SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": {
            wire.HEALTH_PATH: _get("liveness", "Health", public=True),
            wire.MODELS_PATH: _get("what each operation has loaded", "Models"),
            wire.OPENAPI_PATH: {"get": {"summary": "this document",
                                        "responses": {"200": {"description": "ok"}}}},
            wire.RERANK_PATH: _post("rerank candidates for a query", "RerankRequest",
                                    "RerankResponse"),
            wire.EMBED_PATH: _post("sentence embeddings", "EmbedRequest", "EmbedResponse"),
            wire.CHAT_PATH: _post("one chat completion from the LLM", "ChatRequest",
                                  "ChatResponse"),
            wire.OPENAI_EMBEDDINGS_PATH: {"post": {
                "summary": "OpenAI-compatible embeddings (model: default or e5; input_type: "
                           "query/passage); unlabelled inputs: never send RESTRICTED text",
                "responses": {"200": {"description": "OpenAI's embeddings list"}}}},
            wire.VISUAL_QUERY_PATH: _post("query token vectors", "QueryRequest",
                                          "QueryVectorsResponse"),
            wire.VISUAL_IMAGES_PATH: _post("page patch vectors", "ImagesRequest", "ImagesResponse"),
            wire.VISUAL_PAGES_PATH: _post("register pages in the visual index", "PagesRequest",
                                          "PagesResponse"),
            wire.VISUAL_SEARCH_PATH: _post("MaxSim search over registered pages",
                                           "SearchRequest", "SearchResponse"),
            wire.SEARCH_PATH: _post("hybrid search over the served chunk database (RESTRICTED "
                                    "never returned)", "TextSearchRequest", "TextSearchResponse"),
        },
    }
