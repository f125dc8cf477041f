"""The trained encoder as an MLflow pyfunc model: text in, unit embeddings out, tokenizer included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow.pyfunc
from mlflow.pyfunc import PythonModel

from xc_core.tracking.requirements import PIP_REQUIREMENTS, pinned


class EncoderPyfunc(PythonModel):
    """``predict(list[str]) -> ndarray (n, dim)``; loads the saved HF encoder folder.

    A method with the classifier stage ships its per-label vectors and fusion weight in the same model
    (artifact ``classifier``): ``unwrap_python_model().classifier`` is then a ``FusedClassifier`` that the
    one search path (``xc_core.classifier.fusion.fused_search``) combines with the label index."""

    def load_context(self, context: Any) -> None:
        import json

        from xc_core.encoders.text import EncoderConfig, TextEncoder

        settings = json.loads(Path(context.artifacts["settings"]).read_text())
        # a loader that serves the encoder on ONNX Runtime defers its transformer (``transformers_deferred``)
        self.encoder = TextEncoder(EncoderConfig(model_path=context.artifacts["encoder"], **settings),
                                   defer_model=None)
        self.classifier = None
        if "classifier" in context.artifacts:
            from xc_core.classifier.fusion import FusedClassifier

            self.classifier = FusedClassifier.load(Path(context.artifacts["classifier"]))

    def predict(self, context, model_input: list[str], params=None):  # MLflow reads the hints as the schema
        """Texts in (MLflow validates the list[str] hint), unit embeddings out."""
        return self.encoder.encode([str(t) for t in model_input])


def log_encoder(encoder_dir: Path, max_length: int, work_dir: Path, classifier_dir: Path | None = None,
                extra_artifacts: dict[str, str] | None = None) -> Any:
    """Log the encoder folder (and the classifier stage's W + fusion.json, when given; and a method's own
    artefacts, e.g. IRENE's classifiers and combiner as ``irene``) as the run's ``encoder`` pyfunc model
    (explicit requirements: fast). ``predict`` embeds queries; the extra artefacts travel with the model."""
    import json

    settings = work_dir / "encoder_settings.json"
    settings.write_text(json.dumps({"max_length": max_length}))
    artifacts = {"encoder": str(encoder_dir), "settings": str(settings), **(extra_artifacts or {})}
    if classifier_dir is not None:
        artifacts["classifier"] = str(classifier_dir)
    return mlflow.pyfunc.log_model(
        name="encoder", python_model=str(Path(__file__).with_name("pyfunc_model.py")),  # models from code
        artifacts=artifacts,
        pip_requirements=pinned(PIP_REQUIREMENTS), input_example=["running shoes", "bank of america"],
    )

