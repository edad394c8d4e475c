"""Text → tokens, pure Python, shared by every stage: BM25's CJK-aware word tokenizer
(:mod:`~ragspine_lite.text.words`), WordPiece (:mod:`~ragspine_lite.text.wordpiece`) and
SentencePiece (:mod:`~ragspine_lite.text.sentencepiece`) for the embedding and rerank models;
and Markdown's markers (:mod:`~ragspine_lite.text.markdown`) for every reader of Markdown.
"""
