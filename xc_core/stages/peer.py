"""The linear peers on xc's splits, scored by xc: PECOS XR-Linear on TF-IDF (``pecos``), and on xc's own features
[TF-IDF ⊕ the untrained encoder's vectors] (``pecos-xc``: XR-Transformer's recipe, no fine-tuning).

    make peers   # once: .venv-peers with libpecos 1.2.8 (numpy<2, scipy<1.14; never in xc's environment)
    xc peer --dataset synthetic --profile demo --home ~/.xc            # the `peer_eval` asset, one home
    xc peer --dataset wikispeedia --profile cpu --homes /tmp/xc-s0 /tmp/xc-s1     # the same result into seed homes
    xc peer --dataset wikispeedia --profile cpu --home /tmp/xc-s0 --peer pecos-xc

Writes the data set's training and test documents and the training labels as an XC-repository-style folder
(``<first home>/peers/<data set>/``, ``peers/<data set>-xc/`` for ``pecos-xc`` with the encoder's vectors as
``trn_dense.npy`` / ``tst_dense.npy``), runs ``benchmarks/peers/pecos_peer.py`` on it in ``.venv-peers``, reads
back its test score matrix and evaluates it exactly as ``xc eval`` evaluates a method (filter pairs removed,
the same propensities, per-query rows for paired intervals) into ``eval/<data set>/pecos-<profile>`` of every
home, so ``xc report``, ``xc results`` and the seed tables list the peer beside the methods. PECOS has no
training seed here: the same result goes to each home. A finished peer run for the same split is reused.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, Field

from xc_core.stages import Command, Markdown, Payload, StageAsset, register
from xc_core.stages.options import add_dataset, add_profile

if TYPE_CHECKING:
    from xc_core.datasets.container import XCDataset

#: the checkout: the peer's environment and its script are the repository's (``make peers``), not the package's
ROOT = Path(__file__).resolve().parents[2]
PEER_PYTHON = ROOT / ".venv-peers" / "bin" / "python"
PEER_SCRIPT = ROOT / "benchmarks" / "peers" / "pecos_peer.py"
#: peer name → (the feature set pecos_peer.py builds, the exchange folder's suffix)
PEERS = {"pecos": ("tfidf", ""), "pecos-xc": ("hybrid", "-xc")}


def _line(text: str) -> str:
    return " ".join(text.split())  # one document per line: no newline may survive in a text


def check_peers(peers: list[str] | tuple[str, ...]) -> None:
    """Raises ValueError for a name not in :data:`PEERS`, FileNotFoundError when the peers' environment is not built
    (each one line, the fix in it): what ``xc run --peers`` checks before any stage and ``peer_eval`` before it
    scores."""
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        raise ValueError(f"unknown peer {', '.join(unknown)}: choose from {', '.join(PEERS)}")
    if peers:
        require_peer_environment()


def require_peer_environment() -> None:
    """Raises FileNotFoundError (one line, the fix in it) when the peers' environment is not built."""
    if not PEER_PYTHON.exists():
        raise FileNotFoundError(f"{PEER_PYTHON} missing: run `make peers` first (libpecos lives in its own "
                                "environment; `make run` and `make test` build it)")


def export(dataset: XCDataset, folder: Path, split: str, features: str = "tfidf") -> None:
    """The XC-repository-style exchange folder the peer reads (and the untrained encoder's vectors for ``hybrid``)."""
    folder.mkdir(parents=True, exist_ok=True)
    if features == "hybrid":
        from xc_core.encoders.text import default_model_path, encoder_for

        encoder = encoder_for(default_model_path())
        np.save(folder / "trn_dense.npy", encoder.encode(dataset.train_texts, progress=True, desc="train documents"))
        np.save(folder / "tst_dense.npy", encoder.encode(dataset.test_texts, progress=True, desc="test documents"))
    (folder / "trn_X.txt").write_text("".join(_line(t) + "\n" for t in dataset.train_texts), encoding="utf-8")
    (folder / "tst_X.txt").write_text("".join(_line(t) + "\n" for t in dataset.test_texts), encoding="utf-8")
    sp.save_npz(folder / "trn_X_Y.npz", sp.csr_matrix(dataset.y_train, dtype=np.float32))
    (folder / "meta.json").write_text(json.dumps({"dataset": dataset.name, "n_labels": dataset.n_labels,
                                                  "test_split": split}) + "\n")


def run_peer(dataset: XCDataset, folder: Path, features: str = "tfidf") -> tuple[sp.csr_matrix, dict[str, Any]]:
    """Run the linear peer on ``dataset`` in ``.venv-peers`` through the exchange folder, or read its scores back
    when the folder already holds a finished run for the same test split.

    Args:
        dataset: the data set to fit and score.
        folder: the exchange folder (the XC-format export, the peer's scores and its record).
        features: the peer's text features (``tfidf``).

    Returns:
        (the peer's test score matrix, what it reports of its run).
    """
    from xc_core.evaluation.record import fingerprint_test_split

    split = fingerprint_test_split(dataset)
    meta = folder / "meta.json"
    fresh = (meta.exists() and json.loads(meta.read_text()).get("test_split") == split
             and (folder / "tst_scores.npz").exists() and (folder / "peer.json").exists())
    if not fresh:
        require_peer_environment()
        (folder / "tst_scores.npz").unlink(missing_ok=True)
        export(dataset, folder, split, features)
        subprocess.run([str(PEER_PYTHON), str(PEER_SCRIPT), str(folder), "--features", features], check=True)
    scores = sp.load_npz(folder / "tst_scores.npz").tocsr()
    if scores.shape != (len(dataset.test_texts), dataset.n_labels):
        raise SystemExit(f"{folder}/tst_scores.npz is {scores.shape}, expected "
                         f"({len(dataset.test_texts)}, {dataset.n_labels}); delete the folder and rerun")
    return scores, json.loads((folder / "peer.json").read_text())


def evaluate_peer(dataset_name: str, profile: str, homes: list[Path], peer: str = "pecos") -> dict[str, Any]:
    """Score ``peer`` on the data set of the first home and write its evaluation into every home.

    Args:
        dataset_name: the data set's name.
        profile: the profile the evaluation folder is named for (``eval/<data set>/<peer>-<profile>``).
        homes: the homes to write into; the first one's data set is scored.
        peer: a key of :data:`PEERS`.

    Returns:
        The evaluation's summary (metrics with their intervals).
    """
    from xc_core.paths import eval_dir
    from xc_core.stages.anchor_sets import load_with_anchors
    from xc_core.stages.evaluate import evaluate_scores

    dataset = load_with_anchors(homes[0], dataset_name)
    started = time.perf_counter()
    features, suffix = PEERS[peer]
    scores, info = run_peer(dataset, homes[0] / "peers" / f"{dataset_name}{suffix}", features)
    summary: dict[str, Any] = {}
    for home in homes:
        summary, _ = evaluate_scores(dataset, scores, eval_dir(home, dataset_name, peer, profile),
                                     {"dataset": dataset_name, "method": peer, "profile": profile, "peer": info},
                                     started)
    summary.pop("subsets", None)
    return summary


class PeerOptions(BaseModel):
    profile: str = Field(default="demo", description="the profile whose evaluation folders the peers join")
    peers: list[str] = Field(default=["pecos"], description=f"the linear peers to score: {', '.join(PEERS)}")


#: the metrics the ``peer_eval`` asset shows per peer (the whole evaluation is in its folder)
SHOWN = ("P@1", "PSP@1", "P@5", "PSP@5", "R@10")


def materialize_peers(home: Path, dataset: str, method: str | None, options: PeerOptions) -> dict[str, Any]:
    """The ``peer_eval`` asset: each peer scored on the data set's test split into ``eval/<data set>/<peer>-<profile>``
    of ``home``, where the report, its label-decile table and ``xc run``'s summary find it beside the methods."""
    check_peers(options.peers)
    scored = {peer: evaluate_peer(dataset, options.profile, [home], peer) for peer in options.peers}
    rows = ["| peer | " + " | ".join(SHOWN) + " |", "|---" * (len(SHOWN) + 1) + "|"]
    rows += [f"| {peer} | " + " | ".join(f"{100 * float(s.get(m, float('nan'))):.2f}" for m in SHOWN) + " |"
             for peer, s in scored.items()]
    return {"summary": Markdown("\n".join(rows)), "peers": {peer: {m: float(s[m]) for m in SHOWN if m in s}
                                                              for peer, s in scored.items()}}


def _run(args: argparse.Namespace) -> Payload:
    from xc_core.paths import resolve_home

    homes = [resolve_home(h) for h in args.homes] if args.homes else [resolve_home(args.home)]
    peers = args.peer or ["pecos"]
    return {"dataset": args.dataset, "profile": args.profile,
            **{peer: evaluate_peer(args.dataset, args.profile, homes, peer) for peer in peers}}


def _arguments(command: argparse.ArgumentParser) -> None:
    add_dataset(command)
    add_profile(command, help="the profile whose evaluation folders the peer joins")
    command.add_argument("--peer", action="append", choices=sorted(PEERS), default=None,
                         help="a linear peer to score (repeat for several; default: pecos)")
    command.add_argument("--homes", nargs="+", default=None, metavar="HOME",
                         help="score the first home's data set and write the same evaluation into every home "
                              "(a peer has no training seed: the seed homes of `make results`; default: --home)")


COMMAND = register(Command(
    "peer", "score the linear peer (PECOS) on the data set's test split beside the methods", _arguments, _run,
    asset=StageAsset("peer_eval", "The linear peers (PECOS XR-Linear on TF-IDF) scored on the same test split as "
                                  "the methods, in their own environment (.venv-peers); the report and the "
                                  "label-decile table list them beside the methods", materialize_peers,
                     deps=("anchor_sets",), options=PeerOptions, kinds=("pecos",)),
    docs="docs/evaluation.md"))

