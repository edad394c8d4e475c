"""ONNX sessions, shared by the embedding backends, the rerankers and the remote endpoint:
a CPU session with a thread count (:func:`onnx_session`), a BERT-family graph over it
(:class:`OnnxBert`), and the count check their settings share (:func:`check_count`).
onnxruntime and numpy are imported when a session is made, naming the caller's extra."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragspine_lite.common.registry import lazy_extra_import
from ragspine_lite.common.validators import positive_int

__all__ = ["OnnxBert", "check_count", "onnx_session"]


def check_count(name: str, value: Any, *, optional: bool = False) -> Any:
    """:func:`~ragspine_lite.common.validators.positive_int` (``name`` first)."""
    return positive_int(value, name, optional=optional)


def onnx_session(path: str | Path, *, threads: int | None, extra: str) -> Any:
    """An onnxruntime CPU session over ``path``; ``threads`` intra-op threads (one inter-op)."""
    ort = lazy_extra_import("onnxruntime", extra=extra)
    options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    return ort.InferenceSession(
        str(path), sess_options=options, providers=["CPUExecutionProvider"]
    )


class OnnxBert:
    """An onnxruntime session over a BERT-family graph (int64 ``input_ids``/``attention_mask``
    [/``token_type_ids``]); ``run`` returns the chosen output as a float32 array."""

    def __init__(self, model_path: str | Path, *, output: str | None = None,
                 threads: int | None = None, extra: str = "rerank") -> None:
        self.path = Path(model_path)
        self.extra = extra
        self.session = onnx_session(self.path, threads=threads, extra=extra)
        self.inputs = tuple(i.name for i in self.session.get_inputs())
        for required in ("input_ids", "attention_mask"):
            if required not in self.inputs:
                raise ValueError(
                    f"{str(self.path)!r} has no {required!r} input "
                    f"(inputs: {', '.join(self.inputs)})"
                )
        outputs = [o.name for o in self.session.get_outputs()]
        self.output = output or outputs[0]
        if self.output not in outputs:
            raise ValueError(f"{str(self.path)!r} has no output {self.output!r}; has {outputs}")

    def run(self, ids: Any, mask: Any, types: Any = None) -> Any:
        np = lazy_extra_import("numpy", extra=self.extra)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = types if types is not None else np.zeros_like(ids)
        (out,) = self.session.run([self.output], feed)
        return np.asarray(out, dtype=np.float32)
