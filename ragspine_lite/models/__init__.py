"""Model files and ONNX sessions, one place for the vector, rerank and server stages."""
