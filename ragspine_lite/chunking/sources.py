"""Load ``.txt`` / ``.md`` documents (with optional front matter) into ``(text, DocumentMeta)``.

A document may start with a simple front-matter block::

    ---
    title: "ACME Hong Kong 2024 review"
    entity: ACME_HK
    period: 2024
    sensitivity: INTERNAL
    ---
    # Body starts here

Only ``key: value`` lines (blank lines and ``#`` comments allowed); values may be wrapped in
matching single or double quotes. Accepted keys: :data:`FRONT_MATTER_KEYS`. The body after
the block is what gets chunked, so paragraph numbers in locators count from the body.

Precedence for each field: front matter > keyword default passed by the caller > derived
default (``doc_id`` = path relative to ``root`` with ``/`` separators; ``title`` = first
``# `` heading of the body, else the file stem). ``sensitivity`` is stripped and upper-cased.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ragspine_lite.chunking.chunking import DocumentMeta

__all__ = [
    "FRONT_MATTER_KEYS",
    "SUPPORTED_EXTENSIONS",
    "discover_documents",
    "load_document",
    "parse_front_matter",
]

SUPPORTED_EXTENSIONS: tuple[str, ...] = (".md", ".txt")
FRONT_MATTER_KEYS: tuple[str, ...] = (
    "doc_id",
    "title",
    "topic",
    "entity",
    "geography",
    "period",
    "language",
    "sensitivity",
)
_FENCE = "---"


def _is_fence(line: str) -> bool:
    return line.rstrip() == _FENCE


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in ("'", '"'):
        return value[1:-1]
    return value


def parse_front_matter(text: str, *, source: str = "<text>") -> tuple[dict[str, str], str]:
    """Split ``text`` (already LF-normalised) into ``(front_matter_fields, body)``.

    Text that does not start with a ``---`` line has no front matter: ``({}, text)``.
    Raises ``ValueError`` naming ``source`` for an unclosed block, a line that is not
    ``key: value``, a duplicate key or a key outside :data:`FRONT_MATTER_KEYS`.

    >>> parse_front_matter("---\\ntopic: 'REVENUE'\\n---\\nBody")
    ({'topic': 'REVENUE'}, 'Body')
    """
    lines = text.split("\n")
    if not lines or not _is_fence(lines[0]):
        return {}, text
    close = next((i for i in range(1, len(lines)) if _is_fence(lines[i])), None)
    if close is None:
        raise ValueError(f"{source}: front matter opened on line 1 is never closed by a '---' line")
    fields: dict[str, str] = {}
    for lineno in range(1, close):
        raw = lines[lineno].strip()
        if not raw or raw.startswith("#"):
            continue
        key, sep, value = raw.partition(":")
        key = key.strip().lower()
        if not sep or not key:
            raise ValueError(
                f"{source}: front matter line {lineno + 1} is not 'key: value': {raw!r}"
            )
        if key not in FRONT_MATTER_KEYS:
            raise ValueError(
                f"{source}: unknown front matter key {key!r}; "
                f"valid keys: {', '.join(FRONT_MATTER_KEYS)}"
            )
        if key in fields:
            raise ValueError(f"{source}: front matter key {key!r} is given twice")
        fields[key] = _unquote(value.strip())
    return fields, "\n".join(lines[close + 1 :])


def _first_heading(body: str) -> str:
    for line in body.split("\n"):
        stripped = line.strip()
        if stripped.startswith("# ") and stripped[2:].strip():
            return stripped[2:].strip()
    return ""


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except IsADirectoryError as exc:
        raise ValueError(f"{str(path)!r} is a directory, not a document file") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{str(path)!r} is not valid UTF-8 text (byte {exc.start}: {exc.reason})"
        ) from exc
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _check_extension(path: Path) -> None:
    if path.suffix.lower() not in SUPPORTED_EXTENSIONS:
        raise ValueError(
            f"unsupported file type {path.suffix or '(none)'!r} for {str(path)!r}; "
            f"supported: {', '.join(SUPPORTED_EXTENSIONS)}"
        )


def _default_doc_id(path: Path, root: Path | None) -> str:
    if root is None:
        return path.name
    try:
        rel = path.relative_to(root)
    except ValueError:
        rel = Path(os.path.relpath(path, root))
    return rel.as_posix()


def load_document(
    path: str | Path,
    *,
    root: str | Path | None = None,
    doc_id: str | None = None,
    title: str = "",
    topic: str = "",
    entity: str = "",
    geography: str = "",
    period: str = "",
    language: str = "",
    sensitivity: str = "INTERNAL",
    source_locator_prefix: str = "",
) -> tuple[str, DocumentMeta]:
    """Read one ``.md``/``.txt`` file (UTF-8, BOM stripped, CRLF → LF) → ``(body, meta)``.

    Keyword values are defaults that the file's front matter overrides. ``doc_id`` falls back
    to the path relative to ``root`` (``/``-separated; just the file name without a root).
    Raises ``ValueError`` naming the file for an unsupported extension, undecodable bytes or
    bad front matter; ``OSError`` when the file cannot be read.
    """
    p = Path(path)
    _check_extension(p)
    text = _read_text(p)
    fields, body = parse_front_matter(text, source=str(p))
    resolved_id = fields.get("doc_id") or doc_id or _default_doc_id(p, Path(root) if root else None)
    resolved_title = fields.get("title") or title or _first_heading(body) or p.stem
    resolved_sensitivity = (fields.get("sensitivity") or sensitivity or "INTERNAL").strip().upper()
    meta = DocumentMeta(
        doc_id=resolved_id,
        title=resolved_title,
        topic=fields.get("topic", topic),
        entity=fields.get("entity", entity),
        geography=fields.get("geography", geography),
        period=fields.get("period", period),
        language=fields.get("language", language),
        sensitivity=resolved_sensitivity,
        source_locator_prefix=source_locator_prefix,
    )
    return body, meta


def discover_documents(paths: Iterable[str | Path]) -> list[tuple[Path, Path]]:
    """Expand files and directories into ``(file, root)`` pairs, deterministically ordered.

    A directory is walked recursively (hidden entries skipped, symlinked directories not
    followed) for supported extensions, sorted by relative path; its ``root`` is the directory.
    A file given directly must have a supported extension; its ``root`` is its parent.
    A file reached more than once is kept at its first occurrence. Raises ``ValueError``
    for a missing path or an unsupported file named directly.
    """
    found: list[tuple[Path, Path]] = []
    seen: set[Path] = set()

    def add(child: Path, root: Path) -> None:
        key = child.resolve()
        if key not in seen:  # a file reached twice (dir + file) is loaded once
            seen.add(key)
            found.append((child, root))

    for item in paths:
        p = Path(item)
        if p.is_dir():
            batch: list[tuple[str, Path]] = []
            for dirpath, dirnames, filenames in os.walk(p):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                for name in filenames:
                    if name.startswith("."):
                        continue
                    child = Path(dirpath) / name
                    if child.suffix.lower() in SUPPORTED_EXTENSIONS:
                        batch.append((child.relative_to(p).as_posix(), child))
            for _, child in sorted(batch):
                add(child, p)
        elif p.exists():
            _check_extension(p)
            add(p, p.parent)
        else:
            raise ValueError(f"no such file or directory: {str(p)!r}")
    return found
