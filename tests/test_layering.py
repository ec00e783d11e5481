"""Which modules may import which, read from the source (AST) without importing anything.

steering/ is a few domain packages with one order, lowest first (DOMAINS): a module imports only from its own
domain and the ones before it, inside functions too. So the data, the judges and the model know nothing of
training or the lab; analysis computes on the model without the evaluation; the public API (api/: steering.load()
and its views) sits on everything but the command line (cli/ and __main__.py), which sits on top and nothing
imports. The package's own __init__ reaches the API lazily (steering.load) and belongs to no domain.
steering.figures draws plain numbers and arrays: it never imports torch or another steering domain (the app's
pages bring the model's numbers to it). No module imports
one that imports it back, and nothing in steering/ imports Streamlit (only app.py, lab_ui/ and pages/ do).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "steering"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """Every module an import statement anywhere in the file names, relative imports resolved; `from X import y`
    yields both X and X.y (y may be a submodule)."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def steering_imports(path: Path) -> set[str]:
    return {m for m in imported_modules(path) if m == "steering" or m.startswith("steering.")}


def test_imported_modules_resolves_relative_imports():
    assert "steering.model.ode.SolverConfig" in imported_modules(PACKAGE / "cli" / "analyze.py")  # from ..model.ode
    assert "steering.analysis.middle" in imported_modules(PACKAGE / "evaluation" / "evaluate.py")  # ..analysis.middle
    assert "steering.analysis.pca" in imported_modules(PACKAGE / "analysis" / "__init__.py")  # from .pca
    assert "numpy" in imported_modules(PACKAGE / "figures" / "flow.py")


# the domains of steering/, lowest first; steering/__main__.py is the command line's
DOMAINS = ("data", "judges", "model", "inference", "training", "analysis", "figures", "evaluation", "lab", "api", "cli")
LOOSE = {"steering", "steering.__main__"}  # the package itself and `python -m steering`


def domain_of(module: str) -> str | None:
    """The domain a steering module belongs to (None for the package itself)."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    return "cli" if parts[1] == "__main__" else parts[1]


def against_the_order(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a domain to a later one, as 'module (domain) -> module (domain)'."""
    found = []
    for name in sorted(graph):
        here = domain_of(name)
        for target in sorted(graph[name]):
            there = domain_of(target)
            if here in DOMAINS and there in DOMAINS and DOMAINS.index(there) > DOMAINS.index(here):
                found.append(f"{name} ({here}) -> {target} ({there})")
    return found


def test_steering_is_its_domains_and_a_few_loose_modules():
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(loose) <= 4, loose
    packages = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    assert packages == sorted(DOMAINS), packages
    outside = sorted(m for m in _import_graph() if m not in LOOSE and domain_of(m) not in DOMAINS)
    assert not outside, outside


def test_the_order_check_finds_an_import_against_it():
    graph = {
        "steering.data.reviews": {"steering.data.tokenizer"},
        "steering.model.ode": {"steering.training.train", "steering.data.reviews"},
        "steering.__main__": {"steering.cli.main"},
        "steering.cli.main": {"steering.lab.logic"},
    }
    assert against_the_order(graph) == ["steering.model.ode (model) -> steering.training.train (training)"]


def test_imports_run_down_the_domain_order():
    offenders = against_the_order(_import_graph())
    assert not offenders, "imports against the order " + " < ".join(DOMAINS) + ":\n" + "\n".join(offenders)


def test_nothing_in_steering_imports_streamlit():
    offenders = {
        module_name(path): sorted(m for m in imported_modules(path) if m.split(".")[0] == "streamlit")
        for path in sorted(PACKAGE.rglob("*.py"))
    }
    assert not {k: v for k, v in offenders.items() if v}


def test_figures_import_neither_torch_nor_the_model():
    offenders = {}
    for path in sorted((PACKAGE / "figures").glob("*.py")):
        bad = {
            m
            for m in imported_modules(path)
            if m.split(".")[0] in ("torch", "torchdiffeq")
            or (m.startswith("steering.") and not m.startswith("steering.figures"))
        }
        if bad:
            offenders[module_name(path)] = sorted(bad)
    assert not offenders, "steering.figures draws plain numbers: no torch, no model code"


def test_evaluate_reexports_the_shared_measures_unchanged():
    from steering.data import heldout
    from steering.evaluation import evaluate, measures

    for source, names in (
        (measures, ("FULL", "QUICK", "SEED", "NEW_TOKENS", "generate_for_prompts", "perplexity_by_side")),
        (measures, ("probe_over_prompts", "solver_divergence")),
        (heldout, ("PROMPT_TOKENS", "PROBE_PROMPT_VARIANTS", "heldout_prompts")),
    ):
        for name in names:
            assert getattr(evaluate, name) is getattr(source, name), name


def _import_graph() -> dict[str, set[str]]:
    """steering module -> the steering modules it imports (anywhere in the file, inside functions too)."""
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {m for m in steering_imports(path) if m in paths and m != name} for name, path in paths.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest cycle through each module that is on one (breadth-first from each module back to itself)."""
    found = []
    for start in sorted(graph):
        paths, seen = [[start]], {start}
        while paths:
            path = paths.pop(0)
            if start in graph[path[-1]]:
                found.append(path)
                break
            for nxt in sorted(graph[path[-1]] - seen):
                seen.add(nxt)
                paths.append(path + [nxt])
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        ["a", "b", "c"],
        ["b", "c", "a"],
        ["c", "a", "b"],
    ]


def test_no_module_imports_one_that_imports_it_back():
    graph = _import_graph()
    graph = {k: {m for m in v if m != "steering"} for k, v in graph.items()}  # `from steering import x`: the package
    packages = {module_name(p) for p in PACKAGE.rglob("__init__.py")}
    # a package's __init__ re-exporting its own submodules is not a cycle between layers
    graph = {k: {m for m in v if not (k in packages and m.startswith(k + "."))} for k, v in graph.items()}
    assert _cycles(graph) == []
