"""xc_core's sub-packages form layers: no import cycles between them, and every import points down.

The layers, lowest first (a package imports only from the layers before it):

1. ``paths``, ``seeds``, ``provenance``, ``storage``, ``progress``, ``measure``, ``plotting`` — the home's layout,
   named random streams, the code version, where the run history and registry live (SQLite or PostgreSQL), the
   progress bars, what benchmarks measure with and matplotlib on Agg; import nothing of xc_core; ``engines`` — what
   runs a stage on engines beside the process (Spark; dask for embedding), given SQL, files or an encoder factory,
   blind to what they mean
2. ``logs`` → ``simulate`` → ``datasets`` (the container, graph tables, the data-set registry) → ``quality``
3. ``encoders``, ``index`` — text encoders and label indexes, blind to data sets
4. ``graphs`` (anchor sets) → ``evaluation`` (metrics, analyses, report) → ``training`` (the trainer) →
   ``classifier`` → ``profiles`` → ``tracking`` (MLflow store, registry, the served model) → ``methods`` (each
   method trains, logs and serves itself, its pyfunc model included, so it stands on all of these)
5. ``serving`` — the champion over HTTP, from the registry alone
6. ``stages`` — one module per command: what the CLI and Dagster run (a profile, the home and MLflow around the
   libraries above; ``xc predict`` and ``xc serve`` call ``serving``)
7. ``cli``

Imports are read from the source (every ``import``/``from`` statement, inside functions and
``TYPE_CHECKING`` blocks too, and ``importlib.import_module("...")`` strings): a function-level import
is a dependency all the same, it only fails later.

Inside a package there are no circles either: among the modules of ``xc_core`` and among those of ``xc_assets``
(the Dagster wiring, above all of xc_core: ``tests/test_cli.py`` checks that no xc_core module imports
``xc_assets`` or ``dagster``), no module imports, directly or through others, a module that imports it back. A
module's import of its own package (``from xc_core.methods.irene import NAME`` in ``irene/stream.py``) is not
counted: Python initialises a package before any module in it, so that import orders nothing.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

import xc_assets
import xc_core

ROOT = Path(xc_core.__file__).parent
#: the packages whose modules must not import each other in a circle
PACKAGES = (ROOT, Path(xc_assets.__file__).parent)
#: the layers above, lowest first; a package may import only from packages in earlier layers
LAYERS: tuple[tuple[str, ...], ...] = (
    ("paths", "seeds", "provenance", "storage", "progress", "measure", "plotting"), ("engines",), ("logs",),
    ("simulate",), ("datasets",), ("quality",), ("encoders", "index"), ("graphs",), ("evaluation",), ("training",),
    ("classifier",), ("profiles",), ("tracking",), ("methods",), ("abtest",), ("serving",), ("stages",), ("cli",))

Edge = tuple[str, str]


def _package(module: str) -> str | None:
    """``xc_core.graphs.rwr`` → ``graphs``; ``xc_core.paths`` → ``paths``; None outside xc_core's children."""
    parts = module.split(".")
    return parts[1] if parts[0] == "xc_core" and len(parts) > 1 else None


def _imported(node: ast.AST) -> list[str]:
    """The modules one AST node imports (``from xc_core import seeds`` imports ``xc_core.seeds``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        return [f"{node.module}.{a.name}" for a in node.names] if node.module == "xc_core" else [node.module]
    if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module":
        return [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return []


def package_imports() -> dict[Edge, list[str]]:
    """(importing package, imported package) → every ``file:line`` that makes that edge."""
    edges: dict[Edge, list[str]] = defaultdict(list)
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        source = _package(".".join(("xc_core", *parts))) if parts != ("__init__",) else None
        for node in ast.walk(ast.parse(path.read_text())):
            for target in filter(None, map(_package, _imported(node))):
                if source is not None and target != source:
                    edges[(source, target)].append(f"{path.relative_to(ROOT.parent)}:{getattr(node, 'lineno', 0)}")
    return {edge: sorted(where, key=_file_line) for edge, where in edges.items()}


def _file_line(where: str) -> tuple[str, int]:
    path, line = where.rsplit(":", 1)
    return path, int(line)


def cyclic_groups(edges: dict[Edge, list[str]]) -> list[set[str]]:
    """Strongly connected components with more than one package (Tarjan's algorithm, iterative)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []
    for start in sorted(graph):
        if start not in order:
            _strongconnect(start, graph, order, low, stack, groups)
    return [g for g in groups if len(g) > 1]


def _strongconnect(start: str, graph: dict[str, set[str]], order: dict[str, int], low: dict[str, int],
                   stack: list[str], groups: list[set[str]]) -> None:
    work = [(start, iter(sorted(graph[start])))]
    order[start] = low[start] = len(order)
    stack.append(start)
    while work:
        node, children = work[-1]
        child = next(children, None)
        if child is None:
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == order[node]:  # node is its component's root: the component is on the stack above it
                cut = stack.index(node)
                groups.append(set(stack[cut:]))
                del stack[cut:]
        elif child not in order:
            order[child] = low[child] = len(order)
            stack.append(child)
            work.append((child, iter(sorted(graph[child]))))
        elif child in stack:
            low[node] = min(low[node], order[child])


def module_files() -> dict[str, Path]:
    """Module name → source file for every module of :data:`PACKAGES` (a package: its ``__init__.py``)."""
    found: dict[str, Path] = {}
    for root in PACKAGES:
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root.parent).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _module_targets(node: ast.AST, modules: dict[str, Path]) -> list[str]:
    """The modules of ``modules`` one AST node imports: ``from pkg import mod`` imports ``pkg.mod`` when that is a
    module, else ``pkg``; ``import pkg.mod.name`` the longest prefix that is one."""
    names = [f"{node.module}.{a.name}" for a in node.names] if (
        isinstance(node, ast.ImportFrom) and node.module and node.level == 0) else _imported(node)
    targets = []
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name:
            targets.append(name)
    return targets


def module_imports() -> dict[Edge, list[str]]:
    """(importing module, imported module) → every ``file:line`` that makes that edge, within :data:`PACKAGES`;
    a module's import of a package it lies in is left out (see the module docstring)."""
    modules = module_files()
    edges: dict[Edge, list[str]] = defaultdict(list)
    for source, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            for target in _module_targets(node, modules):
                if target != source and not source.startswith(f"{target}."):
                    edges[(source, target)].append(f"{path.relative_to(ROOT.parent)}:{getattr(node, 'lineno', 0)}")
    return {edge: sorted(set(where), key=_file_line) for edge, where in edges.items()}


def a_cycle(group: set[str], edges: dict[Edge, list[str]]) -> list[str]:
    """One shortest circle through the first member of ``group`` (a strongly connected component), as
    ``[a, b, …, a]``: what a failure names (breadth-first from ``a`` until an edge leads back to it)."""
    start = min(group)
    came_from: dict[str, str] = {start: start}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(b for a, b in edges if a == node and b in group):
                if target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if target not in came_from:
                    came_from[target] = node
                    following.append(target)
        frontier = following
    raise ValueError(f"{sorted(group)} is not a cycle")


def _describe(edges: dict[Edge, list[str]], keep: set[Edge]) -> str:
    return "\n".join(f"  {a} → {b}: {', '.join(edges[(a, b)])}" for a, b in sorted(keep))


def test_cyclic_groups_finds_a_cycle_through_three_packages_and_ignores_a_chain() -> None:
    edges = {("a", "b"): ["x"], ("b", "c"): ["x"], ("c", "a"): ["x"], ("c", "d"): ["x"], ("d", "e"): ["x"]}
    assert cyclic_groups(edges) == [{"a", "b", "c"}]


def test_a_function_level_import_is_an_edge() -> None:
    tree = ast.parse("def f():\n    from xc_core.graphs.rwr import RWRConfig\n    import xc_core.index.ann\n"
                     "from xc_core import seeds\n")
    found = sorted(filter(None, (_package(m) for n in ast.walk(tree) for m in _imported(n))))
    assert found == ["graphs", "index", "seeds"]


def test_a_cycle_names_the_circle_in_order() -> None:
    edges = {("a", "b"): ["x"], ("b", "c"): ["x"], ("c", "a"): ["x"], ("b", "a"): ["x"], ("c", "d"): ["x"]}
    assert a_cycle({"a", "b", "c"}, edges) == ["a", "b", "a"]
    assert a_cycle({"b", "c", "a"}, {k: v for k, v in edges.items() if k != ("b", "a")}) == ["a", "b", "c", "a"]


def test_a_module_importing_its_own_package_is_no_edge_but_a_package_importing_its_module_is() -> None:
    edges = module_imports()
    assert ("xc_core.methods.irene", "xc_core.methods.irene.scorer") in edges  # the package's method calls it
    assert ("xc_core.methods.irene.stream", "xc_core.methods.irene") not in edges  # ``from …irene import NAME``
    assert ("xc_core.classifier.stage", "xc_core.classifier.fusion") in edges
    assert any(a.startswith("xc_assets.") and b.startswith("xc_assets.") for a, b in edges), "xc_assets is read too"


def test_no_import_circle_among_the_modules_of_xc_core_or_xc_assets() -> None:
    edges = module_imports()
    groups = cyclic_groups(edges)
    circles = ["  " + " → ".join(a_cycle(g, edges)) + f"  (strongly connected: {', '.join(sorted(g))})"
               for g in groups]
    inside = {(a, b) for a, b in edges if any(a in g and b in g for g in groups)}
    assert not groups, "import circles among modules:\n" + "\n".join(circles) + "\nthe edges inside them:\n" + (
        _describe(edges, inside))


def test_no_import_cycles_between_xc_core_packages() -> None:
    edges = package_imports()
    groups = cyclic_groups(edges)
    inside = {(a, b) for a, b in edges if any(a in g and b in g for g in groups)}
    assert not groups, f"import cycles among {[sorted(g) for g in groups]}; the edges inside them:\n" + _describe(
        edges, inside)


def test_every_import_points_to_a_lower_layer() -> None:
    rank = {package: i for i, layer in enumerate(LAYERS) for package in layer}
    edges = package_imports()
    unknown = {p for edge in edges for p in edge} - set(rank)
    assert not unknown, f"packages in no layer: {sorted(unknown)} — add them to LAYERS (and the docstring)"
    upward = {(a, b) for a, b in edges if rank[b] >= rank[a]}
    assert not upward, "imports that do not point to a lower layer:\n" + _describe(edges, upward)


def private_cross_imports(roots: tuple[Path, ...], repo: Path = ROOT.parent) -> list[str]:
    """``file:line name`` for every private name (``_x``) imported from another package of xc_core or xc_assets:
    a module in ``xc_core/logs`` may use ``xc_core.logs.ingest._x``, nothing outside ``logs`` may. Benchmarks and
    experiments count as outside every package; paths are named relative to ``repo``."""
    found = []
    for base in roots:
        for path in sorted(base.rglob("*.py")):
            module = ".".join(path.relative_to(repo).with_suffix("").parts)
            for node in ast.walk(ast.parse(path.read_text())):
                if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0):
                    continue
                if node.module.split(".")[0] not in ("xc_core", "xc_assets"):
                    continue
                same = node.module.split(".")[:2] == module.split(".")[:2]
                found += [f"{path.relative_to(repo)}:{node.lineno} {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__") and not same]
    return found


def test_a_private_import_across_packages_is_found(tmp_path: Path) -> None:
    """The check below can fail: a benchmark reaching into a package's private helper is caught."""
    (tmp_path / "benchmarks").mkdir()
    script = tmp_path / "benchmarks" / "probe.py"
    script.write_text("from xc_core.classifier.stage import _private_helper\nfrom xc_core.paths import REPO_ROOT\n")
    assert private_cross_imports((tmp_path / "benchmarks",), repo=tmp_path) == [
        "benchmarks/probe.py:1 xc_core.classifier.stage._private_helper"]


def test_no_private_name_is_imported_across_packages() -> None:
    """Issue #65, public seams: what one package shares with another is public (no ``_`` prefix). The library,
    the Dagster layer, the benchmarks and the experiments; tests may still reach a module's private helpers."""
    repo = ROOT.parent
    found = private_cross_imports((ROOT, Path(xc_assets.__file__).parent, repo / "benchmarks", repo / "experiments"))
    assert not found, "private names imported from another package (make them public):\n" + "\n".join(found)


# -- scripts: benchmarks and experiments run as programs, never imported ------------------------------------------

#: where the scripts live (each ``*.py`` under them is a program: ``python benchmarks/bench_train.py …``)
SCRIPT_FOLDERS = ("benchmarks", "experiments")


def script_names(repo: Path) -> set[str]:
    """The module names a script could be imported by (its file's stem), from every script folder of ``repo``."""
    return {p.stem for folder in SCRIPT_FOLDERS for p in (repo / folder).rglob("*.py")} - set(
        sys.stdlib_module_names)


def script_imports(roots: tuple[Path, ...], repo: Path = ROOT.parent) -> list[str]:
    """``file:line what`` for every way a file under ``roots`` reaches a script as a module: an import of a name
    that is a script's stem, a ``sys.path`` entry made to a script folder (``"benchmarks"``, ``"experiments"`` or
    the file's own folder), and ``runpy.run_path(...)[name]`` (a script's function taken out of it). Running a
    script (``runpy`` with ``run_name="__main__"``, a subprocess) is not importing it. Paths relative to ``repo``."""
    scripts, found = script_names(repo), []
    for base in roots:
        for path in sorted(base.rglob("*.py")):
            source = path.read_text()
            where = f"{path.relative_to(repo)}"
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.Import | ast.ImportFrom) and getattr(node, "level", 0) == 0:
                    names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                    found += [f"{where}:{node.lineno} import {n}" for n in names if n.split(".")[0] in scripts]
                elif isinstance(node, ast.Call) and ast.unparse(node.func) in ("sys.path.insert", "sys.path.append"):
                    text = ast.unparse(node)
                    if any(f"'{folder}'" in text for folder in SCRIPT_FOLDERS) or ".parent))" in text:
                        found.append(f"{where}:{node.lineno} {text}")
                elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call) and ast.unparse(
                        node.value.func).endswith("run_path"):
                    found.append(f"{where}:{node.lineno} {ast.unparse(node)}")
    return found


def test_a_script_reaching_another_script_is_found(tmp_path: Path) -> None:
    """The check below can fail: an import of a sibling script, a path made to reach one, a function run out of
    one — each is caught; an import of the library and a script run as a program are not."""
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "experiments" / "q").mkdir(parents=True)
    (tmp_path / "benchmarks" / "bench_a.py").write_text("from xc_core.measure import free_port\n")
    (tmp_path / "experiments" / "q" / "grid.py").write_text(
        "import sys\nfrom pathlib import Path\nsys.path.insert(0, str(Path(__file__).parent))\n"
        "from bench_a import free_port\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "import runpy\nimport sys\nsys.path.insert(0, 'benchmarks')\nimport grid\n"
        "f = runpy.run_path('benchmarks/bench_a.py')['free_port']\nrunpy.run_path('benchmarks/bench_a.py', "
        "run_name='__main__')\n")
    roots = (tmp_path / "benchmarks", tmp_path / "experiments", tmp_path / "tests")
    assert sorted(script_imports(roots, repo=tmp_path)) == [
        "experiments/q/grid.py:3 sys.path.insert(0, str(Path(__file__).parent))",
        "experiments/q/grid.py:4 import bench_a",
        "tests/test_x.py:3 sys.path.insert(0, 'benchmarks')",
        "tests/test_x.py:4 import grid",
        "tests/test_x.py:5 runpy.run_path('benchmarks/bench_a.py')['free_port']"]


def test_no_script_imports_another_and_no_test_imports_a_script() -> None:
    """What scripts share lives in the library (``xc_core.measure``, ``xc_core.serving.load`` …): a script is a
    program, run by a user or by a test as a subprocess, and a test of its logic tests the library it calls."""
    repo = ROOT.parent
    found = script_imports(tuple(repo / folder for folder in (*SCRIPT_FOLDERS, "tests")))
    assert not found, "scripts reached as modules (move what they share into xc_core):\n" + "\n".join(found)


# -- the library's text states contracts; its history is in docs/results/ ------------------------------------------

#: an issue or session named in the code: ``issue #43``, ``(#18)``, ``issue 43``, ``session 53``; a link to the page
#: that holds its history (``docs/results/issue-43.md``) is where the reader should go, and is no mention
HISTORY = re.compile(r"\bissue ?#?\d+|\(#\d+\b|#\d{2,3}'s\b|\bsession \d+", re.IGNORECASE)
PAGE = re.compile(r"issue-\d+\.md")


def history_mentions(roots: tuple[Path, ...], repo: Path = ROOT.parent) -> list[str]:
    """``file:line`` for every line of the packages' sources naming an issue or a session."""
    return [f"{path.relative_to(repo)}:{number}" for base in roots for path in sorted(base.rglob("*.py"))
            for number, line in enumerate(path.read_text().splitlines(), start=1)
            if HISTORY.search(PAGE.sub("", line))]


def test_a_docstring_naming_an_issue_is_found(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    source = '"""The stage (issue #18)."""\nCOLOR = "#1f77b4"  # docs/results/issue-18.md\n'
    (tmp_path / "pkg" / "mod.py").write_text(source)
    assert history_mentions((tmp_path / "pkg",), repo=tmp_path) == ["pkg/mod.py:1"]


def test_no_issue_or_session_is_named_in_the_library_or_the_dagster_layer() -> None:
    """Issue #65: a docstring says what its code takes, returns and guarantees, and why; which issue asked for it and
    what was measured live in docs/results/ (the tests and the experiments may name them)."""
    found = history_mentions((ROOT, Path(xc_assets.__file__).parent))
    assert not found, "name the reason, not the issue (history goes to docs/results/):\n" + "\n".join(found)
