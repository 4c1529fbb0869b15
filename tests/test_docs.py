"""The docs' links and their anchors resolve, the files they quote exist, the pages a person reads stay
short in lines and in line length, the lab's README names every script, the project speaks of itself by
dates and commits, the package's import graph has no cycle (docs/ARCHITECTURE.md draws it as floors), no
function in the package is longer than a person reads at once, and each comment in a preset fits two lines."""
from __future__ import annotations

import ast
import re
import subprocess
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)\s]+)\)")
# The pages a person reads through: a line or a table cell longer than this is a paragraph in disguise.
READ_PAGES = ("README.md", "docs/results.md", "docs/performance.md")
LONGEST = 200
# The longest function in rlscale/, its def line to its last: past this a loop has grown a second job.
LONGEST_FUNCTION = 80


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


# A file or module of the repository named in code quotes: `rlscale/control/cost.py`, `agents/a2c`, `tests/x.py:12`.
REPO_PATH = re.compile(r"`((?:rlscale|benchmarks|tests|research|scripts|envs|agents|docs|\.ci)/[\w./-]*?)(?::\d+)?`")


def test_every_file_the_docs_name_in_code_quotes_exists():
    """A path in quotes is one a reader opens; ARCHITECTURE.md names modules from the package's root."""
    missing = []
    for page in _markdown_files():
        for number, line in enumerate(page.read_text().splitlines(), 1):
            for name in REPO_PATH.findall(line):
                if "mygame" in name:
                    continue  # the user's own preset in an example
                if not any(p.exists() for p in (ROOT / name, ROOT / "rlscale" / name, ROOT / "rlscale" / f"{name}.py")):
                    missing.append(f"{page.relative_to(ROOT)}:{number}: {name}")
    assert not missing, missing


def _heading_anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, letters, digits, '_', '-' and spaces kept, spaces to '-'."""
    kept = (c for c in heading.strip().lower()
            if c in " -" or unicodedata.category(c)[0] in "LMN" or unicodedata.category(c) == "Pc")
    return "".join(kept).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    found: set[str] = set()
    counts: dict[str, int] = {}
    in_code = False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
        elif not in_code and (heading := re.match(r"#{1,6}\s+(.*)", line)):
            anchor = _heading_anchor(heading.group(1))
            found.add(f"{anchor}-{counts[anchor]}" if anchor in counts else anchor)
            counts[anchor] = counts.get(anchor, 0) + 1
    return found


def test_every_link_into_a_section_finds_its_heading():
    """A link to page.md#section breaks silently when the section moves (docs/performance.md's history did)."""
    pages = [*_markdown_files(), *sorted((ROOT / "research").glob("*.md"))]
    broken = []
    for page in pages:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target) or "#" not in target:
                continue
            path, anchor = target.split("#", 1)
            linked = (page.parent / path).resolve() if path else page
            if linked.suffix == ".md" and linked.exists() and anchor not in _anchors(linked):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_the_anchor_rule_reads_headings_as_github_does():
    assert _heading_anchor("How fast is it against a hand-written loop, and against the machine's ceiling?") \
        == "how-fast-is-it-against-a-hand-written-loop-and-against-the-machines-ceiling"
    assert _heading_anchor("Measuring the critical batch: `rlscale measure`") \
        == "measuring-the-critical-batch-rlscale-measure"


def _too_long(text: str) -> list[str]:
    """Prose lines and table cells over LONGEST characters; fenced code (a run's header, say) is exempt."""
    found, in_code = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        elif in_code:
            continue
        elif line.lstrip().startswith("|"):
            found += [f"{number}: cell {cell.strip()[:60]}" for cell in line.strip().strip("|").split("|")
                      if len(cell.strip()) > LONGEST]
        elif len(line) > LONGEST:
            found.append(f"{number}: line {line[:60]}")
    return found


def test_the_pages_a_person_reads_have_no_paragraph_on_one_line():
    """The line caps below hold a page to a length a person reads only if its lines stay lines."""
    found = {page: _too_long((ROOT / page).read_text()) for page in READ_PAGES}
    assert not any(found.values()), found


def test_the_line_rule_catches_a_long_line_and_cell_but_not_code():
    long = "x" * (LONGEST + 1)
    assert _too_long(f"{long}\n| a | {long} |\n```\n{long}\n```\nshort") == [
        f"1: line {long[:60]}", f"2: cell {long[:60]}"]
    assert _too_long(f"```\n{long}\n```\n| a | b |\nshort") == []


def test_readme_fits_on_a_front_page():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 120


def test_results_hold_the_current_answers_only():
    assert len((ROOT / "docs" / "results.md").read_text().splitlines()) <= 300


def test_performance_holds_the_current_choices_and_tables_only():
    """The history lives in research/performance-history.md."""
    assert len((ROOT / "docs" / "performance.md").read_text().splitlines()) <= 300


def test_the_labs_readme_names_every_experiment_script():
    readme = (ROOT / "research" / "README.md").read_text()
    scripts = sorted(p.name for p in (ROOT / "research" / "experiments").iterdir()
                     if p.is_file() and p.suffix in {".py", ".sh"})
    assert len(scripts) > 20  # the walk found the scripts
    missing = [name for name in scripts if f"`{name}`" not in readme]
    assert not missing, missing


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


def _long_functions(source: str, limit: int) -> list[tuple[str, int]]:
    """(name, lines) of each function, method or nested function longer than ``limit`` lines."""
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > limit]


def test_no_function_in_the_package_runs_over_80_lines():
    files = sorted((ROOT / "rlscale").rglob("*.py"))
    assert len(files) > 30
    long = {str(path.relative_to(ROOT)): found for path in files
            if (found := _long_functions(path.read_text(), LONGEST_FUNCTION))}
    assert not long, long


def test_the_length_rule_counts_a_method_from_its_def_to_its_last_line():
    body = "\n".join(f"        x{i} = {i}" for i in range(80))
    source = f"class A:\n    @staticmethod\n    def f():\n{body}\n\n\ndef g():\n    pass\n"
    assert _long_functions(source, 80) == [("f", 81)]
    assert _long_functions(source, 81) == []


def _comment_blocks(text: str) -> list[list[str]]:
    """Runs of consecutive comment lines."""
    blocks: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            blocks[-1].append(line)
        elif blocks[-1]:
            blocks.append([])
    return [b for b in blocks if b]


def test_every_comment_in_a_preset_says_its_why_in_two_lines():
    presets = sorted((ROOT / "envs").glob("*.toml")) + sorted((ROOT / "agents").glob("*.toml"))
    assert len(presets) >= 5
    long = {p.name: block for p in presets for block in _comment_blocks(p.read_text()) if len(block) > 2}
    assert not long, long
    assert [len(b) for b in _comment_blocks("# a\n# b\nx = 1\n# c\n\n# d\n# e\n# f\n")] == [2, 1, 3]
