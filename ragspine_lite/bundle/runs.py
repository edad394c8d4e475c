"""A build's postings without holding them: gathered in sorted runs on disk and merged as they
are read (:class:`RunPostings`, from :func:`run_postings`).

Chunks are tokenized in docno order; every :data:`RUN_POSTINGS` postings the ones gathered so
far are written to a run file, term by term in term order. Reading a term merges the runs
(:func:`heapq.merge`): its docnos are the runs' in turn, ascending, so the postings are those
of :func:`~ragspine_lite.bundle.shard_writer.postings_of`, term for term. What stays in memory
is the vocabulary with each term's document frequency and the chunks' token counts.
"""

from __future__ import annotations

import heapq
import marshal
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

__all__ = ["RUN_POSTINGS", "RunPostings", "run_postings"]

#: Postings gathered in memory before they are written to a run.
RUN_POSTINGS = 1 << 21

Record = tuple[str, int, bytes, bytes]  # term, run, docnos, tfs


class RunPostings(Mapping[str, Sequence[Sequence[int]]]):
    """``term → (docnos, tfs)`` read from sorted runs: a pass over the terms in order reads
    each run once; a term asked for before the last one starts a new pass."""

    def __init__(self, runs: list[Path], dfs: dict[str, int]) -> None:
        self.runs, self.dfs = runs, dfs
        self.terms = sorted(dfs)
        self._merged: Iterator[Record] = iter(())
        self._head: Record | None = None
        self._last: tuple[str, tuple[array, array]] | None = None

    def __iter__(self) -> Iterator[str]:
        return iter(self.terms)

    def __len__(self) -> int:
        return len(self.terms)

    def __contains__(self, term: object) -> bool:
        return term in self.dfs

    def df(self, term: str) -> int:
        return self.dfs[term]

    def __getitem__(self, term: str) -> tuple[array, array]:
        if term not in self.dfs:
            raise KeyError(term)
        if self._last is not None and term <= self._last[0]:
            if term == self._last[0]:
                return self._last[1]
            self._head = None  # an earlier term: a new pass
        if self._head is None:
            self._merged = heapq.merge(*(_records(path, i) for i, path in enumerate(self.runs)))
            self._head = next(self._merged, None)
        while self._head is not None and self._head[0] < term:
            self._head = next(self._merged, None)
        docs, tfs = array("I"), array("I")
        while self._head is not None and self._head[0] == term:
            docs.frombytes(self._head[2])
            tfs.frombytes(self._head[3])
            self._head = next(self._merged, None)
        self._last = (term, (docs, tfs))
        return docs, tfs


def _records(path: Path, run: int) -> Iterator[Record]:
    with path.open("rb") as records:
        while True:
            try:
                term, docs, tfs = marshal.load(records)
            except EOFError:
                return
            yield term, run, docs, tfs


def run_postings(token_lists: Iterable[list[str]], folder: Path) -> tuple[array, RunPostings]:
    """Lengths by docno and the postings of ``token_lists`` (one per docno), in runs written
    to ``folder``."""
    lengths = array("I")
    dfs: Counter[str] = Counter()
    runs: list[Path] = []
    block: defaultdict[str, tuple[array, array]] = defaultdict(_pair)
    held = 0
    for docno, tokens in enumerate(token_lists):
        lengths.append(len(tokens))
        counts = Counter(tokens)
        for term, tf in counts.items():
            docs, tfs = block[term]
            docs.append(docno)
            tfs.append(tf)
        held += len(counts)
        if held >= RUN_POSTINGS:
            runs.append(_write_run(block, folder, len(runs), dfs))
            block, held = defaultdict(_pair), 0
    if block:
        runs.append(_write_run(block, folder, len(runs), dfs))
    return lengths, RunPostings(runs, dict(dfs))


def _pair() -> tuple[array, array]:
    return array("I"), array("I")


def _write_run(
    block: Mapping[str, tuple[array, array]], folder: Path, number: int, dfs: Counter[str]
) -> Path:
    """Write ``block`` as run ``number`` (term by term, in term order); count its dfs."""
    path = folder / f"run-{number:05d}.bin"
    with path.open("wb") as out:
        for term in sorted(block):
            docs, tfs = block[term]
            dfs[term] += len(docs)
            marshal.dump((term, docs.tobytes(), tfs.tobytes()), out)
    return path
