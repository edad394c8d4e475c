"""Test helper: load a small retrieval slice from ``tests/data/<name>/``.

Each slice has ``corpus.jsonl`` (``{"id", "text", "title"}``), ``queries.jsonl``
(``{"id", "text"}``) and ``qrels.tsv`` (header ``query-id corpus-id score``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ragspine_lite.chunking.chunking import Chunk

DATA_DIR = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class Slice:
    """A corpus, its queries and the relevance judgements (query id → {corpus id: score})."""

    name: str
    corpus: list[dict[str, str]]
    queries: list[dict[str, str]]
    qrels: dict[str, dict[str, int]]


def _read_jsonl(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as fh:
        lines = [line.rstrip("\n") for line in fh if line.strip()]
    for line in lines[1:]:  # first line is the header
        query_id, corpus_id, score = line.split("\t")
        qrels.setdefault(query_id, {})[corpus_id] = int(score)
    return qrels


def load_slice(name: str) -> Slice:
    """Read ``tests/data/<name>/{corpus.jsonl,queries.jsonl,qrels.tsv}``."""
    base = DATA_DIR / name
    return Slice(
        name=name,
        corpus=_read_jsonl(base / "corpus.jsonl"),
        queries=_read_jsonl(base / "queries.jsonl"),
        qrels=_read_qrels(base / "qrels.tsv"),
    )


def slice_chunks(data: Slice) -> list[Chunk]:
    """One :class:`Chunk` per corpus paragraph, ``chunk_id = id``."""
    return [
        Chunk(
            chunk_id=row["id"],
            doc_id=row["id"],
            seq=0,
            text=row["text"],
            source_locator=f"{row['id']}#para1",
            para_start=1,
            para_end=1,
            title=row.get("title", ""),
        )
        for row in data.corpus
    ]
