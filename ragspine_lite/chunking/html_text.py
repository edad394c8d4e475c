"""HTML reduced to text lines for :mod:`ragspine_lite.chunking.sources` (:func:`extract_html`).

One line per block element, headings written as Markdown ``#`` lines, scripts, styles and page
chrome dropped; ``<meta>`` tags and ``data-ragspine-meta`` elements give metadata fields.
Markup is pre-scanned once so that a ``<`` which can never close is text: parsing stays linear.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from html.parser import HTMLParser

__all__ = [
    "BODY_ATTR",
    "FRONT_MATTER_KEYS",
    "IGNORE_ATTR",
    "META_ATTR",
    "ExtractedHtml",
    "extract_html",
]

#: The metadata keys a document may set (front matter, ``<meta>``, ``data-ragspine-meta``).
FRONT_MATTER_KEYS: tuple[str, ...] = (
    "doc_id", "title", "topic", "entity", "geography", "period", "language", "sensitivity",
)

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
