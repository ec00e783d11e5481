"""The public API, for a notebook or a script: load a checkpoint, steer it, and get each of the lab's views as a
result with .figure() (a plotly Figure) and .to_dict() (plain data that json.dumps takes). The top floor but for
the command line, which calls it where it does the same work.

    import steering
    m = steering.load()                                   # the shipped hybrid; load(path) for any checkpoint or run
    m.axes                                                # ['sentiment', 'style']
    m.generate("The film was", u={"sentiment": 2.0}, n=2, seed=3)[0].text
    m.paths("The film was", us=[-2.0, 0.0, 2.0]).figure()
    m.compare(steering.load("assets/flat")).figure()
    m.regimes_map(...), m.solvers(...), m.lens(...), m.evaluate(...)
"""

from .model import SHIPPED, Model, checkpoint_folder, load
from .results import Comparison, Evaluation, Lens, Paths, RegimesMap, SolverView, jsonable

__all__ = [
    "SHIPPED",
    "Comparison",
    "Evaluation",
    "Lens",
    "Model",
    "Paths",
    "RegimesMap",
    "SolverView",
    "checkpoint_folder",
    "jsonable",
    "load",
]
