"""The out-of-scope entity gate: the longest external name wins, immune to case and spacing.

A question (or a model-written query, or an endpoint a model extracted) that names an
external entity — a peer or competitor of the home company — is refused. Names are matched
on a whitespace-free, case-folded view of the text (after NFKC, with format characters such
as zero-width spaces removed), so ``"平 安 营收"`` and ``"a i a revenue"`` are caught like
``"平安营收"`` and ``"AIA revenue"``. An ASCII letter or digit at either end of a name must
sit on a word edge of the text, so ``"ping an"`` is not found in ``"shopping and dining"``.

>>> gate = SecurityGate({"ping an": "Ping An", "平安": "Ping An", "aia": "AIA"}, "ACME Group")
>>> gate.detect("a i a revenue").external_entity, gate.detect("平 安 营收").external_entity
('AIA', 'Ping An')
>>> gate.detect("shopping and dining revenue").external_entity is None
True
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "SECURITY_ALLOW",
    "SECURITY_REFUSE_OUT_OF_SCOPE",
    "SecurityGate",
    "SecurityScreen",
    "SecurityVerdict",
]

SECURITY_ALLOW = "allow"
SECURITY_REFUSE_OUT_OF_SCOPE = "out_of_scope_entity"


@dataclass(frozen=True)
class SecurityScreen:
    """What :meth:`SecurityGate.detect` found: the display name (or ``None``) and the cleaned
    text with the matched span blanked by spaces."""

    external_entity: str | None
    masked_text: str


@dataclass(frozen=True)
class SecurityVerdict:
    """``decision`` is :data:`SECURITY_ALLOW` or :data:`SECURITY_REFUSE_OUT_OF_SCOPE`."""

    decision: str
    external_entity: str | None = None
    message: str | None = None
    narrowing_options: list[str] = field(default_factory=list)


def _clean(text: object) -> str:
    """NFKC, format characters dropped, lower-cased, trimmed, whitespace runs → one space."""
    norm = unicodedata.normalize("NFKC", str(text))
    norm = "".join(ch for ch in norm if unicodedata.category(ch) != "Cf")
    return " ".join(norm.lower().split())


def _word_char(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


@dataclass(frozen=True)
class _Match:
    display: str
    start: int  # span in the cleaned text
    end: int


class SecurityGate:
    """Screens text against ``external_entities`` (alias → display name).

    Aliases are tried longest first (by their lower-cased, whitespace-free form; ties keep
    the mapping's order); a later alias never matches inside an earlier one's span.
    """

    def __init__(self, external_entities: Mapping[str, str], home_company_name: str) -> None:
        self.home_company_name = str(home_company_name)
        keyed = []
        for alias, display in dict(external_entities).items():
            key = _clean(alias).replace(" ", "")
            if key:
                keyed.append((key, str(display)))
        self._aliases: tuple[tuple[str, str], ...] = tuple(
            sorted(keyed, key=lambda pair: -len(pair[0]))
        )

    def __repr__(self) -> str:
        return f"SecurityGate({len(self._aliases)} aliases)"

    def _matches(self, cleaned: str) -> list[_Match]:
        """Every non-overlapping alias occurrence in ``cleaned``, longest alias first."""
        where = [i for i, ch in enumerate(cleaned) if ch != " "]
        compact = cleaned.replace(" ", "")
        taken: list[tuple[int, int]] = []
        found: list[_Match] = []
        for key, display in self._aliases:
            at = compact.find(key)
            while at != -1:
                end = at + len(key)
                start_c, end_c = where[at], where[end - 1] + 1
                edges_ok = not (
                    (_word_char(key[0]) and start_c > 0 and _word_char(cleaned[start_c - 1]))
                    or (_word_char(key[-1]) and end_c < len(cleaned)
                        and _word_char(cleaned[end_c]))
                )
                if edges_ok and all(end <= a or at >= b for a, b in taken):
                    taken.append((at, end))
                    found.append(_Match(display, start_c, end_c))
                at = compact.find(key, at + 1)
        return found

    def detect(self, text: object) -> SecurityScreen:
        """The first external entity ``text`` names (longest alias first) and the masked text."""
        cleaned = _clean(text)
        found = self._matches(cleaned)
        if not found:
            return SecurityScreen(None, cleaned)
        hit = found[0]
        masked = cleaned[: hit.start] + " " * (hit.end - hit.start) + cleaned[hit.end :]
        return SecurityScreen(hit.display, masked)

    def detect_all(self, text: object) -> list[str]:
        """Every external entity ``text`` names (display names, distinct, longest alias first)."""
        return list(dict.fromkeys(m.display for m in self._matches(_clean(text))))

    def screen(self, *, raw_question: str, metric: str) -> SecurityVerdict:
        """Allow, or refuse a question naming an external entity (suggesting the home's metric)."""
        entity = self.detect(raw_question).external_entity
        if entity is None:
            return SecurityVerdict(SECURITY_ALLOW)
        home = self.home_company_name or "the home company"
        suggestion = f"{home} {metric}".strip()
        return SecurityVerdict(
            SECURITY_REFUSE_OUT_OF_SCOPE,
            external_entity=entity,
            message=(
                f"{entity} is outside the scope of this system, which answers only for "
                f"{home}; you may ask about {suggestion} instead."
            ),
            narrowing_options=[suggestion],
        )
