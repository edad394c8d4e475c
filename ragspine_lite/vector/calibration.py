"""A dense model's calibration: where its cosines start to be evidence of relevance.

Measured once per model (``bench/fusion.py --calibrate``) and shipped with the model's config
(``embedding_config.json`` key ``calibration``, or the backend class); a backend exposes it as
its ``calibration`` attribute and the retrieval pipeline then fuses with
:class:`~ragspine_lite.pipeline.fusion.CalibratedFusion`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["DEFAULT_LEXICAL_WEIGHT", "DenseCalibration"]

DEFAULT_LEXICAL_WEIGHT = 0.6


def _unit(name: str, value: Any, *, low: float = -1.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= 1:
        raise ValueError(f"calibration {name} must be a number in [{low:g}, 1], got {value!r}")
    return float(value)


@dataclass(frozen=True)
class DenseCalibration:
    """How a model's cosines read as evidence (measured per model, shipped with its config).

    ``floor``: the cosine a query reaches with unrelated text (at or below: no evidence);
    ``ceiling``: a clearly relevant pair's cosine (dense score 1.0 from there up);
    ``lexical_weight``: the lexical share ``w`` of the fused score, in ``(0.5, 1]``.
    """

    floor: float
    ceiling: float
    lexical_weight: float = DEFAULT_LEXICAL_WEIGHT

    def __post_init__(self) -> None:
        floor, ceiling = _unit("floor", self.floor), _unit("ceiling", self.ceiling)
        if ceiling <= floor:
            raise ValueError(
                f"calibration ceiling must be above its floor, got floor={floor!r}, "
                f"ceiling={ceiling!r}"
            )
        w = _unit("lexical_weight", self.lexical_weight, low=0.0)
        if w <= 0.5:
            raise ValueError(f"calibration lexical_weight must be in (0.5, 1], got {w!r}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> DenseCalibration:
        """A calibration from a JSON object (``floor``, ``ceiling``, ``lexical_weight``?)."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a calibration must be a JSON object, got {data!r}")
        unknown = sorted(set(data) - {"floor", "ceiling", "lexical_weight"})
        missing = sorted({"floor", "ceiling"} - set(data))
        if unknown or missing:
            raise ValueError(
                f"calibration keys: floor, ceiling, lexical_weight (optional); "
                f"unknown {unknown!r}, missing {missing!r}"
            )
        return cls(**dict(data))

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    def dense_score(self, cosine: float) -> float:
        """``cosine`` as evidence in ``[0, 1]``: 0 at or below the floor."""
        if cosine <= self.floor:
            return 0.0
        return min(1.0, (cosine - self.floor) / (self.ceiling - self.floor))


