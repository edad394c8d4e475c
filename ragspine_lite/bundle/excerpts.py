"""What a hit shows: the query's spans highlighted (UTF-16 offsets, as the page counts) and
an excerpt of about :data:`EXCERPT_WORDS` words around the best match, markdown made plain."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ragspine_lite.common.glossary import DEFAULT_GLOSSARY, Glossary, find_terms
from ragspine_lite.text.markdown import BULLET, FENCE, HEADING, IMAGE, NUMBERED, QUOTE

__all__ = [
    "EXCERPT_WORDS",
    "excerpt",
    "highlight_spans",
    "match_spans",
    "section_of",
    "with_synonyms",
]

_LOCATOR_PARA_RE = re.compile(r"#para(\d+)(?:-(\d+))?$")

_ASCII_TOKEN_RE = re.compile(r"[a-z0-9]+")
_CJK_RUN_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_ASTRAL_RE = re.compile("[\U00010000-\U0010ffff]")
# Function words that would light up every line; highlighting only (BM25 still scores them).
_HIGHLIGHT_SKIP = frozenset(
    "a an and are as at by did do does for from how in is it of on or the to was were what "
    "when where which who why with".split()
)


# ---------------------------------------------------------------- highlighting


def _utf16_offsets(text: str) -> list[int] | None:
    """Code-point index → UTF-16 index, or ``None`` when they coincide (no astral chars)."""
    if text.isascii() or _ASTRAL_RE.search(text) is None:
        return None
    out = [0]
    for c in text:
        out.append(out[-1] + (2 if ord(c) > 0xFFFF else 1))
    return out


def highlight_spans(query: str, text: str) -> list[list[int]]:
    """``[start, end)`` spans of ``text`` (UTF-16 units, as JS strings count) to highlight.

    ASCII query words (not one-letter or function words such as "in", "why") match whole ASCII
    words, case-insensitively; a Chinese run of the query matches by its bigrams (a single
    character by itself). Overlapping spans are merged.

    >>> highlight_spans("hong kong revenue", "Hong Kong revenue rose; Kongs not.")
    [[0, 4], [5, 9], [10, 17]]
    >>> highlight_spans("营运利润", "营运利润回升，利率下行")
    [[0, 4]]
    """
    return _as_utf16(text, match_spans(query, text))


def _as_utf16(text: str, spans: list[list[int]]) -> list[list[int]]:
    offsets = _utf16_offsets(text)
    if offsets is None:
        return spans
    return [[offsets[s], offsets[e]] for s, e in spans]


def match_spans(query: str, text: str) -> list[list[int]]:
    """:func:`highlight_spans` in code points."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a character that lower-cases to two: keep offsets aligned
        lowered = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)
    q = query.lower()
    spans: list[tuple[int, int]] = []
    words = sorted(
        {w for w in _ASCII_TOKEN_RE.findall(q) if len(w) > 1 and w not in _HIGHLIGHT_SKIP},
        key=len,
        reverse=True,
    )
    if words:
        pattern = re.compile(
            r"(?<![a-z0-9])(?:" + "|".join(re.escape(w) for w in words) + r")(?![a-z0-9])"
        )
        spans.extend(m.span() for m in pattern.finditer(lowered))
    grams: set[str] = set()
    for run in _CJK_RUN_RE.findall(q):
        if len(run) == 1:
            grams.add(run)
        grams.update(run[i : i + 2] for i in range(len(run) - 1))
    for gram in grams:
        start = lowered.find(gram)
        while start != -1:
            spans.append((start, start + len(gram)))
            start = lowered.find(gram, start + 1)
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


# Markdown left in chunk text: heading/list/quote markers, emphasis, code ticks, links, images.
_MD_LINE_RE = re.compile(rf"^\s*(?:{HEADING}|{BULLET}|{NUMBERED}|{QUOTE})", re.MULTILINE)
_HEADING_LINE_RE = re.compile(rf"^\s*{HEADING}")
# A code fence line with its info string ("```javascript"): markup, not text of the excerpt.
_FENCE_LINE_RE = re.compile(rf"^\s*{FENCE}[^`]*$")
_MD_IMAGE_RE = re.compile(IMAGE)
_MD_LINK_RE = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_MD_MARK_RE = re.compile(r"(\*\*|__|`)|(?<![\w*])[*_](?=\S)|(?<=\S)[*_](?![\w*])")
_TAG_RE = re.compile(r"</?[A-Za-z][^<>]*>")
_CJK_CLASS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# A unit of excerpt length: one CJK character (half a word) or a run of other non-space text.
_UNIT_RE = re.compile(f"[{_CJK_CLASS}]|[^\\s{_CJK_CLASS}]+")
EXCERPT_WORDS = 30


def _plain(text: str, query: str) -> str:
    """Chunk text without Markdown/HTML markup (code fences and their info strings too), on
    one line; heading lines that do not match ``query`` are left out (the result shows its
    section heading apart) unless nothing else is left."""
    text = "\n".join(line for line in text.split("\n") if not _FENCE_LINE_RE.match(line))
    body = "\n".join(
        line for line in text.split("\n")
        if not _HEADING_LINE_RE.match(line) or match_spans(query, line)
    )
    out = _MD_LINE_RE.sub("", body if body.strip() else text)
    out = _MD_IMAGE_RE.sub(r"\1", out)
    out = _MD_LINK_RE.sub(r"\1", out)
    out = _TAG_RE.sub(" ", out)
    out = _MD_MARK_RE.sub("", out)
    return " ".join(out.split())


def with_synonyms(query: str, glossary: Glossary = DEFAULT_GLOSSARY) -> str:
    """``query`` plus the glossary synonyms of its terms (other languages included), for
    highlighting: "revenue" also lights up "营收", "hk" also "香港".

    >>> with_synonyms("hk revenue")
    'hk revenue 香港 营收'
    >>> with_synonyms("营收")
    '营收 revenue'

    """
    lowered = query.lower()
    extra: list[str] = []
    for synonyms in (glossary.entity_synonyms, glossary.metric_synonyms):
        for match in find_terms(lowered, synonyms):
            chinese = bool(_CJK_RUN_RE.search(match.term))
            for term, code in synonyms.items():
                if code != match.code or bool(_CJK_RUN_RE.search(term)) == chinese:
                    continue  # the same language highlights by itself
                extra.extend([term] if chinese else _CJK_RUN_RE.findall(term))
    return " ".join([query, *dict.fromkeys(t for t in extra if t.lower() not in lowered)])


def excerpt(
    query: str, text: str, *, words: int = EXCERPT_WORDS, start_line: int = 0
) -> dict[str, Any]:
    """About ``words`` words of ``text`` around its best match for ``query`` →
    ``{"text", "highlights"}`` (UTF-16 spans, as :func:`highlight_spans`).

    Markdown/HTML markup and heading lines without a match are stripped; a CJK character
    counts as half a word. The excerpt starts at the ``start_line``-th non-blank line (the
    hit's section), a few words before the run of matches it covers best (at the start when
    nothing matches); ``…`` marks cut ends.

    >>> excerpt("revenue", "# Review\\nOne two three four five. **Revenue** grew 12%.", words=5)
    {'text': '… five. Revenue grew 12%.', 'highlights': [[8, 15]]}
    """
    lines = [line for line in text.split("\n") if line.strip()]
    first_line = min(max(start_line, 0), max(len(lines) - 1, 0))
    plain = _plain("\n".join(lines[first_line:]), query)
    units = [(m.start(), m.end(), 0.5 if len(m.group()) == 1 and _CJK_RUN_RE.match(m.group())
              else 1.0) for m in _UNIT_RE.finditer(plain)]
    if not units:
        return {"text": "", "highlights": []}
    spans = match_spans(query, plain)
    hit_units = sorted(
        {i for s, e in spans for i, (a, b, _) in enumerate(units) if a < e and s < b}
    )

    def window(first: int) -> int:
        """Index after the last unit of a ``words``-long window starting at ``first``."""
        budget, end = float(words), first
        while end < len(units) and budget >= units[end][2]:
            budget -= units[end][2]
            end += 1
        return end

    best_start, best_count = 0, -1
    lead = words / 5
    for hit in hit_units or [0]:
        first, back = hit, 0.0
        while first > 0 and back + units[first - 1][2] <= lead:
            back += units[first - 1][2]
            first -= 1
        end = window(first)
        count = sum(1 for i in hit_units if first <= i < end)
        if count > best_count:
            best_start, best_count = first, count
    end = window(best_start)
    snippet = plain[units[best_start][0] : units[end - 1][1]]
    if best_start > 0 or first_line > 0:
        snippet = ("…" if _CJK_RUN_RE.match(snippet) else "… ") + snippet
    if end < len(units):
        snippet += "…" if _CJK_RUN_RE.match(snippet[-1]) else " …"
    return {"text": snippet, "highlights": highlight_spans(query, snippet)}


def section_of(
    rows: Sequence[Any], snippet: Mapping[str, Any], query: str = ""
) -> tuple[dict[str, Any] | None, int]:
    """``(section, line)``: the heading section of the hit among its document's section
    ``rows`` and the index of its first non-blank line of the chunk text in it. With a
    ``query``, the section of the chunk with the most matches (the first on ties); else the
    one the chunk starts in."""
    match = _LOCATOR_PARA_RE.search(str(snippet.get("source_locator", "")))
    if match is None:
        return None, 0
    first = int(match.group(1))
    lines = [line for line in str(snippet.get("text", "")).split("\n") if line.strip()]
    last = first + max(len(lines), 1) - 1
    # (start, end, section) spans inside the chunk; text before the first heading: None.
    spans: list[tuple[int, int, dict[str, Any] | None]] = []
    lead_end = min([r[0] for r in rows] + [last + 1]) - 1
    if first <= lead_end:
        spans.append((first, lead_end, None))
    for start, end, heading, anchor, level in rows:
        if start <= last and end >= first:
            section = {"heading": heading, "anchor": anchor, "level": level}
            spans.append((max(start, first), min(end, last), section))
    if not spans:
        return None, 0
    best = spans[0]
    if query:
        counts = [len(match_spans(query, line)) for line in lines]
        scores = [sum(counts[a - first : b - first + 1]) for a, b, _ in spans]
        best = spans[scores.index(max(scores))]
    return best[2], best[0] - first
