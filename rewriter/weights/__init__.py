"""The model's weights: loading and caching, int8 paths, the CPU path choice, batch-invariant kernels."""
