"""The dual-encoder family: a method is a name plus how it configures the one trainer (no method-specific branch
in the trainer), scored through a label index and served as an encoder pyfunc with that index.

``pretrained``, ``dual_encoder``, ``ramen``, its ablations, ``auggt`` and every ``-clf`` variant are
:class:`EncoderMethod` values; the stages see only the :class:`~xc_core.methods.base.Method` protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from xc_core.datasets.container import XCDataset
from xc_core.methods.base import Fitted, Method, Predictions, Requires, Roles, Scorer, Served, TrainJob, get_method
from xc_core.paths import home_of_model, vectors_dir
from xc_core.training.config import TrainConfig
from xc_core.training.record import TrainedModel


@dataclass(frozen=True)
class EncoderMethod:
    name: str
    description: str
    trains: bool = True  # False: the encoder as shipped (the zero-shot floor)
    overrides: dict[str, Any] = field(default_factory=dict)  # TrainConfig fields this method sets
    transform: Callable[[XCDataset, TrainConfig], XCDataset] | None = None  # e.g. AugGT's label propagation
    needs_anchor_sets: bool = False  # trains on the graph: refuse to run without materialized anchor sets
    encoder_overrides: dict[str, Any] = field(default_factory=dict)  # EncoderConfig fields this method sets
    classifier: bool = False  # ends with the classifier stage: per-label vectors fused with the encoder
    #: the method whose trained encoder this one must beat on validation, else that encoder is served (``ramen``:
    #: ``dual_encoder`` — a graph that does not pay is not served); it should also be in ``requires``
    text_only: str | None = None

    @property
    def docs(self) -> str:
        return "docs/classifier.md" if self.classifier else "docs/training.md"

    def fits_on_validation(self, record: dict[str, Any]) -> bool:
        """Whether the trained model of ``record`` (its training summary) learnt from what its validation rows are
        scored on: a ``-clf`` whose classifier stage saw every training document (``hold_out_validation`` off, or a
        model trained before the stage held them out) has no clean validation score (``xc eval`` refuses)."""
        return self.classifier and not record.get("classifier_holds_out_validation", False)
    baselines: tuple[str, ...] = ()  # reports pair this method against these (this − baseline); first: DIFF@k
    ablation_of: str | None = None  # the full method this one switches an ingredient off; reports pair full − this
    requires: Requires = Requires()  # e.g. a ``-clf`` builds on its base's trained encoder
    roles: Roles = Roles()  # the default lists and comparisons it is in

    def configure(self, base: TrainConfig) -> TrainConfig:
        return base.model_copy(update=self.overrides)

    def prepare(self, dataset: XCDataset, cfg: TrainConfig) -> XCDataset:
        return self.transform(dataset, cfg) if self.transform else dataset

    def train(self, job: TrainJob) -> Fitted:
        from xc_core.methods.encoder.training import fit

        return fit(self, job)

    def predict(self, dataset: XCDataset, trained: TrainedModel, index_dir: Path, *, reuse: bool = False,
                progress: bool = False) -> Predictions:
        from xc_core.methods.encoder.predict import load_or_predict, predict_or_copy

        encoder_dir, max_length, classifier_dir = artefacts(trained)
        home = home_of_model(trained.folder)
        cache = vectors_dir(home) if home is not None else None
        if reuse:
            return load_or_predict(dataset, encoder_dir, max_length, index_dir, trained.model_uri, progress=progress,
                                   classifier_dir=classifier_dir, vector_cache=cache)
        return predict_or_copy(dataset, encoder_dir, max_length, index_dir, trained.model_uri, progress=progress,
                               classifier_dir=classifier_dir, vector_cache=cache)

    def analyse(self, dataset: XCDataset, trained: TrainedModel, predictions: Predictions,
                out: Path) -> dict[str, Any]:
        from xc_core.methods.encoder.analysis import classifier_tradeoff

        classifier_dir = artefacts(trained)[2]
        if classifier_dir is None:
            return {}
        return {"classifier": classifier_tradeoff(dataset, predictions, classifier_dir, out, trained)}

    def scorer(self, served: Served) -> Scorer:
        from xc_core.methods.encoder.scorer import encoder_scorer

        return encoder_scorer(self.name, served)

    def restrict(self, name: str, sets: list[str]) -> EncoderMethod:
        """Only ``sets`` on both sides (within what the method already uses: an ablation keeps its own cut)."""

        def only(current: list[str] | None) -> list[str]:
            return [s for s in sets if current is None or s in current]

        overrides = {**self.overrides, "doc_sets": only(self.overrides.get("doc_sets")),
                     "label_sets": only(self.overrides.get("label_sets"))}
        return replace(self, name=name, description=f"{self.description}; anchor sets {', '.join(sets)} only",
                       overrides=overrides)


def artefacts(trained: TrainedModel) -> tuple[Path, int, Path | None]:
    """(encoder folder, max_length, classifier folder or None) an encoder method's training recorded."""
    summary = trained.summary
    classifier_dir = summary.get("classifier_dir")
    # 32: summaries written before max_length was recorded used the encoder's default
    return (Path(summary["encoder_dir"]), int(summary.get("max_length", 32)),
            Path(classifier_dir) if classifier_dir else None)


def encoder_method(name: str) -> EncoderMethod:
    """A registered method that must be a dual-encoder one: the distributed launcher and the trainer's
    benchmarks drive the trainer directly and have nothing to do with any other kind."""
    method: Method = get_method(name)
    if not isinstance(method, EncoderMethod):
        raise ValueError(f"'{name}' is not a dual-encoder method: train it with `xc train`")
    return method


#: ``<method>-clf`` is ``<method>``'s encoder followed by the classifier stage (``methods/classifier.py`` registers
#: them; ``classifier=True``): its training reuses the base method's trained encoder when it can
CLASSIFIER_SUFFIX = "-clf"


def base_method_name(name: str) -> str:
    """The method whose encoder ``name`` ends with: ``ramen-clf@links`` → ``ramen@links``."""
    return name.replace(CLASSIFIER_SUFFIX, "", 1)
