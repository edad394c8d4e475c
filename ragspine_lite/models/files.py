"""Model files on disk, shared by the rerankers, the embedding backends and the remote
endpoint: safetensors weights, WordPiece vocabularies, JSON configs, ONNX graphs, model
directories (never downloaded)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragspine_lite.common.registry import lazy_extra_import
from ragspine_lite.text.wordpiece import WordPieceTokenizer

__all__ = ["load_safetensors", "load_tokenizer", "model_directory", "onnx_file", "read_json"]

_SAFETENSORS_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I64": "<i8", "I32": "<i4"}


def load_safetensors(path: str | Path, *, extra: str = "rerank") -> dict[str, Any]:
    """A ``.safetensors`` file → ``{name: numpy array}`` (F32/F16/F64/I64/I32)."""
    np = lazy_extra_import("numpy", extra=extra)
    raw = Path(path).read_bytes()
    if len(raw) < 8:
        raise ValueError(f"{str(path)!r} is too short to be a safetensors file")
    n = int.from_bytes(raw[:8], "little")
    try:
        header = json.loads(raw[8 : 8 + n].decode("utf-8"))
    except ValueError:
        raise ValueError(f"{str(path)!r} has no valid safetensors header") from None
    base = 8 + n
    out: dict[str, Any] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(spec.get("dtype"))
        if dtype is None:
            raise ValueError(f"tensor {name!r} has unsupported dtype {spec.get('dtype')!r}")
        start, end = spec["data_offsets"]
        array = np.frombuffer(raw, dtype=dtype, count=(end - start) // np.dtype(dtype).itemsize,
                              offset=base + start)
        out[name] = array.reshape(spec["shape"]).astype(np.float32 if dtype[1] == "f" else dtype)
    return out


def load_tokenizer(directory: str | Path) -> WordPieceTokenizer:
    """The WordPiece tokenizer of a model directory: ``vocab.txt``, else ``tokenizer.json``.

    ``tokenizer_config.json`` / the ``tokenizer.json`` normaliser decide lowercasing.
    """
    folder = Path(directory)
    lowercase, strip_accents = True, None
    config = folder / "tokenizer_config.json"
    if config.is_file():
        data = json.loads(config.read_text(encoding="utf-8"))
        lowercase = bool(data.get("do_lower_case", True))
        strip_accents = data.get("strip_accents")
    if (folder / "vocab.txt").is_file():
        return WordPieceTokenizer.from_file(
            folder / "vocab.txt", lowercase=lowercase, strip_accents=strip_accents
        )
    spec = folder / "tokenizer.json"
    if not spec.is_file():
        raise FileNotFoundError(
            f"model directory {str(folder)!r} has neither 'vocab.txt' nor 'tokenizer.json'"
        )
    data = json.loads(spec.read_text(encoding="utf-8"))
    model = data.get("model") or {}
    if model.get("type") != "WordPiece" or not isinstance(model.get("vocab"), dict):
        raise ValueError(f"{str(spec)!r} is not a WordPiece tokenizer")
    norm = data.get("normalizer") or {}
    if norm.get("type") == "BertNormalizer":
        lowercase = bool(norm.get("lowercase", lowercase))
        strip_accents = norm.get("strip_accents", strip_accents)
    return WordPieceTokenizer(
        model["vocab"],
        lowercase=lowercase,
        strip_accents=strip_accents,
        unk_token=model.get("unk_token", "[UNK]"),
        continuing_subword_prefix=model.get("continuing_subword_prefix", "##"),
        max_input_chars_per_word=int(model.get("max_input_chars_per_word", 100)),
    )


def read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        raise ValueError(f"{str(path)!r} is not valid JSON") from None
    if not isinstance(data, dict):
        raise ValueError(f"{str(path)!r} must hold a JSON object")
    return data


def onnx_file(directory: Path) -> Path:
    for candidate in (directory / "model.onnx", directory / "onnx" / "model.onnx"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"model directory {str(directory)!r} has no 'model.onnx'")


def model_directory(model_name: str | Path, cache_dir: str | Path | None, what: str) -> Path:
    """``model_name`` as a directory, else ``cache_dir/model_name``; models are never
    downloaded, so anything else → ``FileNotFoundError`` saying what to pass."""
    candidates = [Path(model_name)]
    if cache_dir is not None:
        candidates.append(Path(cache_dir) / str(model_name))
    for path in candidates:
        if path.is_dir():
            return path
    raise FileNotFoundError(
        f"{what} model {str(model_name)!r} is not a directory"
        + (f" (nor under cache_dir {str(cache_dir)!r})" if cache_dir is not None else "")
        + ": models are never downloaded; pass a directory holding model.onnx and "
        "vocab.txt (or tokenizer.json)"
    )
