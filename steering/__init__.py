"""A steerable continuous-depth transformer: model, training, analysis and the app's computations.

The public API (steering/api/) is here at the top level, imported on first use so that `import steering` (and
every `import steering.data...`) stays cheap:

    import steering
    m = steering.load()          # the shipped hybrid; steering.load("assets/flat"), or any checkpoint or run
    m.generate("The film was", u={"sentiment": 2.0}, n=2, seed=3)[0].text
"""

__all__ = ["load", "Model"]


def __getattr__(name: str):
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'steering' has no attribute {name!r}")
