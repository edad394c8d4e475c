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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from ragspine_lite.chunking.chunking import DocumentMeta
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


# ---------------------------------------------------------------- HTML

# Elements whose start or end closes the current line of text.
_BLOCK_TAGS = frozenset(
    "address article aside blockquote body br caption dd details dialog div dl dt fieldset "
    "figcaption figure footer form h1 h2 h3 h4 h5 h6 header hgroup hr li main menu nav ol p "
    "pre section summary table tbody td tfoot th thead tr ul".split()
)
# Elements whose content is never text of the document.
_SKIP_TAGS = frozenset(
    "script style template noscript svg math canvas iframe object embed select".split()
)
_VOID_TAGS = frozenset(
    "area base br col embed hr img input link meta param source track wbr".split()
)
_HEADING_TAGS = {f"h{n}": n for n in range(1, 7)}
_SPACE_RE = re.compile(r"\s+")
# Generators' heading self-links (MkDocs/Sphinx "headerlink", Docusaurus "hash-link",
# VitePress "header-anchor", Hugo themes' "anchor"/"self-link"): a class token with one of
# these names; such a link's ``href="#x"`` is the heading's anchor when it has no ``id``.
_PERMALINK_CLASSES = (
    "headerlink", "hash-link", "header-anchor", "anchor", "permalink", "self-link",
)
# The text of an in-page link that is only a permalink sign ("¶", "#", "§", "🔗", a
# zero-width space): never text of the document.
_GLYPH_RE = re.compile("[\\s¶§#\U0001f517\ufe0e\ufe0f\u200b-\u200d\u2060\ufeff]*")
# Generated noise around the text, by class token: line-number gutters of highlighted code
# (Pygments/Sphinx/MkDocs, Hugo's Chroma, Prism), VitePress' code-language label, and the
# in-page tables of contents (Docusaurus) that repeat the headings.
_NOISE_CLASSES = frozenset(
    "linenos linenodiv lineno lnt ln line-numbers-rows lang table-of-contents toc".split()
)
# ARIA landmarks of page chrome (Sphinx's sidebars and "related" bars are divs with a role).
_CHROME_ROLES = frozenset(("navigation", "banner", "contentinfo", "search"))


@dataclass(frozen=True)
class ExtractedHtml:
    """What :func:`extract_html` found: the text and the document-level hints.

    ``anchors`` maps a 1-based paragraph number of ``text`` (a heading line) to the heading's
    ``id`` attribute (or the ``id``/``name`` of an anchor inside it).
    """

    text: str
    title: str = ""
    language: str = ""
    meta: dict[str, str] = field(default_factory=dict)
    anchors: dict[int, str] = field(default_factory=dict)
    sensitivity_labels: tuple[str, ...] = ()
    #: Why a ``data-ragspine-meta="sensitivity"`` label cannot be read with certainty (the
    #: first one: an element not closed by its own end tag, a void element, too much text).
    label_problem: str = ""


# Page chrome skipped by default (an element marked data-ragspine-body is kept).
_CHROME_TAGS = frozenset(("nav", "header", "footer"))
BODY_ATTR = "data-ragspine-body"
IGNORE_ATTR = "data-ragspine-ignore"
META_ATTR = "data-ragspine-meta"
# How far up the open elements an end tag looks for its start tag (keeps parsing linear).
_CLOSE_SEARCH = 64
# Most characters a data-ragspine-meta capture keeps (longer text is cut), and most a
# sensitivity label may hold. They bound the work per capture: nested captures stay linear.
_CAPTURE_LIMIT = 1000
_LABEL_LIMIT = 200
_META_SPEC_RE = re.compile(r"^([A-Za-z_]+)(?:\[([\w:-]+)\]|:(.*))?$", re.DOTALL)


def _label_problem(tag: str, closed_by: str, size: int) -> str:
    """Why a ``data-ragspine-meta="sensitivity"`` element on ``tag`` cannot be read."""
    where = f"the sensitivity label in <{tag}>"
    if tag in _VOID_TAGS:
        return f'{where} has no text (a void element); use data-ragspine-meta="sensitivity[ATTR]"'
    if closed_by == tag:
        return f"{where} holds {size} characters, not a label"
    ended = f"ends at </{closed_by}>" if closed_by else "is never closed"
    return (
        f"{where} {ended}, so it cannot be read with certainty; close it with </{tag}> "
        'or use <meta name="sensitivity" content="...">'
    )


def _is_permalink(classes: list[str]) -> bool:
    return any(name in token for token in classes for name in _PERMALINK_CLASSES)


@dataclass
class _Open:
    """An open element: its tag, ``id``, and what it switches on for its content."""

    tag: str
    element_id: str = ""
    skip: bool = False
    body: bool = False
    capture: str = ""  # a data-ragspine-meta key that takes this element's text
    log_at: int = 0  # where its text starts in the parser's capture log …
    chars_at: int = 0  # … and how many characters the log had taken in by then
    hash_link: bool = False  # an ``<a href="#…">``: a text of only a permalink sign is dropped


class _TextExtractor(HTMLParser):
    """Collects one line per block of text; headings become ``#``-prefixed lines.

    ``body_only``: only text inside ``data-ragspine-body`` elements is kept.
    """

    def __init__(self, *, body_only: bool = False) -> None:
        super().__init__(convert_charrefs=True)
        self.body_only = body_only
        self.lines: list[str] = []
        self.anchors: dict[int, str] = {}
        self.meta: dict[str, str] = {}
        self.sensitivity_labels: list[str] = []  # every label the page gives, to check they agree
        self.title = ""
        self.language = ""
        self.saw_body = False
        self._buffer: list[str] = []
        self._open: list[_Open] = []
        self._skip = 0  # open elements whose content is not text of the document
        self._body = 0  # open data-ragspine-body elements
        self.label_problem = ""  # the first sensitivity label that cannot be read
        self._log: list[str] = []  # text seen while a capture is open (shared by all of them)
        self._logged = 0  # characters ever appended to the log
        self._capturing = 0  # open captures
        self._pre = 0
        self._in_title = False
        self._title_parts: list[str] = []
        self._heading_level = 0
        self._heading_id = ""
        self._heading_fallback = ""  # the nearest id around the heading, if it has none
        self._last_id = ""  # id of an element just before, with no text since (<a id> <h2>)
        self._hash_links = 0  # open <a href="#…"> elements

    # -- helpers ------------------------------------------------------------------------
    def _collecting(self) -> bool:
        return not self._skip and (self._body > 0 or not self.body_only)

    def _flush(self) -> None:
        raw = "".join(self._buffer)
        self._buffer = []
        if self._heading_level:
            text = _SPACE_RE.sub(" ", raw).strip()
            if text:
                self.lines.append(f"{'#' * self._heading_level} {text}")
                anchor = self._heading_id or self._heading_fallback
                if anchor:
                    self.anchors[len(self.lines)] = anchor
            return
        if self._pre:
            pieces = raw.split("\n")
        else:
            pieces = [raw]
        for piece in pieces:
            text = _SPACE_RE.sub(" ", piece).strip()
            if text:
                self.lines.append(text)

    def _skips(
        self, tag: str, values: Mapping[str, str], classes: list[str], *, body: bool
    ) -> bool:
        """Whether an element's content is not text of the document: scripts and the like,
        ignored parts, page chrome (unless marked as the body) and generated noise."""
        role = values.get("role", "").strip().lower()
        chrome = (tag in _CHROME_TAGS and not self._in_content(tag)) or role in _CHROME_ROLES
        return (
            tag in _SKIP_TAGS
            or IGNORE_ATTR in values
            or (chrome and not body)
            or not _NOISE_CLASSES.isdisjoint(classes)
        )

    def _in_content(self, tag: str) -> bool:
        """A ``<header>`` inside an article, main or section heads the content (Docusaurus
        puts a page's ``<h1>`` there): it is not page chrome."""
        return tag == "header" and any(o.tag in ("article", "main", "section") for o in self._open)

    def _nearest_id(self) -> str:
        if self._last_id:
            return self._last_id
        return next((o.element_id for o in reversed(self._open) if o.element_id), "")

    def _set_meta(self, key: str, value: str) -> None:
        """A metadata field from ``<meta>`` or ``data-ragspine-meta`` (the first one wins;
        every sensitivity label is kept, so that labels which disagree fail the document)."""
        if key not in FRONT_MATTER_KEYS:
            return
        if key == "sensitivity":
            self.sensitivity_labels.append(value.strip())
        self.meta.setdefault(key, value.strip())

    def _meta(self, spec: str, values: Mapping[str, str], entry: _Open) -> None:
        """``data-ragspine-meta``: ``key`` (the element's text), ``key[attr]`` or
        ``key:value, key2:value2``. Keys outside :data:`FRONT_MATTER_KEYS` are ignored."""
        for item in (spec.split(",") if ":" in spec and "[" not in spec else [spec]):
            match = _META_SPEC_RE.match(item.strip())
            if match is None:
                continue
            key = match.group(1).lower()
            if key not in FRONT_MATTER_KEYS:
                continue
            if match.group(2) is not None:
                self._set_meta(key, values.get(match.group(2).lower(), ""))
            elif match.group(3) is not None:
                self._set_meta(key, match.group(3))
            elif not entry.capture:
                entry.capture = key
                entry.log_at, entry.chars_at = len(self._log), self._logged
                self._capturing += 1

    def _captured(self, entry: _Open, limit: int) -> str:
        """The text ``entry`` captured, cut after ``limit`` characters (log pieces are
        non-empty, so this reads at most ``limit`` of them: linear however deep)."""
        out: list[str] = []
        for i in range(entry.log_at, len(self._log)):
            out.append(self._log[i][:limit])
            limit -= len(out[-1])
            if limit <= 0:
                break
        return _SPACE_RE.sub(" ", "".join(out))

    def _end_capture(self, entry: _Open, *, closed_by: str) -> None:
        """Set the field ``entry`` captured, now that it ends (``closed_by``: the end tag
        that ended it, ``""`` at the end of the document or for a void element). A
        sensitivity label that does not end at its own end tag cannot be read with
        certainty: it is a label problem, never a missing label."""
        size = self._logged - entry.chars_at
        key = entry.capture
        if key != "sensitivity":
            if closed_by and key not in self.meta:  # the first one wins: read it once
                self._set_meta(key, self._captured(entry, _CAPTURE_LIMIT))
        elif closed_by == entry.tag and size <= _LABEL_LIMIT:
            self._set_meta(key, self._captured(entry, _LABEL_LIMIT))
        elif not self.label_problem:
            self.label_problem = _label_problem(entry.tag, closed_by, size)
        self._capturing -= 1
        if not self._capturing:
            self._log.clear()

    def _push(self, entry: _Open) -> None:
        self._open.append(entry)
        self._skip += entry.skip
        self._body += entry.body
        self._hash_links += entry.hash_link

    def _pop_to(self, tag: str) -> bool:
        """Close ``tag`` and every element opened inside it; ``False`` if it is not open."""
        floor = max(0, len(self._open) - _CLOSE_SEARCH)
        for i in range(len(self._open) - 1, floor - 1, -1):
            if self._open[i].tag == tag:
                break
        else:
            return False
        while len(self._open) > i:
            entry = self._open.pop()
            self._skip -= entry.skip
            self._body -= entry.body
            self._hash_links -= entry.hash_link
            if entry.capture:
                self._end_capture(entry, closed_by=tag)
        return True

    # -- parser callbacks ---------------------------------------------------------------
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k.lower(): (v or "") for k, v in attrs}
        if tag == "html" and values.get("lang") and not self.language:
            self.language = values["lang"].strip().split("-")[0].lower()
        if tag == "meta":
            content = values.get("content", "")
            for key in {values.get(a, "").strip().lower() for a in ("name", "property")}:
                self._set_meta(key, content)
            return
        if tag == "title":
            self._in_title = True
            return
        element_id = values.get("id", "").strip()
        entry = _Open(tag, element_id)
        if META_ATTR in values:
            self._meta(values[META_ATTR], values, entry)
        if tag in _VOID_TAGS:
            if entry.capture:  # a void element has no text to capture
                self._end_capture(entry, closed_by="")
            if element_id and self._collecting():
                self._last_id = element_id
            return
        entry.body = BODY_ATTR in values
        classes = values.get("class", "").split()
        entry.hash_link = tag == "a" and values.get("href", "").startswith("#")
        entry.skip = self._skips(tag, values, classes, body=entry.body)
        was_collecting = self._collecting()
        if entry.body and not self._skip:
            self.saw_body = True
        if tag in _HEADING_TAGS and was_collecting and not entry.skip:
            self._flush()
            self._heading_level = _HEADING_TAGS[tag]
            self._heading_id = element_id
            self._heading_fallback = self._nearest_id()
            self._last_id = ""
        elif self._heading_level and tag == "a" and not self._heading_id:
            self._heading_id = (element_id or values.get("name") or "").strip()
            if not self._heading_id and entry.hash_link and _is_permalink(classes):
                self._heading_id = values["href"][1:].strip()
        elif tag in _BLOCK_TAGS and was_collecting:
            self._flush()
            if tag == "pre":
                self._pre += 1
        if was_collecting and self._heading_level == 0 and element_id:
            self._last_id = element_id
        elif was_collecting and tag == "a" and values.get("name"):
            self._last_id = values["name"].strip()
        self._push(entry)
        if not was_collecting and self._collecting():
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
            if not self.title:
                self.title = _SPACE_RE.sub(" ", "".join(self._title_parts)).strip()
            return
        was_collecting = self._collecting()
        if tag in _HEADING_TAGS and self._heading_level and was_collecting:
            self._flush()
            self._heading_level = 0
            self._heading_id = self._heading_fallback = ""
        elif tag in _BLOCK_TAGS and was_collecting:
            self._flush()
            if tag == "pre" and self._pre:
                self._pre -= 1
        if not self._pop_to(tag):
            return
        if was_collecting and not self._collecting():
            self._flush()

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self._title_parts.append(data)
            return
        if self._hash_links and data.strip() and _GLYPH_RE.fullmatch(data):
            return  # a permalink sign (a blank between words inside a link stays)
        if self._capturing and data:
            self._log.append(data)
            self._logged += len(data)
        if self._collecting():
            self._buffer.append(data)
            if data.strip():
                self._last_id = ""

    def close(self) -> None:
        super().close()
        self._flush()
        for entry in reversed(self._open):  # never closed: only a label problem matters
            if entry.capture:
                self._end_capture(entry, closed_by="")


_COMMENT_OPEN_RE = re.compile(r"<!--")
_COMMENT_CLOSE_RE = re.compile(r"--!?>")
_MARKED_SECTION_RE = re.compile(r"<!\[")


def _defuse_unclosable(markup: str) -> str:
    """``markup`` with every ``<`` that can never be closed written as ``&lt;`` (so: text).

    ``html.parser`` rescans the rest of the input for each tag, comment or declaration that
    it cannot close, which is quadratic time on input like ``"<a " * 16000``. A ``<`` after
    the last ``>``, and a ``<!--`` after the last ``-->``, can never close: one pass turns
    them into the text the parser would have made of them. ``<![`` opens a bogus comment up
    to the next ``>`` (as in browsers) instead of a marked section, which ``html.parser``
    cannot always parse.
    """
    last_gt = markup.rfind(">")
    head, tail = markup[: last_gt + 1], markup[last_gt + 1 :].replace("<", "&lt;")
    closes = [m.start() for m in _COMMENT_CLOSE_RE.finditer(head)]
    last_close = closes[-1] if closes else -1
    cut = max(last_close - 1, 0)  # a "<!--" at i closes iff a "-->" starts at i + 2 or later
    if _COMMENT_OPEN_RE.search(head, cut):
        head = head[:cut] + head[cut:].replace("<!--", "&lt;!--")
    return _MARKED_SECTION_RE.sub("<!_[", head) + tail


def extract_html(markup: str) -> ExtractedHtml:
    """Reduce HTML to text lines (stdlib ``html.parser``; never raises on malformed markup).

    Every block element (``p``, ``li``, ``td``, ``div`` …) ends a line; whitespace inside a line
    is collapsed except in ``<pre>``, whose lines are kept. ``h1``–``h6`` become ``#``–``######``
    lines. ``script``/``style``/``template``/``svg`` … and ``<head>`` text are dropped, and so
    are ``<nav>``, ``<header>``, ``<footer>`` and any element marked ``data-ragspine-ignore``.
    When an element is marked ``data-ragspine-body``, only such elements' text is kept.
    ``data-ragspine-meta="title"`` takes the element's text as a metadata field (also
    ``"period:2024, entity:ACME"`` and ``"title[content]"`` for an attribute); a ``<meta>`` tag
    or ``data-ragspine-meta`` seen first wins. A heading's anchor is its ``id``, else the ``id``
    or ``name`` of an anchor in it or right before it, else the nearest enclosing ``id``.

    >>> extract_html('<h2 id="g">Growth</h2><p>Revenue <b>grew</b>.</p>').text
    '## Growth\\nRevenue grew.'
    >>> extract_html('<nav>Home</nav><main data-ragspine-body><p>Only this</p></main><p>x</p>').text
    'Only this'
    """
    markup = _defuse_unclosable(markup)
    parser = _parse_html(markup, body_only=BODY_ATTR in markup)
    if parser.body_only and not parser.saw_body:  # the attribute name was only text
        parser = _parse_html(markup, body_only=False)
    return ExtractedHtml(
        text="\n".join(parser.lines),
        title=parser.title,
        language=parser.language,
        meta=dict(parser.meta),
        anchors=dict(parser.anchors),
        sensitivity_labels=tuple(parser.sensitivity_labels),
        label_problem=parser.label_problem,
    )


def _parse_html(markup: str, *, body_only: bool) -> _TextExtractor:
    parser = _TextExtractor(body_only=body_only)
    parser.feed(markup)
    parser.close()
    return parser


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
    p = Path(path)
    _check_extension(p)
    text = _read_text(p)
    fields, body, derived_title, derived_language, _ = _split_source(text, p.suffix, str(p))
    meta = _build_meta(
        fields,
        body,
        default_doc_id=_default_doc_id(p, Path(root) if root else None),
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
        source=str(p),
    )
    return body, meta


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
