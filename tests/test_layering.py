"""xc_core's sub-packages form layers: no import cycles between them, and every import points down.

The layers, lowest first (a package imports only from the layers before it):

1. ``paths``, ``seeds``, ``provenance`` — the home's layout, named random streams and the code version; import
   nothing of xc_core
2. ``logs`` → ``simulate`` → ``datasets`` (the container, graph tables, the data-set registry) → ``quality``
3. ``encoders``, ``index`` — text encoders and label indexes, blind to data sets
4. ``graphs`` (anchor sets) → ``evaluation`` (metrics, analyses, report) → ``training`` (the trainer) →
   ``classifier`` → ``profiles`` → ``tracking`` (MLflow store, pyfunc, registry) → ``methods`` (each method
   trains, logs and serves itself, so it stands on all of these)
5. ``stages`` — what the CLI and Dagster run: a profile, the home and MLflow around the libraries above
6. ``serving``, ``cli``

Imports are read from the source (every ``import``/``from`` statement, inside functions and
``TYPE_CHECKING`` blocks too, and ``importlib.import_module("...")`` strings): a function-level import
is a dependency all the same, it only fails later.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import xc_core

ROOT = Path(xc_core.__file__).parent
#: the layers above, lowest first; a package may import only from packages in earlier layers
LAYERS: tuple[tuple[str, ...], ...] = (
    ("paths", "seeds", "provenance"), ("logs",), ("simulate",), ("datasets",), ("quality",), ("encoders", "index"),
    ("graphs",), ("evaluation",), ("training",), ("classifier",), ("profiles",), ("tracking",), ("methods",),
    ("abtest",), ("stages",), ("serving",), ("cli",))

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
