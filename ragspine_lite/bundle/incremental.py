"""What a rebuild reuses of the previous build's index: the postings and the unchanged files.

A site build records its index in the build cache (:class:`IndexState`: each document's chunk
key, the chunk ids in docno order, the postings, and which content each index file was written
from). The next build (:class:`Rebuild`, the shard writer's
:class:`~ragspine_lite.bundle.shard_writer.Reuse`) then

- patches the postings when the chunk ids are those of the previous build (so no docno moved):
  only the chunks of the documents whose chunk key changed are tokenized again, and only the
  terms whose postings or minimum length they change are marked; any other change (a page
  added, removed, or cut into another number of chunks) tokenizes every chunk;
- links a term shard of the previous build (and the length files it names) when its terms
  are the same and none is marked (a chunk whose token count changes marks all its terms),
  and a text fragment when the digest of everything it holds (its first docno, its chunks'
  rows, its documents' URLs and sections) is the same.

Every file either comes from the previous site (as that build left it: the inode, size and
modification time it recorded, else checked against the hash in its name) or is
packed from the same data a clean build packs, so the site is the clean build's, byte for
byte (``tests/test_site_rebuild.py``).
"""

from __future__ import annotations

import hashlib
import io
import marshal
import os
from array import array
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, chain
from pathlib import Path
from typing import Any, BinaryIO

from ragspine_lite.bundle.runs import run_postings
from ragspine_lite.bundle.shard_writer import Postings, ShardReport
from ragspine_lite.chunking.chunk_store import StoredChunk
from ragspine_lite.pipeline.stages import index_text
from ragspine_lite.text.words import tokenize

__all__ = ["STATE_NAME", "IndexState", "PatchedPostings", "Rebuild", "stat_line", "write_state"]

#: The name of the index state in the build cache.
STATE_NAME = "index"
_ARRAYS = ("lengths", "dfs", "docs", "tfs")
_HEAD = ("salt", "doc_keys", "chunk_ids", "term_files", "fragments", "files")


@dataclass
class IndexState:
    """The index one build wrote: enough to patch its postings and to find its files."""

    salt: str
    doc_keys: dict[str, str]
    chunk_ids: list[str]
    lengths: array
    terms: list[str]
    dfs: array
    docs: array
    tfs: array
    term_files: list[list[Any]]  # [first term, number of terms, path], in term order
    fragments: dict[str, str]  # content digest → path
    files: dict[str, str] = field(default_factory=dict)  # path → its stat (:func:`stat_line`)

    def encode(self) -> bytes:
        """The state as :func:`write_state` writes it."""
        head = {name: getattr(self, name) for name in _HEAD}
        out = io.BytesIO()
        _write_state(out, head, self.lengths, PatchedPostings(self, {}))
        return out.getvalue()

    @classmethod
    def read(cls, path: Path | None, salt: str) -> IndexState | None:
        """:meth:`load` of the file ``path`` (``None``: none)."""
        if path is None:
            return None
        with path.open("rb") as source:
            return cls.load(source, salt)

    @classmethod
    def decode(cls, blob: bytes | None, salt: str) -> IndexState | None:
        """:meth:`load` of ``blob``."""
        return cls.load(io.BytesIO(blob), salt) if blob else None

    @classmethod
    def load(cls, source: BinaryIO, salt: str) -> IndexState | None:
        """The state in ``source`` if it was written with ``salt`` (else, or damaged:
        ``None``); its arrays are read straight into place."""
        try:
            head = marshal.loads(source.read(int.from_bytes(source.read(8), "little")))
            if head.get("salt") != salt:
                return None
            arrays: dict[str, Any] = {}
            for name, count in head.pop("arrays"):
                arrays[name] = array("I")
                arrays[name].fromfile(source, count)
            state = cls(**head, **arrays)
        except (ValueError, TypeError, KeyError, EOFError, AttributeError):
            return None
        return state if len(state.dfs) == len(state.terms) == sum(
            n for _, n, _ in state.term_files) else None


def stat_line(path: Path) -> str:
    """What a rebuild checks a previous build's index file by: its inode, size and
    modification time (``""``: the file is gone)."""
    try:
        stat = os.stat(path)
    except OSError:
        return ""
    return f"{stat.st_ino} {stat.st_size} {stat.st_mtime_ns}"


class PatchedPostings(Mapping[str, Sequence[Sequence[int]]]):
    """A previous build's postings (:class:`IndexState`, sliced only when asked for) with the
    terms in ``replaced`` replaced (``None``: gone), in term order."""

    def __init__(self, old: IndexState, replaced: dict[str, tuple[array, array] | None]) -> None:
        self.old, self.replaced = old, replaced
        self.at = {term: i for i, term in enumerate(old.terms)}
        self.starts = array("Q", accumulate(old.dfs, initial=0))
        gone = {t for t, entry in replaced.items() if entry is None}
        added = sorted(t for t, entry in replaced.items() if entry is not None and t not in self.at)
        self.terms = [t for t in old.terms if t not in gone] if gone else list(old.terms)
        for term in added:
            insort(self.terms, term)

    def __getitem__(self, term: str) -> Sequence[Sequence[int]]:
        if term in self.replaced:
            entry = self.replaced[term]
            if entry is None:
                raise KeyError(term)
            return entry
        i = self.at[term]
        a, b = self.starts[i], self.starts[i + 1]
        return self.old.docs[a:b], self.old.tfs[a:b]

    def __iter__(self) -> Iterator[str]:
        return iter(self.terms)

    def __len__(self) -> int:
        return len(self.terms)

    def parts(self) -> tuple[list[str], array, list[Any], list[Any]]:
        """``(terms, dfs, docnos, tfs)`` in term order, the docnos and tfs as a list of parts:
        the previous build's arrays viewed in runs where nothing changed (nothing copied)."""
        old, terms, dfs = self.old, [], array("I")
        docs: list[Any] = []
        tfs: list[Any] = []
        viewed = memoryview(old.docs), memoryview(old.tfs)
        for part in self._segments():
            if isinstance(part, str):
                d, f = self[part]
                terms.append(part)
                dfs.append(len(d))
                docs.append(_uints(d))
                tfs.append(_uints(f))
                continue
            i, j = part
            a, b = self.starts[i], self.starts[j]
            terms.extend(old.terms[i:j])
            dfs.extend(old.dfs[i:j])
            docs.append(viewed[0][a:b])
            tfs.append(viewed[1][a:b])
        return terms, dfs, docs, tfs

    def _segments(self) -> Iterator[tuple[int, int] | str]:
        """The terms in order: runs ``(i, j)`` of the previous build's terms ``i`` to ``j - 1``,
        unchanged, and each replaced term that is still there."""
        start = 0
        for term in sorted(self.replaced):
            at = self.at.get(term)
            place = bisect_left(self.old.terms, term) if at is None else at
            if place > start:
                yield start, place
            if self.replaced[term] is not None:
                yield term
            start = place if at is None else place + 1
        if start < len(self.old.terms):
            yield start, len(self.old.terms)

    def df(self, term: str) -> int:
        """How many docnos ``term`` has (without slicing them)."""
        if term in self.replaced:
            return len(self[term][0])
        i = self.at[term]
        return self.old.dfs[i]



def write_state(path: Path, head: dict[str, Any], lengths: array, postings: Postings) -> None:
    """Write an :class:`IndexState` (``head``: its other fields) to ``path`` straight from
    ``postings``, term by term (no flat copy of them is made)."""
    with path.open("wb") as out:
        _write_state(out, head, lengths, postings)


def _write_state(out: BinaryIO, head: dict[str, Any], lengths: array, postings: Postings) -> None:
    """The length of the head (8 bytes), the head (marshal: the build's own file, read by the
    same Python), then the arrays: lengths, dfs, every term's docnos, every term's tfs."""
    terms, dfs, docs, tfs = _parts(postings)
    total = sum(dfs)
    sizes = {"lengths": len(lengths), "dfs": len(dfs), "docs": total, "tfs": total}
    blob = marshal.dumps({**{name: head[name] for name in _HEAD}, "terms": terms,
                          "arrays": [[n, sizes[n]] for n in _ARRAYS]})
    out.write(len(blob).to_bytes(8, "little"))
    out.write(blob)
    out.write(_uints(lengths))
    out.write(dfs)
    for part in chain(docs, tfs):
        out.write(part)


def _parts(postings: Postings) -> tuple[list[str], array, Iterable[Any], Iterable[Any]]:
    """:meth:`PatchedPostings.parts`; for other postings, every term's arrays in turn."""
    if isinstance(postings, PatchedPostings):
        return postings.parts()
    terms = sorted(postings)
    df = getattr(postings, "df", None)  # runs: without reading them
    dfs = array("I", map(df, terms) if df is not None else (len(postings[t][0]) for t in terms))
    return (terms, dfs, (_uints(postings[t][0]) for t in terms),
            (_uints(postings[t][1]) for t in terms))


def _uints(values: Sequence[int]) -> array:
    """``values`` as 4-byte unsigned ints (an array of them as it is)."""
    return values if isinstance(values, array) and values.typecode == "I" else array("I", values)


def _patched(
    entry: Sequence[Sequence[int]] | None, term: str,
    changes: Mapping[int, tuple[Counter[str], Counter[str]]],
) -> tuple[array, array]:
    """One term's ``(docnos, tfs)`` with the changed docnos' new counts of ``term``."""
    docs, tfs = (array("I", entry[0]), array("I", entry[1])) if entry else (array("I"), array("I"))
    for docno in sorted(changes):
        tf = changes[docno][1][term]
        i = bisect_left(docs, docno)
        present = i < len(docs) and docs[i] == docno
        if tf and present:
            tfs[i] = tf
        elif tf:
            docs.insert(i, docno)
            tfs.insert(i, tf)
        elif present:
            del docs[i]
            del tfs[i]
    return docs, tfs


class Rebuild:
    """The previous build's state put to use (:class:`~.shard_writer.Reuse`), and this build's.

    ``keys``: ``doc_id → chunk key`` of the exported documents; ``doc_chunks``: their chunks;
    ``old_chunks(key)``: the chunks cached under a previous key (``None`` when gone);
    ``sigs``/``doc_sigs``: the digests of each chunk's fragment row and of each document's
    fragment entry (URL, sections). ``previous``: the site the previous build wrote;
    ``scratch``: a folder for the postings' runs (:mod:`~ragspine_lite.bundle.runs`).
    """

    def __init__(
        self, previous: Path, old: IndexState | None, keys: Mapping[str, str],
        doc_chunks: Mapping[str, list[StoredChunk]], old_chunks: Any,
        sigs: Mapping[str, str], doc_sigs: Mapping[str, str], scratch: Path,
    ) -> None:
        self.previous, self.old, self.keys, self.scratch = previous, old, keys, scratch
        self.doc_chunks, self.old_chunks = doc_chunks, old_chunks
        self.sigs, self.doc_sigs = sigs, doc_sigs
        self.marked: set[str] | None = None  # terms that may differ (None: all of them)
        self.patched = False
        self.groups: list[tuple[str, int]] = []
        self.digests: list[str] = []
        self.current: tuple[array, Postings] = (array("I"), {})
        self.old_groups: dict[tuple[str, int], tuple[int, str]] = {}
        start = 0
        for first, count, path in old.term_files if old is not None else ():
            self.old_groups[(first, count)] = (start, path)
            start += count

    # -- postings ----------------------------------------------------------------------------

    def postings(self, chunks: list[StoredChunk], fn: Any) -> tuple[array, Postings]:
        changes = self._changes(chunks, fn)
        if changes is None or self.old is None:
            tokens = (tokenize(index_text(fn, c)) for c in chunks)
            self.current = run_postings(tokens, self.scratch)
        else:
            self.current = self._patch(self.old, changes)
            self.patched = True
        return self.current

    def _changes(
        self, chunks: list[StoredChunk], fn: Any
    ) -> dict[int, tuple[Counter[str], Counter[str]]] | None:
        """``docno → (old tokens, new tokens)`` of the chunks whose tokens changed, when no
        docno moved since the previous build (``None``: tokenize everything)."""
        old = self.old
        if old is None or len(chunks) != len(old.chunk_ids) or any(
            c.chunk_id != cid for c, cid in zip(chunks, old.chunk_ids, strict=True)
        ):
            return None
        docno: dict[str, int] = {}
        changes: dict[int, tuple[Counter[str], Counter[str]]] = {}
        for doc_id, key in self.keys.items():
            old_key, now = old.doc_keys.get(doc_id), self.doc_chunks[doc_id]
            if old_key == key or not now:
                continue
            before = self.old_chunks(old_key) if old_key else None
            if before is None or [c.chunk_id for c in before] != [c.chunk_id for c in now]:
                return None
            docno = docno or {cid: i for i, cid in enumerate(old.chunk_ids)}
            for was, chunk in zip(before, now, strict=True):
                counts = (Counter(tokenize(index_text(fn, was))),
                          Counter(tokenize(index_text(fn, chunk))))
                if counts[0] != counts[1]:
                    changes[docno[chunk.chunk_id]] = counts
        return changes

    def _patch(
        self, old: IndexState, changes: dict[int, tuple[Counter[str], Counter[str]]]
    ) -> tuple[array, Postings]:
        """The previous postings with ``changes`` applied; marks the terms they reach."""
        lengths = array("I", old.lengths)
        marked: set[str] = set()
        for docno, (before, after) in changes.items():
            lengths[docno] = after.total()
            if before.total() != after.total():  # the minimum length may move
                marked |= before.keys() | after.keys()
            else:
                marked |= {t for t in before.keys() | after.keys() if before[t] != after[t]}
        previous = PatchedPostings(old, {})
        replaced: dict[str, tuple[array, array] | None] = {}
        for term in marked:
            docs, tfs = _patched(previous.get(term), term, changes)
            replaced[term] = (docs, tfs) if docs else None
        self.marked = marked
        return lengths, PatchedPostings(old, replaced)

    # -- files -------------------------------------------------------------------------------

    def term_file(self, terms: Sequence[str]) -> str | None:
        """The previous shard of exactly ``terms`` when the postings were patched and none of
        them is marked."""
        self.groups.append((terms[0], len(terms)))
        if self.old is None or self.marked is None:
            return None
        start, path = self.old_groups.get((terms[0], len(terms)), (0, ""))
        if not path or not self.marked.isdisjoint(terms):
            return None
        return path if self.old.terms[start:start + len(terms)] == list(terms) else None

    def fragment_file(self, start: int, part: Sequence[StoredChunk]) -> str | None:
        """The previous fragment with the same content digest (``start``, rows, documents)."""
        digest = hashlib.sha256(f"{start}\0".encode())
        for chunk in part:
            digest.update(self.sigs[chunk.chunk_id].encode("ascii"))
        digest.update(b"\0")
        for doc_id in dict.fromkeys(c.doc_id for c in part):
            digest.update(self.doc_sigs[doc_id].encode("ascii"))
        key = digest.hexdigest()
        self.digests.append(key)
        return self.old.fragments.get(key) if self.old is not None else None

    def checked(self, path: str) -> int | None:
        """The size of the previous build's file ``path`` when it is as that build left it
        (its inode, size and modification time; ``None``: read it to check it)."""
        line = self.old.files.get(path) if self.old is not None else None
        if not line or stat_line(self.previous / path) != line:
            return None
        return int(line.split()[1])

    def write_state(
        self, path: Path, salt: str, chunks: Sequence[StoredChunk], report: ShardReport,
        root: Path,
    ) -> None:
        """Record what this build wrote (``report``, under ``root``) in ``path``, for the next."""
        lengths, postings = self.current
        term_paths = [p for p in report.files if p.startswith("data/terms/t-")]
        fragment_paths = [p for p in report.files if p.startswith("data/text/f-")]
        head = {
            "salt": salt, "doc_keys": dict(self.keys), "chunk_ids": [c.chunk_id for c in chunks],
            "term_files": [[f, n, p] for (f, n), p in zip(self.groups, term_paths, strict=True)],
            "fragments": dict(zip(self.digests, fragment_paths, strict=True)),
            "files": {p: stat_line(root / p) for p in report.files},
        }
        write_state(path, head, lengths, postings)
