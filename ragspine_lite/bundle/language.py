"""The language of a search site: its ``<html lang>`` and the words of its search page.

A site's language is ``--language`` when given, else the language most of its text is in:
each exported document counts with the words of its body (a CJK character counts as a word),
in its own language (front matter,
``<html lang>``) or, without one, the script its text is written in. Chinese is told apart as
Simplified (``zh-CN``) or Traditional (``zh-TW``) by the characters that differ.

>>> normalise_language("zh-hant-hk"), normalise_language("EN_us"), normalise_language("zh")
('zh-TW', 'en-US', 'zh')
>>> text_language("变量的作用域和块级作用域"), text_language("變數的作用域"), text_language("Hello")
('zh-CN', 'zh-TW', 'en')
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

__all__ = [
    "DEFAULT_LANGUAGE",
    "PAGE_STRINGS",
    "document_weight",
    "normalise_language",
    "page_string",
    "site_language",
    "text_language",
]

DEFAULT_LANGUAGE = "en"

# Characters written differently in Simplified and Traditional Chinese, pair by pair.
_SIMPLIFIED = (
    "这个们为说来时会对学发国与点后过还没么见关开长问间动现实经书车门东语认让样数种头"
    "几无图电气体当从进题类应该单网页结构义组码规则变读写条转听觉边报员总处务业产营运"
    "润银险"
)
_TRADITIONAL = (
    "這個們為說來時會對學發國與點後過還沒麼見關開長問間動現實經書車門東語認讓樣數種頭"
    "幾無圖電氣體當從進題類應該單網頁結構義組碼規則變讀寫條轉聽覺邊報員總處務業產營運"
    "潤銀險"
)
_HAN_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_KANA_RE = re.compile(r"[\u3040-\u30ff]")
_HANGUL_RE = re.compile(r"[\uac00-\ud7af]")
_LETTER_RE = re.compile(r"[^\W\d_]")
# A unit of text for weighing languages: a Han character, a kana or Hangul syllable, a word.
_UNIT_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]|\w+")
_SIMPLIFIED_ONLY = frozenset(_SIMPLIFIED) - frozenset(_TRADITIONAL)
_TRADITIONAL_ONLY = frozenset(_TRADITIONAL) - frozenset(_SIMPLIFIED)
_HANS_REGIONS = ("hans", "cn", "sg", "my")
_HANT_REGIONS = ("hant", "tw", "hk", "mo")

#: The words of the search page and of rendered pages, per language (English is the default).
PAGE_STRINGS: dict[str, dict[str, str]] = {
    "en": {"search": "Search"},
    "zh-CN": {"search": "搜索"},
    "zh-TW": {"search": "搜尋"},
}


def normalise_language(tag: str) -> str:
    """A BCP 47 tag as browsers write it (``en-US``); Chinese script or region subtags become
    ``zh-CN`` (Simplified) or ``zh-TW`` (Traditional); ``""`` stays ``""``."""
    parts = [p for p in re.split(r"[-_\s]+", str(tag).strip()) if p]
    if not parts:
        return ""
    primary, rest = parts[0].lower(), [p.lower() for p in parts[1:]]
    if primary == "zh" and rest:
        if any(p in _HANT_REGIONS for p in rest):
            return "zh-TW"
        if any(p in _HANS_REGIONS for p in rest):
            return "zh-CN"
    subtags = [p.title() if len(p) == 4 else p.upper() if len(p) == 2 else p for p in rest]
    return "-".join([primary, *subtags])


def _chinese_variant(text: str) -> str:
    simplified = sum(1 for ch in text if ch in _SIMPLIFIED_ONLY)
    traditional = sum(1 for ch in text if ch in _TRADITIONAL_ONLY)
    return "zh-TW" if traditional > simplified else "zh-CN"


def text_language(text: str) -> str:
    """The language ``text`` is most likely in, by script: ``ja`` (kana), ``ko`` (Hangul),
    ``zh-CN``/``zh-TW`` (Han characters), else :data:`DEFAULT_LANGUAGE`."""
    letters = len(_LETTER_RE.findall(text)) or 1
    if len(_KANA_RE.findall(text)) * 10 >= letters:
        return "ja"
    if len(_HANGUL_RE.findall(text)) * 5 >= letters:
        return "ko"
    if len(_HAN_RE.findall(text)) * 5 >= letters:
        return _chinese_variant(text)
    return DEFAULT_LANGUAGE


def _document_language(language: str, body: str) -> str:
    tag = normalise_language(language)
    if tag == "zh":
        return _chinese_variant(body)
    return tag or text_language(body)


def document_weight(doc: Any) -> tuple[str, int]:
    """A document's language and its weight in :func:`site_language` (its text units + 1)."""
    return _document_language(doc.meta.language, doc.body), len(_UNIT_RE.findall(doc.body)) + 1


def site_language(
    docs: Iterable[Any], explicit: str = "", weights: Iterable[tuple[str, int]] | None = None
) -> str:
    """The site's language: ``explicit`` (normalised) when given, else the language of most
    of the exported documents' text (``docs``: :class:`~.export.SourceDocument`; or their
    :func:`document_weight` in ``weights``, e.g. from a rebuild's cache)."""
    if str(explicit).strip():
        return normalise_language(explicit)
    if weights is None:
        weights = (document_weight(doc) for doc in docs if not doc.restricted)
    totals: dict[str, int] = {}
    for language, weight in weights:
        totals[language] = totals.get(language, 0) + weight
    if not totals:
        return DEFAULT_LANGUAGE
    return max(sorted(totals), key=lambda language: totals[language])


def page_string(language: str, key: str) -> str:
    """``PAGE_STRINGS[language][key]``: the exact tag, then its Chinese variant or primary
    language, then English."""
    tag = normalise_language(language)
    primary = tag.split("-")[0]
    for candidate in (tag, "zh-CN" if primary == "zh" else primary, DEFAULT_LANGUAGE):
        if key in PAGE_STRINGS.get(candidate, {}):
            return PAGE_STRINGS[candidate][key]
    raise KeyError(f"no page string {key!r}")
