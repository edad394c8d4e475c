"""Structured metadata filters over chunks: ``eq ne in nin gt gte lt lte between``.

Both sides of every comparison are compared as strings (``None`` → ``""``), so ranges
are lexicographic (``"2023" < "2024"``, but also ``"10" < "9"``). A filter never invents
objects: :meth:`MetadataFilter.apply` returns a subsequence of the very objects it got.

>>> f = make_filter([("entity", "eq", "ACME_HK"), ("period", "between", ("2023", "2024"))])
>>> f.conditions[1]
FilterCondition(field='period', op='between', value=('2023', '2024'))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "OPS_IN_ORDER",
    "VALID_COMBINES",
    "VALID_OPS",
    "FilterCondition",
    "MetadataFilter",
    "make_filter",
    "parse_filter_expression",
]

# Canonical order, used for messages and docs; VALID_OPS is the set the contract names.
OPS_IN_ORDER = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "between")
VALID_OPS = frozenset(OPS_IN_ORDER)
VALID_COMBINES = ("and", "or")
_MEMBERSHIP_OPS = ("in", "nin")

_MISSING = object()


def _as_str(value: Any) -> str:
    return "" if value is None else str(value)


def _valid_ops_text() -> str:
    return ", ".join(OPS_IN_ORDER)


def _lookup(obj: Any, name: str) -> Any:
    """``obj.name`` (or ``obj[name]`` for a mapping such as a snippet dict); missing → sentinel."""
    if isinstance(obj, Mapping):
        return obj.get(name, _MISSING)
    return getattr(obj, name, _MISSING)


@dataclass(frozen=True)
class FilterCondition:
    """One ``field op value`` test, validated at construction.

    ``in``/``nin`` need a non-string iterable of values; ``between`` needs a non-string
    two-element sequence ``(low, high)`` and is inclusive on both ends.
    """

    field: str
    op: str
    value: Any
    # Stringified operands, computed once (not part of equality, hashing or repr).
    _operands: tuple[str, ...] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.field, str) or not self.field:
            raise ValueError(f"filter field must be a non-empty string, got {self.field!r}")
        if self.op not in VALID_OPS:
            raise ValueError(f"unknown filter op {self.op!r}; valid ops: {_valid_ops_text()}")
        value = self.value
        if self.op in _MEMBERSHIP_OPS:
            if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
                raise ValueError(
                    f"filter op {self.op!r} needs a non-string iterable of values, "
                    f"got {value!r} (e.g. ('en', 'zh'))"
                )
            if isinstance(value, Iterator):  # one-shot: keep a reusable copy
                value = tuple(value)
                object.__setattr__(self, "value", value)
            operands = tuple(_as_str(v) for v in value)
        elif self.op == "between":
            if (
                isinstance(value, (str, bytes))
                or not isinstance(value, Sequence)
                or len(value) != 2
            ):
                raise ValueError(
                    f"filter op 'between' needs a non-string 2-element sequence (low, high), "
                    f"got {value!r}"
                )
            operands = (_as_str(value[0]), _as_str(value[1]))
        else:
            operands = (_as_str(value),)
        object.__setattr__(self, "_operands", operands)

    def matches(self, obj: Any) -> bool:
        """Whether ``obj`` passes; an object without the field never does."""
        raw = _lookup(obj, self.field)
        if raw is _MISSING:
            return False
        actual = _as_str(raw)
        ops = self._operands
        op = self.op
        if op == "eq":
            return actual == ops[0]
        if op == "ne":
            return actual != ops[0]
        if op == "in":
            return actual in ops
        if op == "nin":
            return actual not in ops
        if op == "gt":
            return actual > ops[0]
        if op == "gte":
            return actual >= ops[0]
        if op == "lt":
            return actual < ops[0]
        if op == "lte":
            return actual <= ops[0]
        return ops[0] <= actual <= ops[1]  # between, inclusive


@dataclass(frozen=True)
class MetadataFilter:
    """Conditions joined by ``combine`` (``"and"``/``"or"``); no conditions → matches all."""

    conditions: tuple[FilterCondition, ...] = ()
    combine: str = "and"

    def __post_init__(self) -> None:
        if not isinstance(self.conditions, tuple):
            object.__setattr__(self, "conditions", tuple(self.conditions))
        for cond in self.conditions:
            if not isinstance(cond, FilterCondition):
                raise TypeError(f"MetadataFilter conditions must be FilterCondition, got {cond!r}")
        if self.combine not in VALID_COMBINES:
            raise ValueError(
                f"unknown filter combine {self.combine!r}; valid: {', '.join(VALID_COMBINES)}"
            )

    def matches(self, obj: Any) -> bool:
        if not self.conditions:
            return True
        if self.combine == "and":
            return all(c.matches(obj) for c in self.conditions)
        return any(c.matches(obj) for c in self.conditions)

    def apply(self, objs: Iterable[Any]) -> list[Any]:
        """The matching objects themselves (not copies), in input order."""
        return [obj for obj in objs if self.matches(obj)]


def make_filter(
    conditions: Iterable[tuple[str, str, Any] | FilterCondition] | None = None,
    *,
    combine: str = "and",
) -> MetadataFilter:
    """Build a :class:`MetadataFilter` from ``(field, op, value)`` triples."""
    built = tuple(
        c if isinstance(c, FilterCondition) else FilterCondition(*c) for c in (conditions or ())
    )
    return MetadataFilter(built, combine=combine)


_EXPRESSION_FORMS = (
    "FIELD=OP:VALUE or FIELD=VALUE (= eq), e.g. 'entity=eq:ACME_HK', "
    "'period=between:2023,2024', 'language=in:en,zh', 'topic=REVENUE'; "
    f"ops: {_valid_ops_text()}"
)


def _bad_expression(expr: str, why: str) -> ValueError:
    return ValueError(f"invalid filter expression {expr!r}: {why}; expected {_EXPRESSION_FORMS}")


def parse_filter_expression(expr: str) -> FilterCondition:
    """Parse ``"field=op:value"`` (or ``"field=value"`` for ``eq``) into a condition.

    ``in``/``nin`` take comma-separated values, ``between`` exactly ``low,high``. Field,
    op and values are stripped; the op is case-insensitive. A ``:`` whose prefix is not
    an op belongs to the value (``"period=2023:Q1"`` is ``eq "2023:Q1"``).

    >>> parse_filter_expression("language=in:en,zh")
    FilterCondition(field='language', op='in', value=('en', 'zh'))
    >>> parse_filter_expression("topic=REVENUE").op
    'eq'
    """
    if not isinstance(expr, str):
        raise ValueError(f"filter expression must be a string, got {expr!r}")
    name, sep, rhs = expr.partition("=")
    if not sep:
        raise _bad_expression(expr, "missing '='")
    name = name.strip()
    if not name.isidentifier():
        raise _bad_expression(expr, f"field {name!r} is not a valid name")
    op, colon, rest = rhs.partition(":")
    op = op.strip().lower()
    if colon and op in VALID_OPS:
        raw = rest
    else:
        op, raw = "eq", rhs
    if op in _MEMBERSHIP_OPS:
        values = tuple(v.strip() for v in raw.split(",") if v.strip())
        if not values:
            raise _bad_expression(expr, f"op {op!r} needs at least one value")
        return FilterCondition(name, op, values)
    if op == "between":
        bounds = [v.strip() for v in raw.split(",")]
        if len(bounds) != 2 or not all(bounds):
            raise _bad_expression(expr, "op 'between' needs exactly two values 'LOW,HIGH'")
        return FilterCondition(name, op, (bounds[0], bounds[1]))
    return FilterCondition(name, op, raw.strip())
