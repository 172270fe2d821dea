"""The model and its quantization facts: load/save, the Q/DQ view, the numerics runner, errors."""
