"""The remote endpoint's wire format (JSON over HTTP), shared by the clients and the server.

Every text that crosses the wire travels as an *item* carrying its label::

    {"text": "...", "sensitivity": "INTERNAL"}

Clients never serialise an item labelled RESTRICTED (they keep it at its position and do
not send it); the server rejects any request that carries one (HTTP 422, code
``restricted_item``) — two independent checks of the network exit.

Operations (all ``POST`` with a JSON object body, answers are JSON objects):

- ``/v1/rerank`` ``{"method", "query", "candidates": [item]}`` →
  ``{"method", "model", "ranking": [int], "scores": [float] | null}``; ``ranking`` is a
  permutation of the candidate indices, best first; ``method`` is one of
  :data:`RERANK_METHODS` (``llm`` is the listwise LLM judge, which has no scores).
- ``/v1/embed`` ``{"inputs": [item]}`` → ``{"model", "dim", "vectors": [[float]]}``.
- ``/v1/chat`` ``{"messages": [{"role", "content", "sensitivity"}]}`` → ``{"model", "content"}``:
  one chat completion from the endpoint's LLM (the browser's query transforms); roles are
  ``system``/``user``/``assistant``, at most :data:`MAX_CHAT_MESSAGES` messages.
- ``/v1/visual/embed_query`` ``{"query"}`` → ``{"model", "vectors": [[float]]}`` (one vector
  per query token).
- ``/v1/visual/embed_images`` ``{"images": [{"image_b64", "sensitivity"}]}`` →
  ``{"model", "embeddings": [[[float]]]}`` (patch vectors per image).
- ``/v1/visual/pages`` ``{"pages": [page], "index"?}`` → ``{"registered", "total", "index"}``;
  a page is ``{"doc_id", "page_no", "sensitivity", "image_b64", "title"?, "source_locator"?}``.
  Without ``index`` a new index is made; its id comes back (the client's own: pass it on).
- ``/v1/visual/search`` ``{"query", "index", "top_k"?}`` →
  ``{"model", "hits": [{"doc_id", "page_no", "locator", "title", "score"}]}``.

``GET /healthz``, ``GET /v1/models`` and ``GET /openapi.json`` describe the server. Errors
are ``{"error": {"code": str, "message": str}}`` with a 4xx/5xx status.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ragspine_lite.common.registry import normalize_spec
from ragspine_lite.common.sensitivity import (
    RESTRICTED,
    SENSITIVITY_LABELS,
    canonical_sensitivity,
    describe_value,
    effective_sensitivity,
    is_restricted,
)

__all__ = [
    "CHAT_PATH",
    "CHAT_ROLES",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_CANDIDATES",
    "DEFAULT_SENSITIVITY",
    "EMBED_PATH",
    "HEALTH_PATH",
    "MAX_CHAT_MESSAGES",
    "MODELS_PATH",
    "OPENAI_EMBEDDINGS_PATH",
    "OPENAPI_PATH",
    "RERANK_METHODS",
    "RERANK_METHOD_ALIASES",
    "RERANK_PATH",
    "SEARCH_PATH",
    "VISUAL_IMAGES_PATH",
    "VISUAL_PAGES_PATH",
    "VISUAL_QUERY_PATH",
    "VISUAL_SEARCH_PATH",
    "RestrictedItemError",
    "WireError",
    "canonical_method",
    "check_multivectors",
    "check_permutation",
    "check_scores",
    "check_vectors",
    "decode_image",
    "encode_image",
    "label_of",
    "open_items",
    "read_images",
    "read_int",
    "read_items",
    "read_messages",
    "read_pages",
    "read_str",
]

HEALTH_PATH = "/healthz"
MODELS_PATH = "/v1/models"
OPENAPI_PATH = "/openapi.json"
RERANK_PATH = "/v1/rerank"
EMBED_PATH = "/v1/embed"
CHAT_PATH = "/v1/chat"
OPENAI_EMBEDDINGS_PATH = "/v1/embeddings"  # OpenAI-compatible, for any OpenAI client
VISUAL_QUERY_PATH = "/v1/visual/embed_query"
VISUAL_IMAGES_PATH = "/v1/visual/embed_images"
VISUAL_PAGES_PATH = "/v1/visual/pages"
VISUAL_SEARCH_PATH = "/v1/visual/search"
SEARCH_PATH = "/v1/search"

RERANK_METHODS = ("cross_encoder", "colbert", "splade", "llm")
RERANK_METHOD_ALIASES: Mapping[str, str] = {
    "ce": "cross_encoder",
    "ms_marco": "cross_encoder",
    "colbertv2": "colbert",
    "late_interaction": "colbert",
    "splade_pp": "splade",
    "learned_sparse": "splade",
    "listwise": "llm",
    "judge": "llm",
}

DEFAULT_MAX_CANDIDATES = 256
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
DEFAULT_SENSITIVITY = "INTERNAL"
CHAT_ROLES = ("system", "user", "assistant")
MAX_CHAT_MESSAGES = 16


class WireError(ValueError):
    """A request or answer that does not follow the wire format; ``code`` names the rule."""

    def __init__(self, message: str, *, code: str = "invalid_request") -> None:
        super().__init__(message)
        self.code = code


class RestrictedItemError(WireError):
    """A request carried an item labelled RESTRICTED (the network exit)."""

    def __init__(self, where: str) -> None:
        super().__init__(
            f"{where} is labelled {RESTRICTED}; RESTRICTED content must never be sent to "
            "the remote endpoint",
            code="restricted_item",
        )


def canonical_method(name: str) -> str:
    """``"late-interaction"`` → ``"colbert"``; unknown → ``ValueError`` listing the names."""
    key = normalize_spec(name)
    key = RERANK_METHOD_ALIASES.get(key, key)
    if key not in RERANK_METHODS:
        valid = sorted({*RERANK_METHODS, *RERANK_METHOD_ALIASES})
        raise ValueError(f"unknown rerank method {name!r}; valid names: {', '.join(valid)}")
    return key


# ---------------------------------------------------------------- client side


def label_of(candidate: Any, default_sensitivity: str = DEFAULT_SENSITIVITY) -> tuple[str, str]:
    """``(text, sensitivity)`` of a candidate, the label canonical; an unreadable or unknown
    label reads as RESTRICTED.

    Accepts a plain string (labelled ``default_sensitivity`` — a ``ListwiseJudge`` only gets
    strings that ``listwise_rerank`` already let through), a mapping with ``text`` (and
    ``sensitivity``), an object with ``.text``/``.sensitivity`` (a chunk), or an object with
    ``.chunk`` (a retrieval result).
    """
    if isinstance(candidate, str):
        return candidate, effective_sensitivity(default_sensitivity)
    try:
        if isinstance(candidate, Mapping):
            text, sens = candidate["text"], candidate.get("sensitivity", default_sensitivity)
        else:
            source = getattr(candidate, "chunk", candidate)
            text, sens = source.text, getattr(source, "sensitivity", default_sensitivity)
        return str(text), effective_sensitivity(sens)
    except Exception:
        return "", RESTRICTED


def open_items(
    candidates: Sequence[Any], default_sensitivity: str = DEFAULT_SENSITIVITY
) -> tuple[list[int], list[dict[str, str]]]:
    """(indices of the non-RESTRICTED candidates, their wire items); RESTRICTED never serialised."""
    slots: list[int] = []
    items: list[dict[str, str]] = []
    for i, candidate in enumerate(candidates):
        text, sens = label_of(candidate, default_sensitivity)
        if is_restricted(sens):
            continue
        slots.append(i)
        items.append({"text": text, "sensitivity": sens})
    return slots, items


def check_permutation(raw: Any, n: int) -> list[int]:
    """``raw`` must be exactly a permutation of ``range(n)`` (ints, no bools) → ``WireError``."""
    if not isinstance(raw, list) or len(raw) != n:
        got = len(raw) if isinstance(raw, list) else type(raw).__name__
        raise WireError(f"ranking must be a list of {n} indices, got {got}", code="permutation")
    if any(isinstance(i, bool) or not isinstance(i, int) for i in raw) or sorted(raw) != list(
        range(n)
    ):
        raise WireError(f"ranking is not a permutation of 0..{n - 1}", code="permutation")
    return list(raw)


def _finite(x: Any) -> bool:
    return not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)


def check_scores(raw: Any, n: int) -> list[float] | None:
    """``None`` or ``n`` finite numbers → floats; anything else → ``WireError``."""
    if raw is None:
        return None
    if not isinstance(raw, list) or len(raw) != n or not all(_finite(x) for x in raw):
        raise WireError(f"scores must be null or a list of {n} finite numbers")
    return [float(x) for x in raw]


def check_vectors(raw: Any, n: int) -> list[list[float]]:
    """``n`` non-empty vectors of finite numbers, all of one dimension → ``WireError``."""
    if not isinstance(raw, list) or len(raw) != n:
        got = len(raw) if isinstance(raw, list) else type(raw).__name__
        raise WireError(f"expected {n} vectors, got {got}")
    dims = {len(v) if isinstance(v, list) else -1 for v in raw}
    if n and (len(dims) != 1 or min(dims) < 1):
        raise WireError("vectors must be non-empty lists of one dimension")
    if not all(_finite(x) for v in raw for x in v):
        raise WireError("vectors must hold finite numbers only")
    return [[float(x) for x in v] for v in raw]


def check_multivectors(raw: Any, n: int) -> list[list[list[float]]]:
    """``n`` multi-vectors (lists of vectors, one dimension throughout) → ``WireError``."""
    if not isinstance(raw, list) or len(raw) != n:
        got = len(raw) if isinstance(raw, list) else type(raw).__name__
        raise WireError(f"expected {n} multi-vectors, got {got}")
    out = [check_vectors(m, len(m) if isinstance(m, list) else -1) for m in raw]
    dims = {len(v) for m in out for v in m}
    if len(dims) > 1:
        raise WireError("multi-vectors must share one dimension")
    return out


def encode_image(image: bytes) -> str:
    """Image bytes → base64 text for the wire."""
    return base64.b64encode(bytes(image)).decode("ascii")


def decode_image(text: Any, where: str = "image_b64") -> bytes:
    """Base64 text → bytes; bad input → ``WireError``."""
    if not isinstance(text, str) or not text:
        raise WireError(f"{where} must be a non-empty base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise WireError(f"{where} is not valid base64") from None


# ---------------------------------------------------------------- server side


def read_str(payload: Mapping[str, Any], key: str, *, allow_empty: bool = False) -> str:
    """A required string field."""
    value = payload.get(key)
    if not isinstance(value, str):
        raise WireError(f"field {key!r} must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise WireError(f"field {key!r} must not be blank")
    return value


def read_int(
    payload: Mapping[str, Any], key: str, *, default: int | None, minimum: int, maximum: int
) -> int:
    """An integer field within ``[minimum, maximum]`` (required when ``default`` is None)."""
    if key not in payload and default is None:
        raise WireError(f"field {key!r} is required")
    value = payload.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise WireError(
            f"field {key!r} must be an integer in [{minimum}, {maximum}], got {value!r}"
        )
    return value


def _read_list(payload: Mapping[str, Any], key: str, max_items: int) -> list[Any]:
    value = payload.get(key)
    if not isinstance(value, list):
        raise WireError(f"field {key!r} must be a list, got {type(value).__name__}")
    if len(value) > max_items:
        raise WireError(
            f"field {key!r} has {len(value)} entries; this endpoint accepts at most {max_items}",
            code="too_many_items",
        )
    return value


def _read_label(entry: Mapping[str, Any], where: str) -> str:
    """The canonical label of an item; RESTRICTED (in any spelling) → ``RestrictedItemError``."""
    sens = entry.get("sensitivity")
    if not isinstance(sens, str):
        raise WireError(f"{where}.sensitivity must be a string label (e.g. 'INTERNAL')")
    label = canonical_sensitivity(sens)
    if label is None:
        raise WireError(
            f"{where}.sensitivity {describe_value(sens)} is not a known label; "
            f"use one of {', '.join(SENSITIVITY_LABELS)}"
        )
    if label == RESTRICTED:
        raise RestrictedItemError(where)
    return label


def _labelled(
    entries: list[Any], key: str, fields: tuple[str, ...] = ()
) -> Iterator[tuple[str, dict[str, Any], str]]:
    """``(where, entry, label)`` of each entry, checked in turn: an object (``fields`` named in
    the error) with a known label; RESTRICTED → ``RestrictedItemError``."""
    shape = f" {{{', '.join(map(repr, fields))}}}" if fields else ""
    for i, entry in enumerate(entries):
        where = f"{key}[{i}]"
        if not isinstance(entry, dict):
            raise WireError(f"{where} must be an object{shape}")
        yield where, entry, _read_label(entry, where)


def read_items(payload: Mapping[str, Any], key: str, *, max_items: int) -> list[str]:
    """The texts of a list of labelled items; a RESTRICTED label → ``RestrictedItemError``."""
    texts: list[str] = []
    entries = _read_list(payload, key, max_items)
    for where, entry, _ in _labelled(entries, key, ("text", "sensitivity")):
        text = entry.get("text")
        if not isinstance(text, str):
            raise WireError(f"{where}.text must be a string")
        texts.append(text)
    return texts


def read_messages(payload: Mapping[str, Any], key: str = "messages") -> list[dict[str, str]]:
    """Labelled chat messages → ``[{"role", "content"}]``; a RESTRICTED label is refused."""
    entries = _read_list(payload, key, MAX_CHAT_MESSAGES)
    if not entries:
        raise WireError(f"field {key!r} must hold at least one message")
    messages = []
    for where, entry, _ in _labelled(entries, key, ("role", "content", "sensitivity")):
        role, content = entry.get("role"), entry.get("content")
        if role not in CHAT_ROLES:
            raise WireError(f"{where}.role must be one of {', '.join(CHAT_ROLES)}, got {role!r}")
        if not isinstance(content, str):
            raise WireError(f"{where}.content must be a string")
        messages.append({"role": role, "content": content})
    return messages


def read_images(payload: Mapping[str, Any], key: str, *, max_items: int) -> list[bytes]:
    """Labelled images ``{"image_b64", "sensitivity"}`` → bytes; RESTRICTED refused."""
    entries = _read_list(payload, key, max_items)
    return [
        decode_image(entry.get("image_b64"), f"{where}.image_b64")
        for where, entry, _ in _labelled(entries, key, ("image_b64", "sensitivity"))
    ]


def read_pages(payload: Mapping[str, Any], key: str, *, max_items: int) -> list[dict[str, Any]]:
    """Visual pages to register; any RESTRICTED page refuses the whole request."""
    pages: list[dict[str, Any]] = []
    for where, entry, sens in _labelled(_read_list(payload, key, max_items), key):
        doc_id = read_str(entry, "doc_id")
        page_no = read_int(entry, "page_no", default=None, minimum=0, maximum=10**9)
        title = entry.get("title")
        locator = entry.get("source_locator")
        for field, value in (("title", title), ("source_locator", locator)):
            if value is not None and not isinstance(value, str):
                raise WireError(f"{where}.{field} must be a string or null")
        pages.append(
            {
                "doc_id": doc_id,
                "page_no": page_no,
                "sensitivity": sens,
                "title": title,
                "source_locator": locator,
                "image": decode_image(entry.get("image_b64"), f"{where}.image_b64"),
            }
        )
    return pages
