"""Shared pieces of the ``ragspine-lite`` commands: the parser, option types and helpers.

Output goes through :func:`out` / :func:`out_json` / :func:`err`, which escape control
characters from documents (terminal escape sequences, bidi overrides) so that they are never
printed raw. Bad options raise :class:`UsageError` (exit code 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragspine_lite.chunking.chunk_store import StoredChunk
from ragspine_lite.common.settings import Settings
from ragspine_lite.common.validators import arg_type

PROG = "ragspine-lite"
DEFAULT_CLI_TOP_K = 10
EXIT_OK, EXIT_RUNTIME, EXIT_USAGE = 0, 1, 2
_DEFAULT_EMBEDDING = "auto"
_TEXT_PREVIEW_CHARS = 240


class UsageError(Exception):
    """A malformed command line (exit code 2)."""


class Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors become one-line ``UsageError``s instead of exiting."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise UsageError(message)


def samples_dir() -> Path:
    """The bundled sample corpus (package data of ``ragspine_lite``)."""
    return Path(__file__).resolve().parent.parent / "samples"


#: ``argparse`` types (:func:`~ragspine_lite.common.validators.arg_type`).
positive_int = arg_type("positive integer")
non_negative_int = arg_type("non-negative integer")


def add_retrieval_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mode",
        metavar="MODE",
        help="retrieval mode: auto/hybrid (BM25 + dense when a backend is available) or "
        "economy/bm25 (pure BM25, no embeddings); default $RAGSPINE_RETRIEVAL_MODE or auto",
    )
    p.add_argument(
        "--embedding",
        metavar="SPEC",
        help="embedding backend for hybrid mode (none, auto, deterministic, onnx, ...); "
        "default $RAGSPINE_EMBEDDING_BACKEND, then $RAGSPINE_EMBEDDING, then auto",
    )


def add_query_layer_options(p: argparse.ArgumentParser) -> None:
    for flag, env, choices in (
        ("--query-transform", "RAGSPINE_QUERY_TRANSFORM", "none, hyde, rag_fusion, step_back"),
        ("--decompose", "RAGSPINE_QUERY_DECOMPOSE", "none, llm"),
        ("--adaptive", "RAGSPINE_ADAPTIVE", "none, heuristic, llm (decompose multi-part only)"),
    ):
        p.add_argument(flag, metavar="SPEC", help=f"{choices}; default ${env} or none")
    p.add_argument("--llm-url", metavar="URL",
                   help="OpenAI-compatible chat server (.../v1) for the query layers; "
                   "default $RAGSPINE_LLM_URL")
    p.add_argument("--llm-model", metavar="NAME", help="its model; default $RAGSPINE_LLM_MODEL")


# C0/C1 controls but newline and tab, DEL, and the bidi embedding/override/isolate controls:
# a document could otherwise drive the terminal (escape sequences) or reorder what is shown.


UNSAFE_CHARS = frozenset(
    [*map(chr, range(0x20)), *map(chr, range(0x7F, 0xA0)), *map(chr, range(0x202A, 0x202F)),
     *map(chr, range(0x2066, 0x206A))]
) - {"\n", "\t"}


def escape_controls(text: str, *, json_escape: bool = False) -> str:
    """``text`` with :data:`UNSAFE_CHARS` written as ``\\xNN``/``\\uNNNN`` (``\\uNNNN`` in
    JSON, where the escape decodes back to the same character)."""

    def esc(ch: str) -> str:
        code = ord(ch)
        return f"\\u{code:04x}" if json_escape or code > 0xFF else f"\\x{code:02x}"

    return "".join(esc(ch) if ch in UNSAFE_CHARS else ch for ch in text)


def out(line: str = "") -> None:
    print(escape_controls(line), file=sys.stdout)


def out_json(value: object) -> None:
    text = json.dumps(value, ensure_ascii=False, indent=2)
    print(escape_controls(text, json_escape=True), file=sys.stdout)


def err(message: str) -> None:
    print(escape_controls(f"{PROG}: {message}"), file=sys.stderr)


def note(message: str) -> None:
    err(message)


def shorten(text: str, limit: int = _TEXT_PREVIEW_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, sqlite3.Error):
        text = f"database error: {text}"
    return " ".join(text.split())


def silence_stdout() -> None:
    """Point stdout at devnull so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def parse_filters(expressions: Sequence[str]) -> Any:
    """``--filter`` expressions → a MetadataFilter (AND) or ``None``; bad ones are usage errors."""
    if not expressions:
        return None
    from ragspine_lite.filtering.metadata_filter import MetadataFilter, parse_filter_expression

    valid = [f.name for f in dataclasses.fields(StoredChunk)]
    conditions = []
    for expr in expressions:
        try:
            condition = parse_filter_expression(expr)
        except ValueError as exc:
            raise UsageError(f"argument --filter: {exc}") from None
        if condition.field not in valid:
            raise UsageError(
                f"argument --filter: unknown field {condition.field!r} in {expr!r}; "
                f"valid fields: {', '.join(valid)}"
            )
        conditions.append(condition)
    return MetadataFilter(tuple(conditions))


def read_settings() -> Settings:
    """The environment's :class:`~ragspine_lite.common.settings.Settings`; a bad value is a
    usage error naming the variable (read once, by :func:`~ragspine_lite.cli.main`)."""
    try:
        return Settings.from_env()
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def pick(option: str | None, setting: str | None, default: str) -> str:
    """A command-line option, else its setting, else ``default``."""
    if option is not None:
        return option
    return setting if setting is not None else default


def resolve_backend(
    mode_spec: str | None, embedding_spec: str | None, settings: Settings
) -> tuple[Any, Any]:
    """(mode, embedding backend or None) from options, then settings; bad specs are usage
    errors."""
    from ragspine_lite.mode import make_retrieval_mode, resolve_embedding_backend

    try:
        mode = make_retrieval_mode(pick(mode_spec, settings.retrieval_mode, "auto"))
    except ValueError as exc:
        raise UsageError(f"argument --mode: {exc}") from None
    if not mode.uses_embedding:
        return mode, None
    spec = pick(embedding_spec, settings.embedding_backend or settings.embedding,
                _DEFAULT_EMBEDDING)
    try:
        backend = resolve_embedding_backend(mode, spec)
    except ValueError as exc:
        raise UsageError(f"argument --embedding: {exc}") from None
    return mode, backend


def edge_settings(settings: Settings) -> dict[str, Any]:
    """The retriever settings the command's ``settings`` give (docs/environment.md):
    ``RAGSPINE_PERSISTENCE_POLICY``, ``RAGSPINE_COMPANY_CONFIG`` (the glossary, also the
    filter extractor's), ``RAGSPINE_FILTER_EXTRACTOR``. A bad value is a usage error naming
    the variable; commands call this first, so nothing is written before it is checked."""
    from ragspine_lite.common.glossary import COMPANY_CONFIG_ENV, load_glossary
    from ragspine_lite.filtering.automatic import FILTER_EXTRACTOR_ENV, make_filter_extractor
    from ragspine_lite.vector.persistence_policy import (
        PERSISTENCE_POLICY_ENV,
        make_persistence_policy,
    )

    edge: dict[str, Any] = {}
    env = PERSISTENCE_POLICY_ENV
    try:
        edge["persistence_policy"] = make_persistence_policy(
            pick(None, settings.persistence_policy, "default")
        )
        env = COMPANY_CONFIG_ENV
        profile = settings.company_config
        edge["glossary"] = load_glossary(profile) if profile else None
        env = FILTER_EXTRACTOR_ENV
        edge["filter_extractor"] = make_filter_extractor(
            pick(None, settings.filter_extractor, "none"), glossary=edge["glossary"]
        )
        vector_store_spec(settings)
    except ValueError as exc:
        raise UsageError(f"{env}: {exc}") from None
    return edge


def vector_store_spec(settings: Settings) -> str:
    """``RAGSPINE_VECTOR_STORE`` as a store kind
    (:func:`~ragspine_lite.vector.store_env.store_kind`); a bad value is a usage error."""
    from ragspine_lite.vector.store import VECTOR_STORE_ENV
    from ragspine_lite.vector.store_env import store_kind

    try:
        return store_kind(settings.as_env())
    except ValueError as exc:
        raise UsageError(f"{VECTOR_STORE_ENV}: {exc}") from None
