"""Computations behind each view of the lab: tensors in, dataclasses and numpy out."""
