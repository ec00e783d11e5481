"""Drawing text from a model: the sampling rules (sampling), generation with a KV cache (generate), and the fast
decoder for fixed-step solvers (decode). Built on the model."""
