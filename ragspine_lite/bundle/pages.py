"""Result URLs for a static search site, and simple HTML pages for Markdown / text sources.

Every exported document gets a ``url``: an HTML source is the page itself (``base_url`` + its
path relative to the documents folder, ``dir/index.html`` shortened to ``dir/``); a Markdown or
text source is rendered by :func:`render_page` into ``pages/<path>.html`` inside the bundle,
and its URL is that path, relative to the bundle (the browser resolves every result URL against
the bundle's own URL, so the same bundle works under any prefix). A hit's URL adds ``#anchor``
of the section it falls in.

>>> page_url("guide/install.html", "/docs")
'/docs/guide/install.html'
>>> page_url("blog/index.html", "https://example.com/")
'https://example.com/blog/'
>>> rendered_path("notes/2024 review.md")
'pages/notes/2024 review.html'
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath
from urllib.parse import quote

from ragspine_lite.chunking.sources import HTML_EXTENSIONS, Section
from ragspine_lite.text.markdown import BULLET, FENCE, HEADING, IMAGE, NUMBERED, QUOTE

__all__ = [
    "PAGES_DIR",
    "is_html_source",
    "normalise_base_url",
    "page_url",
    "render_page",
    "rendered_path",
]

#: Where rendered Markdown/text pages go inside the bundle.
PAGES_DIR = "pages"

_FENCE_RE = re.compile(f"^{FENCE}")
_HEADING_RE = re.compile(rf"^{HEADING}(\S.*?)\s*#*\s*$")
_BULLET_RE = re.compile(f"^{BULLET}(.*)$")
_NUMBERED_RE = re.compile(f"^{NUMBERED}(.*)$")
_QUOTE_RE = re.compile(f"^{QUOTE}(.*)$")
_RULE_RE = re.compile(r"^([-*_])(\s*\1){2,}\s*$")
# Inline Markdown on already-escaped text: `code`, ![alt](src), [text](href), **b**, *i*, _i_.
_CODE_RE = re.compile(r"`([^`]+)`")
_IMAGE_RE = re.compile(IMAGE)
_LINK_RE = re.compile(r"\[([^\]]+)\]\(([^)\s]+)(?:\s+&quot;[^)]*&quot;)?\)")
_STRONG_RE = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_EM_RE = re.compile(r"(?<![\w*])([*_])(?=\S)(.+?)(?<=\S)\1(?![\w*])")
_SAFE_HREF_RE = re.compile(r"^(https?:|mailto:|#|/|\./|\.\./|[\w.-]+(/|$|#|\.))", re.IGNORECASE)


def normalise_base_url(base_url: str) -> str:
    """``base_url`` with exactly one trailing ``/``; raises ``ValueError`` for a blank or
    spaced value."""
    if not isinstance(base_url, str) or not base_url.strip():
        raise ValueError(f"base URL must be a non-empty string such as '/', got {base_url!r}")
    value = base_url.strip()
    if any(c.isspace() for c in value):
        raise ValueError(f"base URL must not contain spaces, got {base_url!r}")
    return value.rstrip("/") + "/"


_base = functools.lru_cache(maxsize=8)(normalise_base_url)


def is_html_source(rel_path: str) -> bool:
    """Whether ``rel_path`` ends in an HTML extension (``PurePosixPath(rel_path).suffix``,
    without building a path: a build asks for every page)."""
    name = rel_path.rstrip("/").rpartition("/")[2]
    dot = name.rfind(".")
    return 0 < dot < len(name) - 1 and name[dot:].lower() in HTML_EXTENSIONS


def page_url(rel_path: str, base_url: str = "/") -> str:
    """The public URL of an HTML source at ``rel_path`` (``/``-separated, relative to DOCS)."""
    rel = rel_path.lstrip("/")
    name = rel.rpartition("/")[2].lower()  # PurePosixPath(rel).name: a build asks per page
    if name in ("index.html", "index.htm"):
        rel = rel[: len(rel) - len(name)]
    return _base(base_url) + quote(rel, safe="/")


def rendered_path(rel_path: str) -> str:
    """Where a Markdown/text source's page goes inside the bundle."""
    return f"{PAGES_DIR}/{PurePosixPath(rel_path.lstrip('/')).with_suffix('.html')}"


# ---------------------------------------------------------------- rendering


def _inline(text: str) -> str:
    """Escape ``text`` and render inline Markdown (code, links, emphasis; images → alt).

    A NUL becomes U+FFFD, as HTML parsers read it (and so never clashes with the NUL-delimited
    placeholders that keep code spans apart).
    """
    out = html.escape(text.replace("\x00", "\ufffd"), quote=True)
    codes: list[str] = []

    def keep_code(match: re.Match[str]) -> str:
        codes.append(f"<code>{match.group(1)}</code>")
        return f"\x00{len(codes) - 1}\x00"

    def link(match: re.Match[str]) -> str:
        label, href = match.group(1), match.group(2)
        if not _SAFE_HREF_RE.match(html.unescape(href)):
            return label
        return f'<a href="{href}">{label}</a>'

    out = _CODE_RE.sub(keep_code, out)
    out = _IMAGE_RE.sub(lambda m: m.group(1), out)
    out = _LINK_RE.sub(link, out)
    out = _STRONG_RE.sub(r"<strong>\2</strong>", out)
    out = _EM_RE.sub(r"<em>\2</em>", out)
    return re.sub("\x00(\\d+)\x00", lambda m: codes[int(m.group(1))], out)


def _markdown_blocks(body: str, anchors: Mapping[int, str]) -> list[str]:
    """Block HTML for a Markdown body; heading lines get ``id=anchors[paragraph number]``."""
    out = _Blocks()
    fence: list[str] | None = None
    number = 0  # paragraph numbers count non-blank lines, as the chunkers and sections do
    for raw in body.split("\n"):
        line = raw.strip()
        if line:
            number += 1
        if fence is not None:
            if _FENCE_RE.match(line):
                out.code(fence)
                fence = None
            else:
                fence.append(raw)
        elif not line:
            out.flush()
        elif _FENCE_RE.match(line):
            out.flush()
            fence = []
        else:
            out.line(line, anchors.get(number, ""))
    if fence is not None:
        out.code(fence)
    out.flush()
    return out.blocks


class _Blocks:
    """Block HTML written line by line: an open paragraph or list stays open until a block
    of another kind (or a blank line) closes it with :meth:`flush`."""

    def __init__(self) -> None:
        self.blocks: list[str] = []
        self.paragraph: list[str] = []
        self.items: list[str] = []
        self.list_tag = ""

    def flush(self) -> None:
        if self.paragraph:
            self.blocks.append("<p>" + "<br>\n".join(_inline(p) for p in self.paragraph) + "</p>")
            self.paragraph.clear()
        if self.items:
            listed = "".join(f"<li>{i}</li>" for i in self.items)
            self.blocks.append(f"<{self.list_tag}>{listed}</{self.list_tag}>")
            self.items.clear()
            self.list_tag = ""

    def code(self, lines: list[str]) -> None:
        self.blocks.append("<pre><code>" + html.escape("\n".join(lines)) + "</code></pre>")

    def line(self, line: str, anchor: str) -> None:
        """One stripped, non-blank line outside a fence; ``anchor`` is its heading id."""
        heading = _HEADING_RE.match(line)
        bullet = _BULLET_RE.match(line)
        numbered = _NUMBERED_RE.match(line)
        if heading:
            self.flush()
            level = len(heading.group(1))
            attr = f' id="{html.escape(anchor, quote=True)}"' if anchor else ""
            self.blocks.append(f"<h{level}{attr}>{_inline(heading.group(2))}</h{level}>")
        elif _RULE_RE.match(line):
            self.flush()
            self.blocks.append("<hr>")
        elif bullet or numbered:
            tag = "ul" if bullet else "ol"
            if self.paragraph or (self.items and self.list_tag != tag):
                self.flush()
            self.list_tag = tag
            self.items.append(_inline((bullet or numbered).group(1)))  # type: ignore[union-attr]
        elif (quoted := _QUOTE_RE.match(line)) is not None:
            self.flush()
            self.blocks.append(f"<blockquote><p>{_inline(quoted.group(1))}</p></blockquote>")
        else:
            if self.items:
                self.flush()
            self.paragraph.append(line)


def _text_blocks(body: str) -> list[str]:
    blocks = []
    for block in re.split(r"\n\s*\n", body.strip()):
        lines = [html.escape(line.strip()) for line in block.split("\n") if line.strip()]
        if lines:
            blocks.append("<p>" + "<br>\n".join(lines) + "</p>")
    return blocks


_PAGE_CSS = (
    "body{margin:0;font:16px/1.6 system-ui,-apple-system,'Segoe UI','Noto Sans','Noto Sans CJK SC',"
    "sans-serif;color:#1d2430;background:#fff}"
    "main{max-width:46rem;margin:0 auto;padding:1.5rem 1.25rem 3rem;overflow-wrap:anywhere}"
    "nav{max-width:46rem;margin:0 auto;padding:.8rem 1.25rem 0;font-size:.9rem}"
    "a{color:#1f4fb8}pre{overflow-x:auto;background:#f4f5f7;padding:.7rem;border-radius:.3rem}"
    "code{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:.92em}"
    "blockquote{border-left:3px solid #dfe3ea;margin:0;padding-left:1rem;color:#4a5260}"
    ":target{scroll-margin-top:1rem;background:#fff6d6}"
)


def render_page(
    *,
    title: str,
    body: str,
    sections: Iterable[Section],
    markdown: bool,
    language: str = "",
    home: str = "",
    home_label: str = "Search",
) -> str:
    """A small standalone HTML page for a document: its title and its body, with every
    heading's section anchor as the heading's ``id`` (so result URLs land on it).

    ``markdown=False`` renders plain text (paragraphs only). ``home`` is the (relative) URL
    of the search page, linked above the title when given.
    """
    anchors = {s.para_start: s.anchor for s in sections}
    blocks = _markdown_blocks(body, anchors) if markdown else _text_blocks(body)
    starts_with_title = bool(blocks) and blocks[0].startswith("<h1")
    head_title = html.escape(title)
    lang = f' lang="{html.escape(language, quote=True)}"' if language else ""
    parts = [
        "<!doctype html>",
        f"<html{lang}>",
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{head_title}</title>",
        '<link rel="icon" href="data:,">',
        f"<style>{_PAGE_CSS}</style>",
        "</head>",
        "<body>",
    ]
    if home:
        link = f'<a href="{html.escape(home, quote=True)}">{html.escape(home_label)}</a>'
        parts.append(f"<nav>{link}</nav>")
    parts.append("<main>")
    if not starts_with_title:
        parts.append(f"<h1>{head_title}</h1>")
    parts.extend(blocks)
    parts.extend(["</main>", "</body>", "</html>", ""])
    return "\n".join(parts)
