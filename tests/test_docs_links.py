"""The README and docs/: every relative link and image resolves, every #anchor names a heading.

Anchors follow GitHub's rule for heading ids: the heading's text (inline markup dropped),
lower-cased, every character that is not a letter, digit, underscore, hyphen or space
removed, spaces turned into hyphens; a repeated heading gets -1, -2, ...
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_BYTES = 12_000
REQUIRED_DOCS = ("model-card.md", "journal.md", "benchmarks.md", "architecture.md")

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
CODE_SPAN = re.compile(r"(`+)((?:(?!\n[ \t]*\n).)+?)\1", re.S)  # may wrap a line, never a paragraph
# [text](target) and ![alt](target); the text may hold one level of brackets (an image in a link)
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]*)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)", re.M)
HTML_ATTR = re.compile(r"""<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.I)
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.I)


def markdown_files() -> list[Path]:
    return [README] + sorted(DOCS.glob("*.md"))


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced and indented code blocks (code lines come back empty)."""
    out, fence, in_indented, previous_blank = [], None, False, True
    for line in text.splitlines():
        match = FENCE.match(line)
        if fence is not None:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = None
            out.append("")
            continue
        if match:
            fence = match.group(1)
            out.append("")
            continue
        blank = not line.strip()
        indented = line.startswith("    ") or line.startswith("\t")
        in_indented = indented and not blank and (previous_blank or in_indented) or (in_indented and blank)
        out.append("" if in_indented and not blank else line)
        previous_blank = blank
    return out


def slug(heading: str) -> str:
    """GitHub's id for a heading's markdown text."""
    text = CODE_SPAN.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link or image: its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML tags
    text = text.strip().lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in "_- ")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose_lines(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    text = path.read_text(encoding="utf-8")
    out.update(re.findall(r"""<a\s+(?:name|id)\s*=\s*["']([^"']+)["']""", text, re.I))
    return out


def link_targets(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every link and image in the file's prose; a link's text may wrap."""
    prose = "\n".join(prose_lines(path.read_text(encoding="utf-8")))
    # blank out code spans, keeping the line breaks so line numbers stay right
    prose = CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), prose)
    found = []
    for regex in (INLINE_LINK, REFERENCE_DEF, HTML_ATTR):
        for match in regex.finditer(prose):
            found.append((prose.count("\n", 0, match.start()) + 1, match.group(1).strip("<>")))
    return sorted(found)


def broken_links(path: Path) -> list[str]:
    """Every relative link of `path` that names a missing file or a missing heading."""
    problems = []
    for number, target in link_targets(path):
        where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{number}: {target}"
        if not target:
            problems.append(f"{where} (empty link)")
            continue
        if EXTERNAL.match(target):
            continue
        file_part, _, fragment = target.partition("#")
        resolved = (path.parent / unquote(file_part)).resolve() if file_part else path
        if not resolved.exists():
            problems.append(f"{where} (no such file)")
            continue
        if fragment:
            if resolved.is_dir() or resolved.suffix.lower() != ".md":
                problems.append(f"{where} (an anchor into a file that is not markdown)")
            elif unquote(fragment).lower() not in anchors(resolved):
                problems.append(f"{where} (no heading #{fragment} in {resolved.name})")
    return problems


def test_readme_is_short():
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, (
        f"README.md is {size} bytes; keep it at most {README_MAX_BYTES} (move detail to docs/)"
    )


@pytest.mark.parametrize("name", REQUIRED_DOCS)
def test_doc_exists(name):
    doc = DOCS / name
    assert doc.is_file() and doc.read_text(encoding="utf-8").strip(), f"docs/{name} is missing or empty"


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(path):
    assert link_targets(path) or path != README, "README.md should link to its docs"
    problems = broken_links(path)
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_readme_links_every_doc():
    linked = {(README.parent / t.partition("#")[0]).resolve() for _, t in link_targets(README) if not EXTERNAL.match(t)}
    missing = [name for name in REQUIRED_DOCS if (DOCS / name).resolve() not in linked]
    assert not missing, f"README.md does not link to {missing}"


# ---------------------------------------------------------------- the checker itself
def test_slug_follows_githubs_rule():
    assert slug("The shipped stage 2: steering the negative side") == "the-shipped-stage-2-steering-the-negative-side"
    assert slug("Inference (`bench`)") == "inference-bench"
    assert slug("The lab in a browser (`bench_app`)") == "the-lab-in-a-browser-bench_app"
    assert slug("A longer stage 1 (1,800 steps; not shipped)") == "a-longer-stage-1-1800-steps-not-shipped"
    assert slug("Bias, Risks, and Limitations") == "bias-risks-and-limitations"
    assert slug("How u travels: slider -> vector field -> figure") == "how-u-travels-slider---vector-field---figure"


def test_checker_catches_broken_links_and_anchors(tmp_path):
    (tmp_path / "other.md").write_text("# Other\n\n## A section\n\n## A section\n", encoding="utf-8")
    (tmp_path / "pic.png").write_bytes(b"")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n"
        "[ok](other.md) [ok](other.md#a-section) [ok](other.md#a-section-1) ![ok](pic.png) [ok](#page)\n"
        "[ok](https://example.org/missing.md) `[not a link](nowhere.md)` [a link whose text\nwraps](other.md)\n\n"
        "    [code, not a link](nowhere.md)\n\n"
        "```\n[fenced, not a link](nowhere.md)\n# not a heading\n```\n\n"
        "[bad file](missing.md) ![bad image](missing.png) [bad anchor](other.md#no-such-section)\n"
        "[bad local anchor](#not-a-heading) [a wrapped\nbad link](#not-a-heading-either)\n",
        encoding="utf-8",
    )
    problems = broken_links(page)
    assert len(problems) == 5, problems
    for target in ("missing.md", "missing.png", "other.md#no-such-section", "#not-a-heading"):
        assert any(target in p for p in problems), (target, problems)
    assert not any("nowhere" in p for p in problems)
