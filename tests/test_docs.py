"""The docs' links resolve, the project speaks of itself by dates and commits, and the
package's import graph has no cycle (docs/ARCHITECTURE.md draws it as floors)."""
from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_relative_link_in_readme_and_docs_resolves():
    broken = []
    for page in _markdown_files():
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a web address or an anchor on the same page
            path = (page.parent / target.split("#")[0]).resolve()
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_readme_fits_on_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 120
    long_cells = [cell.strip()[:60] for line in lines if line.startswith("|")
                  for cell in line.strip("|").split("|") if len(cell.strip()) > 200]
    assert not long_cells, long_cells


def test_results_hold_the_current_answers_only():
    assert len((ROOT / "docs" / "results.md").read_text().splitlines()) <= 300


def test_the_package_neither_imports_nor_cites_the_lab():
    """research/ is the lab: nothing in rlscale/ imports it, and the code cites docs/, not the notebook."""
    for path in (ROOT / "rlscale").rglob("*.py"):
        text = path.read_text()
        assert "notebook" not in text, path
        assert not re.search(r"^\s*(from|import) research", text, re.M), path


def test_no_numbered_sessions_anywhere_in_the_project():
    found = subprocess.run(["git", "grep", "-i", "-n", "session [0-9]"], cwd=ROOT,
                           capture_output=True, text=True)
    if found.returncode == 128:  # not a git checkout (an unpacked sdist): read the project's own files
        files = [ROOT / "README.md", *(p for top in ("docs", "rlscale", "tests", "scripts", "benchmarks", "runs")
                                       for p in (ROOT / top).rglob("*"))]
        hits = [f"{p}" for p in files if p.is_file() and p.suffix in {".md", ".py", ".toml", ".log"}
                and re.search(r"session [0-9]", p.read_text(errors="ignore"), re.I)]
    else:
        hits = found.stdout.splitlines()
    assert not hits, hits


def _module_imports(package: Path) -> dict[str, set[str]]:
    """Module name -> the rlscale modules it imports at module level or inside functions."""
    modules = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".")[: len(name.split(".")) - node.level + is_package]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                targets = [stem] + [f"{stem}.{alias.name}" for alias in node.names]
            else:
                continue
            edges.update(t for t in targets if t in modules and t != name)
        graph[name] = edges
    return graph


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_import_graph_between_modules_has_no_cycle():
    graph = _module_imports(ROOT / "rlscale")
    # A package's __init__ re-exporting its own modules is not a cycle between rooms.
    graph = {m: {t for t in ts if not (m.startswith(t + ".") and t in graph)} for m, ts in graph.items()}
    assert len(graph) > 30 and any(graph.values())  # the walk found the package's modules and edges
    assert _find_cycle(graph) is None, " -> ".join(_find_cycle(graph))


def test_the_cycle_finder_finds_a_planted_cycle():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None
