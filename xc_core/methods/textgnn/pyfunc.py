"""TextGNN's query tower as an MLflow pyfunc model: texts in, the tower's unit vectors out (each text with its
stored train-query neighbours, else ANN proxies from the saved pool). Logged "from code"
(``pyfunc_model.py``), as the encoder methods' model is, so nothing pickled travels with it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mlflow.pyfunc
from mlflow.pyfunc import PythonModel

from xc_core.tracking.requirements import PIP_REQUIREMENTS, pinned


class TextGNNPyfunc(PythonModel):
    def load_context(self, context: Any) -> None:
        from xc_core.methods.textgnn.scorer import TextGNNModel

        settings = json.loads(Path(context.artifacts["settings"]).read_text())
        self.model = TextGNNModel.load(Path(context.artifacts["textgnn"]), Path(context.artifacts["encoder"]),
                                       int(settings["max_length"]))

    def predict(self, context, model_input: list[str], params=None):  # MLflow reads the hints as the schema
        """Texts in (MLflow validates the list[str] hint), query-tower unit vectors out."""
        return self.model.query_vectors([str(t) for t in model_input])[0]


def log_textgnn(encoder_dir: Path, folder: Path, max_length: int, work_dir: Path) -> Any:
    settings = work_dir / "encoder_settings.json"
    settings.write_text(json.dumps({"max_length": max_length}))
    return mlflow.pyfunc.log_model(
        name="textgnn", python_model=str(Path(__file__).with_name("pyfunc_model.py")),
        artifacts={"encoder": str(encoder_dir), "textgnn": str(folder), "settings": str(settings)},
        pip_requirements=pinned([*PIP_REQUIREMENTS, "faiss-cpu"]), input_example=["running shoes", "bank of america"])
