"""onnxruntime sessions, options, devices and mini-batch feeds."""
