"""The code version is a hash of xc_core's sources: it follows their content and paths, not where the checkout lies;
a record made by other code (or by code that recorded none) is outdated; the git commit says when the checkout had
uncommitted changes."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import xc_core
from xc_core.provenance import UncommittedCode, code_version, git_commit, git_state, outdated, write_result

SOURCES = {"__init__.py": "", "paths.py": "HOME = 'x'\n", "stages/__init__.py": "", "stages/train.py": "EPOCHS = 2\n"}


def _sources(root: Path) -> Path:
    for relative, text in SOURCES.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root


def test_the_code_version_follows_the_sources_content_and_paths_not_the_folder(tmp_path: Path) -> None:
    first = code_version(_sources(tmp_path / "a" / "xc_core"))
    assert len(first) == 12 and int(first, 16) >= 0
    (tmp_path / "elsewhere").mkdir()
    moved = shutil.move(tmp_path / "a", tmp_path / "elsewhere" / "b")
    assert code_version(Path(moved) / "xc_core") == first, "a moved checkout runs the same code"
    root = Path(moved) / "xc_core"
    (root / "README.md").write_text("not code")
    (root / "stages" / "__pycache__").mkdir()
    (root / "stages" / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\0")
    assert code_version(root) == first, "only .py sources count"
    (root / "stages" / "train.py").write_text("EPOCHS = 3\n")
    changed = code_version(root)
    assert changed != first
    (root / "stages" / "train.py").rename(root / "stages" / "fit.py")
    assert code_version(root) not in (first, changed), "a renamed module is other code"


def test_the_installed_package_has_the_version_of_a_copy_of_its_sources(tmp_path: Path) -> None:
    package = Path(xc_core.__file__).parent
    copy = shutil.copytree(package, tmp_path / "checkout" / "xc_core", ignore=shutil.ignore_patterns("__pycache__"))
    assert code_version(copy) == code_version()


def test_a_record_of_other_code_or_of_none_is_outdated() -> None:
    assert outdated({"code_version": "abc"}, "abc") is None
    assert outdated({}, "abc") == "it records no code version"
    why = outdated({"code_version": "old", "git_commit": "1234567"}, "abc")
    assert why is not None and "old" in why and "1234567" in why and "abc" in why
    assert outdated({"code_version": code_version()}) is None, "the default is the installed code's version"


def test_the_git_commit_is_head_marked_when_sources_changed_or_were_added(tmp_path: Path) -> None:
    assert git_commit(tmp_path) == "unknown"  # not a checkout

    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path,
                              check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git("add", "a.py")
    git("commit", "-q", "-m", "one")
    head = git("rev-parse", "HEAD")
    (tmp_path / "notes.txt").write_text("untracked, not code\n")
    assert git_commit(tmp_path) == head, "an untracked file that is no source leaves the code as committed"
    (tmp_path / "new.py").write_text("untracked = True\n")
    assert git_commit(tmp_path) == f"{head} (with uncommitted changes)", \
        "an untracked source counts in the code version, so the commit alone does not name the code"
    (tmp_path / "new.py").unlink()
    assert git_commit(tmp_path) == head
    (tmp_path / "a.py").write_text("x = 2\n")
    assert git_commit(tmp_path) == f"{head} (with uncommitted changes)"


def test_a_result_file_is_written_only_from_committed_code(tmp_path: Path) -> None:
    """Issue #64: a refusal, not a flag. Result files and pages may differ from HEAD (a grid rewrites its own
    results between runs); code may not, tracked or untracked."""
    repo, scratch = tmp_path / "repo", tmp_path / "scratch"
    repo.mkdir()
    result = repo / "benchmarks" / "results" / "r.json"
    with pytest.raises(UncommittedCode, match="not a git checkout"):
        write_result(result, "{}", root=repo)

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                       capture_output=True)

    git("init", "-q")
    (repo / "bench.py").write_text("x = 1\n")
    git("add", "bench.py")
    git("commit", "-q", "-m", "one")
    assert write_result(result, "{}\n", root=repo).read_text() == "{}\n"
    (repo / "README.md").write_text("a page\n")
    assert write_result(result, "{\"again\": 1}\n", root=repo).exists(), "results and pages never block"
    git("add", "-A")
    git("commit", "-q", "-m", "a result and a page")
    result.write_text("{\"changed\": 1}\n")
    (repo / "README.md").write_text("another page\n")
    state = git_state(repo)
    assert state is not None and not state[1], "a changed result file or page is no uncommitted code in the stamp"
    (repo / "bench.py").write_text("x = 2\n")
    (repo / "helper.py").write_text("y = 1\n")
    with pytest.raises(UncommittedCode, match=r"2 uncommitted path\(s\): bench.py, helper.py — commit"):
        write_result(result, "{\"dirty\": 1}\n", root=repo)
    state = git_state(repo)
    assert state is not None and state[1], "an edited source is uncommitted code"
    assert "dirty" not in result.read_text(), "the refused write leaves the file as it was"
    assert write_result(scratch / "r.json", "{}", root=repo).exists(), "outside the checkout: scratch output"


def test_a_record_is_outdated_per_method_only_when_its_stages_code_changed() -> None:
    from xc_core.methods.versions import RECORD_KEY, method_code_version, method_stamp, record_outdated

    current = method_stamp("ramen", "train")
    assert current == {RECORD_KEY: method_code_version("ramen", "train")}
    assert record_outdated({**current, "code_version": "any-package"}, "ramen", "train") is None
    assert record_outdated({"code_version": "any-package"}, "ramen", "train") == "it records no method code version"
    why = record_outdated({RECORD_KEY: "old", "git_commit": "1234567"}, "ramen", "train")
    assert why is not None and "the train code of ramen changed" in why and "1234567" in why
    assert record_outdated(current, "ramen", "evaluate") is not None, "each stage has its own version"


def test_the_lineage_version_ignores_the_classifier_and_the_trainer() -> None:
    """An edit to a later stage (the classifier, the trainer, the validation split) leaves every home's data sets and
    anchors current: none of their modules is in the lineage's import closure."""
    from xc_assets.defs.freshness import LATER_STAGES, LINEAGE_MODULES
    from xc_core.methods.versions import REGISTRY
    from xc_core.provenance import import_closure

    closure = import_closure(LINEAGE_MODULES, stop=(*REGISTRY, *LATER_STAGES))
    assert "xc_core.stages.dataset" in closure and "xc_core.datasets.container" in closure
    later = [m for m in closure if m.startswith(("xc_core.classifier", "xc_core.training", "xc_core.methods."))]
    assert later == [], later


#: how a record says its code was not the commit it names: git_commit()'s mark, the short form of older records, and
#: the serving benches' git block
DIRTY = re.compile(r'\(with uncommitted changes\)|[0-9a-f]{7}-dirty"|"dirty": true')
#: result files known to record uncommitted code, each with what re-running it needs (empty since serve_aol-1000.json
#: was re-run from a clean checkout; a file added here must be re-run before the list shrinks again)
KNOWN_DIRTY: dict[str, str] = {}


def test_no_committed_result_file_was_written_from_uncommitted_code() -> None:
    """Issue #64: every figure names the commit that made it, so no result file the repository keeps may say its code
    differed from that commit (write_result now refuses such a write; this catches one copied in by hand). The known
    exceptions must still be dirty, so the list shrinks when one is re-run."""
    root = Path(xc_core.__file__).resolve().parents[1]
    kept = [p for folder in ("benchmarks", "experiments") for p in sorted((root / folder).rglob("results/**/*.json"))]
    assert len(kept) > 50, "too few result files found: the scan reads the wrong folders"
    dirty = {str(p.relative_to(root)) for p in kept if DIRTY.search(p.read_text())}
    new = sorted(dirty - set(KNOWN_DIRTY))
    assert not new, (f"{len(new)} result file(s) record uncommitted code: {new[:5]} — re-run them from a clean "
                     "checkout (the experiment's README has the command), or remove them and say so there")
    cleaned = sorted(set(KNOWN_DIRTY) - dirty)
    assert not cleaned, f"{cleaned} no longer record uncommitted code: drop them from KNOWN_DIRTY"
