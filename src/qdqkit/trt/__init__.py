"""What TensorRT does: its rules, the engine model and predictor, cache and layer-argument formats."""
