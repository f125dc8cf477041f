"""The name channel of the fused search: a label whose name the query writes out.

Why: where a label is a site, its text is the host's words ("bankofamerica", "007museum"). A query that spells the
name out ("bank of america", "www.bankofamerica.com", "bankofamerica online") names that label, yet neither the
encoder's subword vectors nor the TF-IDF n-grams (cut at spaces) see the unsegmented name in the query. Compared
without spaces, they match. The channel is one more weight of the stage's own fusion, chosen and tested cross-fitted
like the others (what it gained before it was built in: ``experiments/name_match/``).

The score of (query, label), with ``q`` and ``n`` the two texts lower-cased without whitespace (:func:`name_key`):
when the shorter of the two (4 characters or more) occurs in the longer, ``(len(shorter) / len(longer))²``, else 0.
So 1 for the same name, and a name that is most of the query, or a query that is most of the name, scores near 1.
The square was chosen over the plain share, and over separate "equal" / "contained" scores, on two of aol-1000's
out-of-fold blocks (days 41–50). Labels whose name occurs in the query join the shortlist: every substring of the
query is looked up, so the catalogue is never scanned. Labels whose name contains the query are scored only where
another channel put them in the shortlist. Nothing is learned: the weight is chosen out of fold with the rest of the
fusion (0 switches the channel off). Stored as the names' JSON list beside ``fusion.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from xc_core.classifier.channel import Channel, ChannelSpec, Proposal
from xc_core.classifier.shortlist import padded_top

NAMES_FILE = "label_names.json"  # beside fusion.json, only when the served name weight > 0
MIN_CHARS = 4  # a shorter name or query matches too much ("com", "tv") to name anything


def name_key(text: str) -> str:
    """A text as names are compared: lower-cased, every whitespace removed."""
    return "".join(text.lower().split())


def name_score(query_key: str, name: str) -> float:
    """``(len(shorter) / len(longer))²`` when the shorter key (``MIN_CHARS`` or more) occurs in the longer, else 0."""
    shorter, longer = sorted((query_key, name), key=len)
    if len(shorter) < MIN_CHARS or shorter not in longer:
        return 0.0
    return (len(shorter) / len(longer)) ** 2


@dataclass
class LabelNames(Channel):
    """Every label's :func:`name_key`, in label-id order ("" for a label without text)."""

    names: list[str]

    def __post_init__(self) -> None:
        self._labels: dict[str, list[int]] = {}
        for label, name in enumerate(self.names):
            if len(name) >= MIN_CHARS:
                self._labels.setdefault(name, []).append(label)
        self._longest = max((len(n) for n in self._labels), default=0)

    @classmethod
    def fit(cls, label_texts: list[str]) -> LabelNames:
        return cls([name_key(t) for t in label_texts])

    def named_in(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(label ids ascending, scores) of the labels whose name occurs in ``text``."""
        query = name_key(text)
        found: dict[int, float] = {}
        for start in range(len(query)):
            for end in range(start + MIN_CHARS, min(len(query), start + self._longest) + 1):
                for label in self._labels.get(query[start:end], ()):
                    found[label] = name_score(query, self.names[label])
        ids = np.array(sorted(found), np.int64)
        return ids, np.array([found[i] for i in ids], np.float32)

    def search(self, texts: list[str], k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(name scores, label ids) of the labels each query names — its ``k`` best (ties: the lower id) when ``k``
        is given — padded to the widest row (−1 ids, score 0); one column of pads when no query names a label."""
        return padded_top([self.named_in(text) for text in texts], k)

    def scores_on(self, texts: list[str], candidates: np.ndarray) -> np.ndarray:
        """(rows, candidates) name score of each row's candidates (0 for pads: id −1)."""
        out = np.zeros(candidates.shape, np.float32)
        for r, text in enumerate(texts):
            query = name_key(text)
            if len(query) < MIN_CHARS:
                continue
            for c, label in enumerate(candidates[r]):
                if 0 <= label < len(self.names):  # a label added after training has no name here
                    out[r, c] = name_score(query, self.names[label])
        return out

    def propose(self, texts: list[str], queries: np.ndarray, depth: int) -> Proposal:
        """The ``depth`` labels each query names best, and the name score of any candidate."""
        return Proposal(self.search(texts, depth)[1], lambda candidates: self.scores_on(texts, candidates))

    def store(self, folder: Path) -> None:
        self.save(folder)

    @property
    def megabytes(self) -> float:
        return sum(len(n) for n in self.names) / 2**20

    def save(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / NAMES_FILE).write_text(json.dumps(self.names))
        return folder / NAMES_FILE

    @classmethod
    def load(cls, folder: Path) -> LabelNames:
        path = folder / NAMES_FILE
        try:
            names = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"{path}: not a JSON list of label names ({error}); retrain the '-clf' method") from None
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValueError(f"{path}: expected a JSON list of strings, one per label; retrain the '-clf' method")
        return cls(names)


#: the registry entry (``channels.py``): its weight is chosen after the click memory's
SPEC = ChannelSpec("names", "name_weight", "each", grid=lambda cfg: cfg.name_weights,
                   fit=lambda data, cfg: LabelNames.fit(data.label_texts), load=LabelNames.load, saved_as=NAMES_FILE)
