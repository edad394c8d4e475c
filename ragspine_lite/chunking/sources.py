"""Load ``.txt`` / ``.md`` / ``.html`` documents (+ front matter) into ``(text, DocumentMeta)``.

A document may start with a simple front-matter block::

    ---
    title: "ACME Hong Kong 2024 review"
    entity: ACME_HK
    period: 2024
    sensitivity: INTERNAL
    ---
    # Body starts here

Only ``key: value`` lines (blank lines and ``#`` comments allowed); values may be wrapped in
matching single or double quotes, and a `` # comment`` after a value is dropped, as in YAML
(quote a value that contains `` #``). Blank lines before the opening ``---`` are allowed.
Accepted keys: :data:`FRONT_MATTER_KEYS`. The body after the block is what gets chunked, so
paragraph numbers in locators count from the body.

Precedence for each field: front matter > keyword default passed by the caller > derived
default (``doc_id`` = path relative to ``root`` with ``/`` separators; ``title`` = first
``# `` heading of the body, else the file stem). ``sensitivity`` must be a label of the closed
vocabulary (:mod:`ragspine_lite.common.sensitivity`: NFKC, case-folded, stripped); anything
else, or two labels that disagree, raises :class:`SensitivityError` naming the file.

HTML (``.html``/``.htm``) is reduced to text first (:func:`extract_html`): one line per block
element, headings written as Markdown ``#`` lines, scripts and styles dropped. The extracted
text is the body, so chunk text stays a contiguous substring of it. ``<meta name="KEY"
content="...">`` (or ``property="KEY"``) tags for :data:`FRONT_MATTER_KEYS` act as front matter
(a leading ``---`` block wins, but every sensitivity label given, by front matter, ``<meta>`` or
``data-ragspine-meta``, must agree), ``<title>`` is
the derived title and ``<html lang>`` the derived language. Markup is pre-scanned once so that
a ``<`` which can never close (no ``>`` after it) is text: parsing stays linear in the input.
:func:`heading_sections` maps headings to paragraph spans and anchors (an HTML heading's
``id``, else a GitHub-style slug of its text).
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragspine_lite.chunking.chunking import DocumentMeta
from ragspine_lite.chunking.html_text import (  # re-exported: the HTML half moved there
    BODY_ATTR,  # noqa: F401
    FRONT_MATTER_KEYS,
    IGNORE_ATTR,  # noqa: F401
    META_ATTR,  # noqa: F401
    ExtractedHtml,
    extract_html,
)
from ragspine_lite.common.sensitivity import (
    SensitivityError,
    describe_value,
    parse_sensitivity,
)

__all__ = [
    "FRONT_MATTER_KEYS",
    "HTML_EXTENSIONS",
    "SUPPORTED_EXTENSIONS",
    "ExtractedHtml",
    "Section",
    "discover_documents",
    "document_from_text",
    "extract_html",
    "heading_sections",
    "load_document",
    "load_sections",
    "parse_front_matter",
    "slugify",
]

HTML_EXTENSIONS: tuple[str, ...] = (".html", ".htm")
SUPPORTED_EXTENSIONS: tuple[str, ...] = (".md", ".txt", *HTML_EXTENSIONS)
_FENCE = "---"


def _visible(line: str) -> str:
    """``line`` without format characters (BOM, zero-width space …) and surrounding blanks."""
    return "".join(ch for ch in line if unicodedata.category(ch) != "Cf").strip()


def _is_fence(line: str) -> bool:
    return _visible(line) == _FENCE


# A quoted value (then only a comment may follow), else everything before a " #" comment.
_VALUE_RE = re.compile(r"""\s*(?:(["'])(.*?)\1\s*(?:#.*)?|(.*?)\s*(?:(?<!\S)#.*)?)\s*""")


def _field_value(raw: str) -> str:
    """A front-matter value: quotes removed when they match, a `` # comment`` dropped."""
    match = _VALUE_RE.fullmatch(raw)
    if match is None:  # pragma: no cover - the pattern matches every string
        return raw.strip()
    return match.group(2) if match.group(1) else match.group(3)


def parse_front_matter(text: str, *, source: str = "<text>") -> tuple[dict[str, str], str]:
    """Split ``text`` (already LF-normalised) into ``(front_matter_fields, body)``.

    Text that does not start with a ``---`` line has no front matter: ``({}, text)``.
    Raises ``ValueError`` naming ``source`` for an unclosed block, a line that is not
    ``key: value``, a duplicate key or a key outside :data:`FRONT_MATTER_KEYS`.

    >>> parse_front_matter("---\\ntopic: 'REVENUE'\\n---\\nBody")
    ({'topic': 'REVENUE'}, 'Body')
    """
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if _visible(line)), len(lines))
    if start == len(lines) or not _is_fence(lines[start]):
        return {}, text
    close = next((i for i in range(start + 1, len(lines)) if _is_fence(lines[i])), None)
    if close is None:
        raise ValueError(
            f"{source}: front matter opened on line {start + 1} is never closed by a '---' line"
        )
    fields: dict[str, str] = {}
    for lineno in range(start + 1, close):
        raw = lines[lineno].strip()
        if not raw or raw.startswith("#"):
            continue
        key, sep, value = raw.partition(":")
        key = key.strip().lower()
        if not sep or not key:
            raise ValueError(
                f"{source}: front matter line {lineno + 1} is not 'key: value' (a line "
                f"{describe_value(raw)})"
            )
        if key not in FRONT_MATTER_KEYS:
            raise ValueError(
                f"{source}: unknown front matter key "
                f"{repr(key) if key.isidentifier() else describe_value(key)}; "
                f"valid keys: {', '.join(FRONT_MATTER_KEYS)}"
            )
        if key in fields:
            raise ValueError(f"{source}: front matter key {key!r} is given twice")
        fields[key] = _field_value(value)
    return fields, "\n".join(lines[close + 1 :])


def _first_heading(body: str) -> str:
    for line in body.split("\n"):
        stripped = line.strip()
        if stripped.startswith("# ") and stripped[2:].strip():
            return stripped[2:].strip()
    return ""


# ---------------------------------------------------------------- sections

_MD_HEADING_RE = re.compile(r"^(#{1,6})\s+(\S.*)$")
_SLUG_DROP_RE = re.compile(r"[^\w\- ]")


def slugify(text: str) -> str:
    """A GitHub-style heading anchor: lower case, punctuation dropped, spaces → ``-``.

    >>> slugify("ACME Hong Kong 2024: annual review"), slugify("营运 利润")
    ('acme-hong-kong-2024-annual-review', '营运-利润')
    """
    return _SLUG_DROP_RE.sub("", text.strip().lower()).replace(" ", "-")


@dataclass(frozen=True)
class Section:
    """A heading and the 1-based paragraph span it opens (up to the next heading)."""

    heading: str
    level: int
    anchor: str
    para_start: int
    para_end: int


def heading_sections(
    body: str, anchors: Mapping[int, str] | None = None, *, slugs: bool = True
) -> list[Section]:
    """Sections of ``body`` opened by Markdown ``#`` heading lines, in document order.

    Paragraph numbers count non-blank lines, as the chunkers do. A heading's anchor is
    ``anchors[paragraph]`` when given (HTML ``id``), else its slug, made unique with ``-1``,
    ``-2`` … suffixes (``slugs=False``: ``""``, the page itself — an HTML page has no
    anchor the extractor did not find). Text before the first heading belongs to no section.

    >>> [(s.heading, s.anchor, s.para_start, s.para_end)
    ...  for s in heading_sections("intro\\n# A b\\nx\\n## A b\\ny")]
    [('A b', 'a-b', 2, 3), ('A b', 'a-b-1', 4, 5)]
    """
    explicit = dict(anchors or {})
    paragraphs = [line.strip() for line in body.split("\n") if line.strip()]
    found: list[tuple[str, int, str, int]] = []
    used: dict[str, int] = {}
    for number, paragraph in enumerate(paragraphs, start=1):
        match = _MD_HEADING_RE.match(paragraph)
        if not match:
            continue
        heading = match.group(2).strip()
        anchor = explicit.get(number, "")
        if not anchor and slugs:
            base = slugify(heading)
            anchor = base if base not in used else f"{base}-{used[base]}"
            used[base] = used.get(base, 0) + 1
        found.append((heading, len(match.group(1)), anchor, number))
    sections = []
    for i, (heading, level, anchor, start) in enumerate(found):
        end = found[i + 1][3] - 1 if i + 1 < len(found) else len(paragraphs)
        sections.append(Section(heading, level, anchor, start, end))
    return sections


# ---------------------------------------------------------------- loading


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
    return _normalise(text)


def _normalise(text: str) -> str:
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


def _split_source(
    text: str, suffix: str, source: str
) -> tuple[dict[str, str], str, str, str, dict[int, str]]:
    """``(fields, body, derived_title, derived_language, anchors)`` of normalised text.

    ``fields["sensitivity"]``, when the file gives one, is already the canonical label.
    """
    fields, rest = parse_front_matter(text, source=source)
    labels = [fields["sensitivity"]] if "sensitivity" in fields else []
    if suffix.lower() not in HTML_EXTENSIONS:
        return _with_label(fields, labels, source), rest, "", "", {}
    extracted = extract_html(rest)
    if extracted.label_problem:  # a label that cannot be read never falls back to a default
        raise SensitivityError(f"{source}: {extracted.label_problem}")
    merged = {**extracted.meta, **fields}  # a front-matter block wins over <meta> tags
    labels += extracted.sensitivity_labels
    return (
        _with_label(merged, labels, source),
        extracted.text,
        extracted.title,
        extracted.language,
        extracted.anchors,
    )


def _with_label(fields: dict[str, str], labels: list[str], source: str) -> dict[str, str]:
    """``fields`` with its sensitivity made canonical; every label in ``labels`` must agree."""
    if not labels:
        return fields
    canonical = list(dict.fromkeys(parse_sensitivity(label, source=source) for label in labels))
    if len(canonical) > 1:
        raise SensitivityError(
            f"{source}: conflicting sensitivity labels {', '.join(map(repr, canonical))}; "
            "give one label"
        )
    return {**fields, "sensitivity": canonical[0]}


def _build_meta(
    fields: dict[str, str],
    body: str,
    *,
    default_doc_id: str,
    stem: str,
    derived_title: str,
    derived_language: str,
    doc_id: str | None,
    title: str,
    topic: str,
    entity: str,
    geography: str,
    period: str,
    language: str,
    sensitivity: str,
    source_locator_prefix: str,
    source: str,
) -> DocumentMeta:
    resolved_title = (
        fields.get("title") or title or derived_title or _first_heading(body) or stem
    )
    resolved_sensitivity = fields.get("sensitivity") or parse_sensitivity(
        sensitivity or "INTERNAL", source=f"{source} (default)"
    )
    return DocumentMeta(
        doc_id=fields.get("doc_id") or doc_id or default_doc_id,
        title=resolved_title,
        topic=fields.get("topic", topic),
        entity=fields.get("entity", entity),
        geography=fields.get("geography", geography),
        period=fields.get("period", period),
        language=fields.get("language", language) or derived_language,
        sensitivity=resolved_sensitivity,
        source_locator_prefix=source_locator_prefix,
    )


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
    """Read one ``.md``/``.txt``/``.html`` file (UTF-8, BOM stripped, CRLF → LF) → ``(body, meta)``.

    Keyword values are defaults that the file's front matter overrides. ``doc_id`` falls back
    to the path relative to ``root`` (``/``-separated; just the file name without a root).
    Raises ``ValueError`` naming the file for an unsupported extension, undecodable bytes or
    bad front matter (:class:`SensitivityError`, a ``ValueError``, for a sensitivity label
    outside the vocabulary or labels that disagree); ``OSError`` when the file cannot be read.
    """
    body, meta, _ = load_document_sections(
        path, root=root, doc_id=doc_id, title=title, topic=topic, entity=entity,
        geography=geography, period=period, language=language, sensitivity=sensitivity,
        source_locator_prefix=source_locator_prefix,
    )
    return body, meta


#: :func:`load_document`'s keyword defaults (what the file's front matter overrides).
_LOAD_DEFAULTS: dict[str, Any] = {
    "doc_id": None, "title": "", "topic": "", "entity": "", "geography": "", "period": "",
    "language": "", "sensitivity": "INTERNAL", "source_locator_prefix": "",
}


def load_document_sections(
    path: str | Path, *, root: str | Path | None = None, **defaults: Any
) -> tuple[str, DocumentMeta, list[Section]]:
    """:func:`load_document` (the same keyword ``defaults``) plus the body's
    :func:`load_sections`, from one read and parse."""
    p = Path(path)
    _check_extension(p)
    text = _read_text(p)
    fields, body, derived_title, derived_language, anchors = _split_source(
        text, p.suffix, str(p)
    )
    meta = _build_meta(
        fields,
        body,
        default_doc_id=_default_doc_id(p, Path(root) if root else None),
        stem=p.stem,
        derived_title=derived_title,
        derived_language=derived_language,
        source=str(p),
        **{**_LOAD_DEFAULTS, **defaults},
    )
    sections = heading_sections(body, anchors, slugs=p.suffix.lower() not in HTML_EXTENSIONS)
    return body, meta, sections


def document_from_text(
    text: str,
    *,
    name: str,
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
    """:func:`load_document` for text already in memory (e.g. a file dropped in a web page).

    ``name`` (a file name such as ``"notes.md"``) picks the format by its extension and is the
    default ``doc_id``; precedence and errors are those of :func:`load_document`.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    p = Path(name)
    _check_extension(p)
    fields, body, derived_title, derived_language, _ = _split_source(
        _normalise(text), p.suffix, name
    )
    return body, _build_meta(
        fields,
        body,
        default_doc_id=name,
        stem=p.stem,
        derived_title=derived_title,
        derived_language=derived_language,
        doc_id=doc_id,
        title=title,
        topic=topic,
        entity=entity,
        geography=geography,
        period=period,
        language=language,
        sensitivity=sensitivity,
        source_locator_prefix=source_locator_prefix,
        source=name,
    )


def load_sections(path: str | Path, *, text: str | None = None) -> list[Section]:
    """The :func:`heading_sections` of a document's body (read from ``path`` unless ``text``).

    HTML headings keep their ``id`` as the anchor (none: ``""``, the page).
    """
    p = Path(path)
    _check_extension(p)
    raw = _read_text(p) if text is None else _normalise(text)
    _, body, _, _, anchors = _split_source(raw, p.suffix, str(p))
    return heading_sections(body, anchors, slugs=p.suffix.lower() not in HTML_EXTENSIONS)


def _walk(folder: Path) -> Iterator[tuple[str, str, str, bool]]:
    """``(path relative to folder, "/"-separated; its folder; its name; whether it is a
    symbolic link)`` of the supported files under ``folder``, hidden entries skipped,
    symlinked directories not followed (one ``scandir`` per folder, no call per file)."""
    folders = [(str(folder), "")]
    while folders:
        dirpath, prefix = folders.pop()
        try:
            entries = list(os.scandir(dirpath))
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if _is_dir(entry):
                if not entry.is_symlink():
                    folders.append((entry.path, prefix + entry.name + "/"))
            elif _suffix(entry.name) in SUPPORTED_EXTENSIONS:
                yield prefix + entry.name, dirpath, entry.name, entry.is_symlink()


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _suffix(name: str) -> str:
    """``Path(name).suffix.lower()``, without building a path."""
    dot = name.rfind(".")
    return name[dot:].lower() if 0 < dot < len(name) - 1 else ""


def discover_documents(paths: Iterable[str | Path]) -> list[tuple[Path, Path]]:
    """Expand files and directories into ``(file, root)`` pairs, deterministically ordered.

    A directory is walked recursively (hidden entries skipped, symlinked directories not
    followed) for supported extensions, sorted by relative path; its ``root`` is the directory.
    A file given directly must have a supported extension; its ``root`` is its parent.
    A file reached more than once is kept at its first occurrence. Raises ``ValueError``
    for a missing path or an unsupported file named directly.
    """
    found: list[tuple[Path, Path]] = []
    seen: set[str] = set()

    real_dirs: dict[str, str] = {}

    def add(folder: str, name: str, root: Path, link: bool | None = None) -> None:
        # One realpath per folder: only a symlinked file needs its own.
        real = real_dirs.get(folder)
        if real is None:
            real = real_dirs[folder] = os.path.realpath(folder)
        child = os.path.join(folder, name)
        link = os.path.islink(child) if link is None else link
        key = os.path.realpath(child) if link else os.path.join(real, name)
        if key not in seen:  # a file reached twice (dir + file) is loaded once
            seen.add(key)
            found.append((Path(child), root))

    for item in paths:
        p = Path(item)
        if p.is_dir():
            for _, folder, name, link in sorted(_walk(p)):
                add(folder, name, p, link)
        elif p.exists():
            _check_extension(p)
            add(str(p.parent), p.name, p.parent)
        else:
            raise ValueError(f"no such file or directory: {str(p)!r}")
    return found
