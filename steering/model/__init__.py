"""The model: causal attention, the controlled vector field and its solvers (ode; u enters only there), the
depth-varying field, the hybrid and discrete transformers (transformer), and a checkpoint's controls by axis name
(controls). Built on data only."""
