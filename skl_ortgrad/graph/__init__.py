"""Pure ONNX graph helpers: no onnxruntime import anywhere in this layer."""
