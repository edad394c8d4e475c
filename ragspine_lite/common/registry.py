"""Name → factory registries behind the ``make_*`` functions, and lazy extra imports."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib import metadata
from typing import Any

from ragspine_lite.common.settings import env_value

__all__ = ["Registry", "lazy_extra_import", "normalize_spec"]


def normalize_spec(spec: str, *, hyphens: bool = True, spaces: bool = True) -> str:
    """``strip().lower()``, optionally ``-``→``_`` and space→``_``."""
    out = str(spec).strip().lower()
    if hyphens:
        out = out.replace("-", "_")
    if spaces:
        out = out.replace(" ", "_")
    return out


class Registry:
    """A named set of factories for one seam (``Registry("embedding_backends")``).

    Builtins are registered with :meth:`register`; entry points in the group
    ``ragspine_lite.<seam>`` (or ``group``) are discovered when asked, and builtins win.
    :meth:`build` is what the ``make_*`` factories do with a spec (``None``: the seam's
    variable ``env``).
    """

    def __init__(
        self, seam: str, *, env: str | None = None, default: str = "none",
        off: tuple[str, ...] = ("", "none"), label: str | None = None, spaces: bool = True,
        group: str | None = None,
    ) -> None:
        self.seam, self.group = seam, group or f"ragspine_lite.{seam}"
        self.env, self.default, self.off, self.spaces = env, default, off, spaces
        self.label = label or seam.replace("_", " ").rstrip("s")
        self._factories: dict[str, Callable[..., Any]] = {}

    def register(self, name: str, factory: Callable[..., Any], *aliases: str) -> None:
        """``factory`` under ``name`` and each of ``aliases``."""
        for alias in (name, *aliases):
            self._factories[normalize_spec(alias)] = factory

    def _entry_points(self) -> dict[str, Any]:
        try:
            eps = metadata.entry_points(group=self.group)
        except Exception:  # a broken distribution must not break the seam
            return {}
        return {normalize_spec(ep.name): ep for ep in eps}

    def names(self) -> list[str]:
        """Every known name, sorted: builtins and discovered entry points."""
        return sorted(set(self._factories) | set(self._entry_points()))

    def make(self, spec: str, **kwargs: Any) -> Any:
        """Instantiate the factory registered under ``spec``; unknown → ``ValueError``."""
        key = normalize_spec(spec)
        if key in self._factories:
            return self._factories[key](**kwargs)
        ep = self._entry_points().get(key)
        if ep is not None:
            return ep.load()(**kwargs)
        raise ValueError(
            f"unknown {self.seam.replace('_', ' ')} {spec!r}; "
            f"valid names: {', '.join(self.names())}"
        )

    def resolve(self, spec: str | None = None) -> str | None:
        """The registered name ``spec`` means: ``None`` → ``$env`` (unset or blank:
        ``default``); an ``off`` name → ``None``; an unknown one → ``ValueError`` listing the
        valid names (``spaces=False``: a space in a spec is never read as ``_``)."""
        if spec is None:
            spec = (env_value(self.env) if self.env else None) or self.default
        key = normalize_spec(spec, spaces=self.spaces)
        if key in self.off:
            return None
        if key not in self.names():
            valid = [name for name in self.off if name] + self.names()
            raise ValueError(
                f"unknown {self.label} {spec!r}; valid names: {', '.join(valid)} "
                f"(plugins: entry points of the group '{self.group}')"
            )
        return key

    def build(self, spec: str | None = None, **kwargs: Any) -> Any:
        """What a ``make_*`` factory returns: :meth:`resolve`, then the factory called with
        ``**kwargs`` (``None`` when the spec is off)."""
        key = self.resolve(spec)
        return None if key is None else self.make(key, **kwargs)


def lazy_extra_import(module: str, *, extra: str, pkg: str = "ragspine-lite") -> Any:
    """Import ``module`` or raise an ``ImportError`` naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"missing optional dependency {module!r}: install it with "
            f"`pip install {pkg}[{extra}]` and retry"
        ) from exc
