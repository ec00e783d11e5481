"""Which modules may import which, read from the source (AST) without importing anything.

steering.analysis sits below the evaluation: `analyze` shares the evaluation's prompts and probes through
steering.evaluation.measures, never steering.evaluation.evaluate. steering.figures draws plain numbers and arrays: it never
imports torch or another steering module (the app's pages bring the model's numbers to it).
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
    assert "steering.model.ode.SolverConfig" in imported_modules(PACKAGE / "analysis" / "cli.py")  # from ..ode
    assert "steering.analysis.middle" in imported_modules(PACKAGE / "evaluate.py")  # from .analysis.middle
    assert "steering.analysis.pca" in imported_modules(PACKAGE / "analysis" / "__init__.py")  # from .pca
    assert "numpy" in imported_modules(PACKAGE / "figures" / "flow.py")


def test_no_analysis_module_imports_the_evaluation():
    offenders = {
        module_name(path): sorted(
            m
            for m in steering_imports(path)
            if m == "steering.evaluation.evaluate" or m.startswith("steering.evaluation.evaluate.")
        )
        for path in sorted((PACKAGE / "analysis").glob("*.py"))
    }
    assert not {k: v for k, v in offenders.items() if v}, (
        "steering.analysis must not import steering.evaluation.evaluate (share code through steering.evaluation.measures)"
    )


def test_the_shared_measures_sit_below_evaluation_and_analysis():
    below = steering_imports(PACKAGE / "measures.py")
    assert not {m for m in below if m.startswith(("steering.evaluation.evaluate", "steering.analysis"))}


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
    from steering.evaluation import evaluate, measures

    for name in (
        "FULL",
        "QUICK",
        "SEED",
        "NEW_TOKENS",
        "PROMPT_TOKENS",
        "PROBE_PROMPT_VARIANTS",
        "heldout_prompts",
        "generate_for_prompts",
        "perplexity_by_side",
        "probe_over_prompts",
        "solver_divergence",
    ):
        assert getattr(evaluate, name) is getattr(measures, name), name


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
