"""Tiny randomly initialised BERT models that the remote-endpoint tests build themselves.

``TinyBert`` holds the weights (PyTorch names and layouts), writes them as an ONNX graph
(built with the ``onnx`` helper API) and as safetensors, and runs its own numpy forward
pass — the oracle the endpoint's models are checked against. Imported only by
``cpython_only`` tests that have numpy and onnx.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]", "[unused1]",
    "hong", "kong", "revenue", "grew", "growth", "in", "the", "apple", "pie", "profit",
    "fell", "china", "bank", "sales", "rose", "strongly", "recipe", "with", "and", "of",
    "a", "2024", "##s", ".", ",", "secret", "merger", "board", "minutes", "deal", "city",
]


class TinyBert:
    """A 2-layer BERT (hidden 16, 2 heads) with random weights from ``seed``."""

    def __init__(self, seed: int = 0, *, hidden: int = 16, heads: int = 2, layers: int = 2,
                 intermediate: int = 32, max_pos: int = 64, num_labels: int = 1) -> None:
        rng = np.random.default_rng(seed)
        self.hidden, self.heads, self.layers = hidden, heads, layers
        self.intermediate, self.max_pos, self.num_labels = intermediate, max_pos, num_labels
        self.eps = 1e-12
        v = len(VOCAB)

        def r(*shape: int, scale: float = 0.3) -> np.ndarray:
            return (rng.standard_normal(shape) * scale).astype(np.float32)

        w: dict[str, np.ndarray] = {
            "bert.embeddings.word_embeddings.weight": r(v, hidden),
            "bert.embeddings.position_embeddings.weight": r(max_pos, hidden),
            "bert.embeddings.token_type_embeddings.weight": r(2, hidden),
            "bert.embeddings.LayerNorm.gamma": 1 + r(hidden, scale=0.1),
            "bert.embeddings.LayerNorm.beta": r(hidden, scale=0.1),
        }
        for i in range(layers):
            p = f"bert.encoder.layer.{i}"
            for name in ("query", "key", "value"):
                w[f"{p}.attention.self.{name}.weight"] = r(hidden, hidden)
                w[f"{p}.attention.self.{name}.bias"] = r(hidden, scale=0.1)
            w[f"{p}.attention.output.dense.weight"] = r(hidden, hidden)
            w[f"{p}.attention.output.dense.bias"] = r(hidden, scale=0.1)
            w[f"{p}.attention.output.LayerNorm.gamma"] = 1 + r(hidden, scale=0.1)
            w[f"{p}.attention.output.LayerNorm.beta"] = r(hidden, scale=0.1)
            w[f"{p}.intermediate.dense.weight"] = r(intermediate, hidden)
            w[f"{p}.intermediate.dense.bias"] = r(intermediate, scale=0.1)
            w[f"{p}.output.dense.weight"] = r(hidden, intermediate)
            w[f"{p}.output.dense.bias"] = r(hidden, scale=0.1)
            w[f"{p}.output.LayerNorm.gamma"] = 1 + r(hidden, scale=0.1)
            w[f"{p}.output.LayerNorm.beta"] = r(hidden, scale=0.1)
        w["bert.pooler.dense.weight"] = r(hidden, hidden)
        w["bert.pooler.dense.bias"] = r(hidden, scale=0.1)
        w["classifier.weight"] = r(num_labels, hidden, scale=1.0)
        w["classifier.bias"] = r(num_labels, scale=0.1)
        w["cls.predictions.transform.dense.weight"] = r(hidden, hidden)
        w["cls.predictions.transform.dense.bias"] = r(hidden, scale=0.1)
        w["cls.predictions.transform.LayerNorm.gamma"] = 1 + r(hidden, scale=0.1)
        w["cls.predictions.transform.LayerNorm.beta"] = r(hidden, scale=0.1)
        w["cls.predictions.bias"] = r(v, scale=0.5)
        self.w = w

    # ---------------------------------------------------------------- numpy oracle

    @staticmethod
    def _ln(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
        x = x.astype(np.float64)
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * g + b

    @staticmethod
    def _gelu(x: np.ndarray) -> np.ndarray:
        erf = np.vectorize(math.erf)
        return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))

    def _lin(self, x: np.ndarray, p: str) -> np.ndarray:
        return x @ self.w[f"{p}.weight"].astype(np.float64).T + self.w[f"{p}.bias"]

    def hidden_states(self, ids: np.ndarray, mask: np.ndarray,
                      types: np.ndarray | None = None) -> np.ndarray:
        """The encoder output ``[batch, seq, hidden]`` in float64."""
        w, e = self.w, "bert.embeddings"
        types = np.zeros_like(ids) if types is None else types
        seq = ids.shape[1]
        x = (w[f"{e}.word_embeddings.weight"][ids] + w[f"{e}.position_embeddings.weight"][:seq]
             + w[f"{e}.token_type_embeddings.weight"][types])
        x = self._ln(x, w[f"{e}.LayerNorm.gamma"], w[f"{e}.LayerNorm.beta"], self.eps)
        b, hd = ids.shape[0], self.hidden // self.heads
        add = (1.0 - mask[:, None, None, :]) * -1e9
        for i in range(self.layers):
            p = f"bert.encoder.layer.{i}"

            def heads(t: np.ndarray) -> np.ndarray:
                return t.reshape(b, seq, self.heads, hd).transpose(0, 2, 1, 3)

            q = heads(self._lin(x, f"{p}.attention.self.query"))
            k = heads(self._lin(x, f"{p}.attention.self.key"))
            v = heads(self._lin(x, f"{p}.attention.self.value"))
            s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd) + add
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            ctx = (s @ v).transpose(0, 2, 1, 3).reshape(b, seq, self.hidden)
            x = self._ln(self._lin(ctx, f"{p}.attention.output.dense") + x,
                         w[f"{p}.attention.output.LayerNorm.gamma"],
                         w[f"{p}.attention.output.LayerNorm.beta"], self.eps)
            inner = self._gelu(self._lin(x, f"{p}.intermediate.dense"))
            x = self._ln(self._lin(inner, f"{p}.output.dense") + x,
                         w[f"{p}.output.LayerNorm.gamma"], w[f"{p}.output.LayerNorm.beta"],
                         self.eps)
        return x

    def classifier_logits(self, ids, mask, types) -> np.ndarray:
        pooled = np.tanh(self._lin(self.hidden_states(ids, mask, types)[:, 0], "bert.pooler.dense"))
        return self._lin(pooled, "classifier")

    def mlm_logits(self, ids, mask) -> np.ndarray:
        t = "cls.predictions.transform"
        h = self._gelu(self._lin(self.hidden_states(ids, mask), f"{t}.dense"))
        h = self._ln(h, self.w[f"{t}.LayerNorm.gamma"], self.w[f"{t}.LayerNorm.beta"], self.eps)
        dec = self.w["bert.embeddings.word_embeddings.weight"].astype(np.float64)
        return h @ dec.T + self.w["cls.predictions.bias"]

    # ---------------------------------------------------------------- writers

    def write_vocab(self, folder: Path) -> None:
        (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")

    def write_safetensors(self, path: Path, *, config_dir: Path | None = None) -> None:
        header: dict = {"__metadata__": {"format": "pt"}}
        blobs, offset = [], 0
        names = [n for n in self.w if not n.startswith(("classifier", "bert.pooler"))]
        for name in names:
            data = np.ascontiguousarray(self.w[name], dtype="<f4").tobytes()
            header[name] = {"dtype": "F32", "shape": list(self.w[name].shape),
                            "data_offsets": [offset, offset + len(data)]}
            blobs.append(data)
            offset += len(data)
        head = json.dumps(header).encode("utf-8")
        path.write_bytes(len(head).to_bytes(8, "little") + head + b"".join(blobs))
        if config_dir is not None:
            (config_dir / "config.json").write_text(json.dumps({
                "architectures": ["BertForMaskedLM"], "hidden_act": "gelu",
                "hidden_size": self.hidden, "num_attention_heads": self.heads,
                "num_hidden_layers": self.layers, "intermediate_size": self.intermediate,
                "layer_norm_eps": self.eps, "vocab_size": len(VOCAB),
            }), encoding="utf-8")

    def write_onnx(self, path: Path, *, head: str) -> None:
        """``head``: ``"classifier"`` (output ``logits`` [B, labels]), ``"mlm"`` (``logits``
        [B, S, V]) or ``"none"`` (``last_hidden_state`` [B, S, H])."""
        import onnx
        from onnx import TensorProto, helper, numpy_helper

        nodes, inits = [], []
        counter = [0]

        def const(arr: np.ndarray, name: str | None = None) -> str:
            counter[0] += 1
            name = name or f"c{counter[0]}"
            inits.append(numpy_helper.from_array(np.asarray(arr), name))
            return name

        def op(kind: str, inputs: list[str], **attrs) -> str:
            counter[0] += 1
            out = f"t{counter[0]}"
            nodes.append(helper.make_node(kind, inputs, [out], **attrs))
            return out

        def linear(x: str, p: str) -> str:
            return op("Add", [op("MatMul", [x, const(self.w[f"{p}.weight"].T.copy())]),
                              const(self.w[f"{p}.bias"])])

        def ln(x: str, g: str, b: str) -> str:
            return op("LayerNormalization", [x, const(self.w[g]), const(self.w[b])],
                      axis=-1, epsilon=self.eps)

        def gelu(x: str) -> str:
            erf = op("Erf", [op("Div", [x, const(np.float32(math.sqrt(2.0)))])])
            return op("Mul", [op("Mul", [x, const(np.float32(0.5))]),
                              op("Add", [erf, const(np.float32(1.0))])])

        e = "bert.embeddings"
        seq = op("Gather", [op("Shape", ["input_ids"]), const(np.int64(1))], axis=0)
        positions = op("Range", [const(np.int64(0)), seq, const(np.int64(1))])
        x = op("Add", [
            op("Add", [
                op("Gather", [const(self.w[f"{e}.word_embeddings.weight"]), "input_ids"]),
                op("Gather", [const(self.w[f"{e}.position_embeddings.weight"]), positions]),
            ]),
            op("Gather", [const(self.w[f"{e}.token_type_embeddings.weight"]), "token_type_ids"]),
        ])
        x = ln(x, f"{e}.LayerNorm.gamma", f"{e}.LayerNorm.beta")
        mask = op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
        bias = op("Mul", [op("Sub", [const(np.float32(1.0)), mask]), const(np.float32(-1e9))])
        bias = op("Unsqueeze", [bias, const(np.array([1, 2], dtype=np.int64))])
        hd = self.hidden // self.heads
        split_shape = const(np.array([0, 0, self.heads, hd], dtype=np.int64))
        merge_shape = const(np.array([0, 0, self.hidden], dtype=np.int64))
        for i in range(self.layers):
            p = f"bert.encoder.layer.{i}"

            def heads(t: str, perm: list[int]) -> str:
                return op("Transpose", [op("Reshape", [t, split_shape])], perm=perm)

            q = heads(linear(x, f"{p}.attention.self.query"), [0, 2, 1, 3])
            k = heads(linear(x, f"{p}.attention.self.key"), [0, 2, 3, 1])
            v = heads(linear(x, f"{p}.attention.self.value"), [0, 2, 1, 3])
            s = op("Add", [op("Mul", [op("MatMul", [q, k]), const(np.float32(1 / math.sqrt(hd)))]),
                           bias])
            ctx = op("MatMul", [op("Softmax", [s], axis=-1), v])
            ctx = op("Reshape", [op("Transpose", [ctx], perm=[0, 2, 1, 3]), merge_shape])
            x = ln(op("Add", [linear(ctx, f"{p}.attention.output.dense"), x]),
                   f"{p}.attention.output.LayerNorm.gamma", f"{p}.attention.output.LayerNorm.beta")
            inner = gelu(linear(x, f"{p}.intermediate.dense"))
            x = ln(op("Add", [linear(inner, f"{p}.output.dense"), x]),
                   f"{p}.output.LayerNorm.gamma", f"{p}.output.LayerNorm.beta")
        if head == "classifier":
            cls = op("Gather", [x, const(np.int64(0))], axis=1)
            pooled = op("Tanh", [linear(cls, "bert.pooler.dense")])
            out, shape = linear(pooled, "classifier"), ["B", self.num_labels]
            name = "logits"
        elif head == "mlm":
            t = "cls.predictions.transform"
            h = ln(gelu(linear(x, f"{t}.dense")), f"{t}.LayerNorm.gamma", f"{t}.LayerNorm.beta")
            dec = self.w[f"{e}.word_embeddings.weight"].T.copy()
            out = op("Add", [op("MatMul", [h, const(dec)]), const(self.w["cls.predictions.bias"])])
            shape, name = ["B", "S", len(VOCAB)], "logits"
        else:
            out, shape, name = x, ["B", "S", self.hidden], "last_hidden_state"
        nodes.append(helper.make_node("Identity", [out], [name]))
        inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["B", "S"])
                  for n in ("input_ids", "attention_mask", "token_type_ids")]
        graph = helper.make_graph(nodes, "tiny_bert", inputs,
                                  [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)],
                                  initializer=inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        onnx.save(model, str(path))


def build_model_dir(folder: Path, *, head: str, seed: int = 0, num_labels: int = 1,
                    config: dict | None = None, config_name: str | None = None) -> TinyBert:
    """A model directory (``model.onnx`` + ``vocab.txt`` [+ a config]) → the TinyBert."""
    folder.mkdir(parents=True, exist_ok=True)
    bert = TinyBert(seed, num_labels=num_labels)
    bert.write_vocab(folder)
    bert.write_onnx(folder / "model.onnx", head=head)
    if config is not None and config_name is not None:
        (folder / config_name).write_text(json.dumps(config), encoding="utf-8")
    return bert


class TinyEmbedder:
    """``/v1/embed`` stand-in: the deterministic hashing backend, 8-d."""

    model_id = "tiny-embed"
    description = "deterministic hashing embedder (test)"

    def __init__(self) -> None:
        from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend

        self.backend = DeterministicEmbeddingBackend(dim=8)
        self.seen: list[str] = []
        self.roles: list[str | None] = []

    def embed(self, texts, *, role=None):
        self.seen.extend(texts)
        self.roles.append(role)
        return self.backend.embed_texts(list(texts))


def tiny_models(folder: Path) -> dict:
    """Ready endpoint models for every operation except ``llm``, built in ``folder``."""
    from _remote_fakes import TinyVisualEmbedder

    from ragspine_lite.remote.server import models as m

    build_model_dir(folder / "ce", head="classifier", seed=11,
                    config={"model_id": "tiny-ce", "max_length": 64},
                    config_name=m.CROSS_ENCODER_CONFIG_FILENAME)
    build_model_dir(folder / "li", head="none", seed=12,
                    config={"model_id": "tiny-li", "max_length": 64},
                    config_name=m.LATE_INTERACTION_CONFIG_FILENAME)
    sp = folder / "splade"
    sp.mkdir(parents=True, exist_ok=True)
    bert = TinyBert(13)
    bert.write_vocab(sp)
    bert.write_safetensors(sp / "model.safetensors", config_dir=sp)
    return {
        "cross_encoder": m.CrossEncoderModel(folder / "ce"),
        "colbert": m.LateInteractionModel(folder / "li"),
        "splade": m.SpladeModel(sp, max_length=64),
        "embed": TinyEmbedder(),
        "visual": TinyVisualEmbedder(),
    }
