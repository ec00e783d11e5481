"""Measuring the trained models: the shared measures, `evaluate` (and axis_eval for one's own file), `depth`
(depth_report), the efficiency bench, activation steering as the rival, and the paper's experiments. Built on
everything below it (analysis, training, inference, model, judges, data); figures and the lab sit elsewhere."""
