"""Which modules may import which, read from the source (AST) without importing anything.

steering.analysis sits below the evaluation: `analyze` shares the evaluation's prompts and probes through
steering.measures, never steering.evaluate. steering.figures draws plain numbers and arrays: it never
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
    assert "steering.ode.SolverConfig" in imported_modules(PACKAGE / "analysis" / "cli.py")  # from ..ode
    assert "steering.analysis.middle" in imported_modules(PACKAGE / "evaluate.py")  # from .analysis.middle
    assert "steering.analysis.pca" in imported_modules(PACKAGE / "analysis" / "__init__.py")  # from .pca
    assert "numpy" in imported_modules(PACKAGE / "figures" / "flow.py")


def test_no_analysis_module_imports_the_evaluation():
    offenders = {
        module_name(path): sorted(
            m for m in steering_imports(path) if m == "steering.evaluate" or m.startswith("steering.evaluate.")
        )
        for path in sorted((PACKAGE / "analysis").glob("*.py"))
    }
    assert not {k: v for k, v in offenders.items() if v}, (
        "steering.analysis must not import steering.evaluate (share code through steering.measures)"
    )


def test_the_shared_measures_sit_below_evaluation_and_analysis():
    below = steering_imports(PACKAGE / "measures.py")
    assert not {m for m in below if m.startswith(("steering.evaluate", "steering.analysis"))}


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
    from steering import evaluate, measures

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
