"""What code made a record: the code version (a hash of xc_core's sources) and the git commit of the checkout.

A model or evaluation is reused only when it records the current code version (``stages.results``): the commit
alone cannot say that, since uncommitted edits change the code without changing HEAD, while a commit that touches
only docs or tests changes HEAD without changing what a model runs."""

from __future__ import annotations

import ast
import hashlib
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

#: the sources the code version covers: the xc_core package (this file's folder)
SOURCE_ROOT = Path(__file__).resolve().parent


def code_version(root: Path = SOURCE_ROOT) -> str:
    """Short sha256 over every ``*.py`` under ``root``, each as its path relative to ``root`` and its bytes, in
    path order: the same sources give the same version wherever the checkout lies."""
    digest = hashlib.sha256()
    for relative in sorted(path.relative_to(root).as_posix() for path in root.rglob("*.py")):
        data = (root / relative).read_bytes()
        # the path and length delimit each file, so moving bytes from one file into the next changes the hash
        digest.update(f"{relative}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:12]


def hash_files(digest: Any, root: Path, skip: frozenset[str] = frozenset()) -> None:
    """Feed ``digest`` (a ``hashlib`` object) every file under ``root`` (or ``root`` itself when it is a file; nothing
    when it is missing), in path order, each as its path relative to ``root``, its length and its bytes, read in
    blocks; files named in ``skip`` are left out. What decides a stage's output, for keys that say "same inputs"."""
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name not in skip) if root.is_dir() else (
        [root] if root.is_file() else [])
    for path in files:
        name = path.relative_to(root).as_posix() if root.is_dir() else path.name
        digest.update(f"{name}\0{path.stat().st_size}\0".encode())
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)


def git_state(folder: Path | None = None) -> tuple[str, bool] | None:
    """(HEAD, dirty) of the checkout xc runs from, or None outside a git checkout. Dirty: a tracked file that can
    change what runs differs from HEAD, or an untracked Python source lies in the tree (it counts in
    :func:`code_version` as much as an edit). Result files and Markdown pages are not code: a benchmark that writes
    its result, then another in the same checkout, both ran committed code (the rule of :func:`write_result`)."""
    cwd = folder or SOURCE_ROOT.parent

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True,
                              timeout=30).stdout.strip()

    try:
        head = git("rev-parse", "HEAD")
        tracked = [line[3:].split(" -> ")[-1].strip('"')
                   for line in git("status", "--porcelain", "--untracked-files=no").splitlines() if line.strip()]
        dirty = bool([p for p in tracked if not _not_code(p)]
                     or git("ls-files", "--others", "--exclude-standard", "--", "*.py"))
    except (OSError, subprocess.SubprocessError):
        return None
    return head, dirty


def checkout_stamp() -> dict[str, Any]:
    """The commit of the xc_core that runs, whether its checkout is dirty, and the folder it came from: what a
    benchmark's result records (``PYTHONPATH`` may point at a clean worktree of a commit while the main checkout
    has uncommitted edits; subprocesses such as ``xc serve`` inherit the same path)."""
    code = SOURCE_ROOT.parent
    head, dirty = git_state(code) or ("unknown", True)
    return {"commit": head[:7], "dirty": dirty, "xc_core_from": str(code)}


def _not_code(path: str) -> bool:
    """A result file (anything under a ``results/`` folder) or a Markdown page."""
    return "results/" in f"/{path}" or path.endswith(".md")


class UncommittedCode(RuntimeError):
    """A result file the repository keeps was about to be written from code that is not committed."""


def code_changes(folder: Path | None = None) -> list[str] | None:
    """The uncommitted paths of the checkout that can change what a benchmark or experiment computes: tracked files
    that differ from HEAD and untracked files, except result files (anything under a ``results/`` folder) and
    Markdown pages; None outside a git checkout."""
    cwd = folder or SOURCE_ROOT.parent
    try:
        listed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=cwd,
                                capture_output=True, text=True, check=True, timeout=30).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return None
    paths = [line[3:].split(" -> ")[-1].strip('"') for line in listed if line.strip()]
    return [p for p in paths if not _not_code(p)]


def write_result(path: Path, text: str, root: Path | None = None) -> Path:
    """Write ``text`` to ``path``, a result file; inside the checkout (a file the repository keeps) only from
    committed code. Refused, naming the changed files and the fix, when :func:`code_changes` finds any or the tree
    is not a git checkout (every figure names the commit that made it, so the commit must be the code).
    A path outside the checkout (scratch output) is written as is."""
    checkout = (root or SOURCE_ROOT.parent).resolve()
    if path.resolve().is_relative_to(checkout):
        changed = code_changes(checkout)
        if changed is None or changed:
            what = ("the tree is not a git checkout" if changed is None else
                    f"{len(changed)} uncommitted path(s): {', '.join(changed[:5])}{' …' if len(changed) > 5 else ''}")
            raise UncommittedCode(f"{path}: a result file is written only from committed code, and {what} — commit "
                                  "(or stash) them and run again, or write to a path outside the checkout")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def git_commit(folder: Path | None = None) -> str:
    """The one commit stamp every record carries: ``git rev-parse HEAD`` of the checkout xc runs from, marked when
    it has uncommitted changes or untracked sources (:func:`git_state`), else unknown."""
    state = git_state(folder)
    if state is None:
        return "unknown"
    head, dirty = state
    return f"{head} (with uncommitted changes)" if dirty else head


def code_stamp() -> dict[str, str]:
    """What a training or evaluation record carries: ``code_version`` and ``git_commit``."""
    return {"code_version": code_version(), "git_commit": git_commit()}


def outdated(record: dict[str, Any], current: str | None = None, key: str = "code_version",
             what: str = "code version") -> str | None:
    """Why ``record`` (a train or evaluation summary) was not made by the current code, or None when it was:
    its ``key`` equals ``current`` (default: :func:`code_version`, the whole package's; ``methods.versions`` passes a
    method's own). A record without one is outdated."""
    found = record.get(key)
    if found is None:
        return f"it records no {what}"
    now = current if current is not None else code_version()
    if found != now:
        return f"it was made by {what} {found} (commit {record.get('git_commit', 'unknown')}), now {now}"
    return None


def _module_file(module: str, root: Path = SOURCE_ROOT) -> Path | None:
    """The source file of an ``xc_core`` module (a package: its ``__init__.py``); of another module only when it is
    imported (a method a user registers from their own module); else None."""
    parts = module.split(".")
    if parts[0] != "xc_core":
        found = getattr(sys.modules.get(module), "__file__", None)
        return Path(found) if found else None
    base = root.joinpath(*parts[1:])
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imports_of(path: Path) -> set[str]:
    """Every xc_core module ``path`` imports, at module level or inside functions (``from pkg import mod`` names
    ``pkg.mod`` when that is a module, else ``pkg``); parsed once per version of the file."""
    stat = path.stat()
    return set(_parsed_imports(str(path), stat.st_mtime_ns, stat.st_size))


#: the nodes that hold statements: an import is a statement, so the walk never enters an expression
_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)


def _import_nodes(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of ``tree``, nested ones too (in functions, classes, ``if``/``try``/``with`` blocks,
    ``match`` cases): the statements only, which is several times faster than :func:`ast.walk` over every
    expression and finds the same nodes."""
    found: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
            continue
        for _, value in ast.iter_fields(node):
            if isinstance(value, list):
                todo.extend(v for v in value if isinstance(v, _BLOCKS))
    return found


@lru_cache(maxsize=4096)
def _parsed_imports(path: str, mtime_ns: int, size: int) -> frozenset[str]:
    found: set[str] = set()
    for node in _import_nodes(ast.parse(Path(path).read_text(), filename=path)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if _module_file(child) is not None else node.module)
    return frozenset(m for m in found if m.split(".")[0] == "xc_core")


def import_closure(modules: tuple[str, ...] | list[str], stop: tuple[str, ...] = ()) -> dict[str, Path]:
    """Module → source file for ``modules`` and every xc_core module they import, transitively (function-level
    imports too: they run all the same), in name order. A module in ``stop`` is not entered: a registry package
    such as ``xc_core.methods`` imports every method, and a stage's version must not change with every method's."""
    seen: dict[str, Path] = {}
    todo = [m for m in modules if m not in stop]
    while todo:
        module = todo.pop()
        path = _module_file(module)
        if module in seen or path is None:
            continue
        seen[module] = path
        todo.extend(m for m in _imports_of(path) if m not in seen and m not in stop)
    return dict(sorted(seen.items()))


def sources_version(modules: tuple[str, ...] | list[str], stop: tuple[str, ...] = ()) -> str:
    """:func:`code_version` over the import closure of ``modules`` only: what a stage or a method runs, so a change
    elsewhere in xc_core leaves its records current (``xc results`` retrains what a change touches, no more)."""
    digest = hashlib.sha256()
    for module, path in import_closure(modules, stop).items():
        data = path.read_bytes()
        digest.update(f"{module}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:12]


def home_key(home: Path) -> str:
    """A home as records name it: resolved, so a seed home's linked lineage is its main home's."""
    return str(Path(home).resolve())


def record_stamp(home: Path, profile: str, code_version: str, **made_from: Any) -> dict[str, Any]:
    """What a materialization records so that the next run can tell whether it is current
    (``xc_assets.defs.freshness``): the home, the profile, the code version of what it ran, what it was made from."""
    return {"home": home_key(home), "profile": profile, "code_version": code_version, **made_from}
