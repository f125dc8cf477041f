"""A trained OAK model as an MLflow pyfunc: query texts in, their GCN representations out (encoder → predicted
linker → GCN layer), the encoder, the node table and the layer all inside the model. The label index it is
searched with is the method's index folder, as for the other methods."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow.pyfunc
from mlflow.pyfunc import PythonModel

from xc_core.tracking.requirements import PIP_REQUIREMENTS, pinned


class OakPyfunc(PythonModel):
    def load_context(self, context: Any) -> None:
        import json

        from xc_core.encoders.text import EncoderConfig, TextEncoder
        from xc_core.methods.oak.inference import ARTEFACT, OakModel

        settings = json.loads(Path(context.artifacts["settings"]).read_text())
        self.encoder = TextEncoder(EncoderConfig(model_path=context.artifacts["encoder"], **settings))
        self.oak = OakModel.load(Path(context.artifacts[ARTEFACT]))

    def predict(self, context, model_input: list[str], params=None):  # MLflow reads the hints as the schema
        """Texts in, unit query representations out (a live query has no oracle: the predicted linker)."""
        return self.oak.embed(self.encoder, [str(t) for t in model_input])


def log_oak(encoder_dir: Path, max_length: int, oak_dir: Path, work_dir: Path) -> Any:
    """Log the run's ``oak`` pyfunc model (models from code: ``oak/pyfunc_model.py``)."""
    import json

    from xc_core.methods.oak.inference import ARTEFACT

    settings = work_dir / "encoder_settings.json"
    settings.write_text(json.dumps({"max_length": max_length}))
    return mlflow.pyfunc.log_model(
        name="oak", python_model=str(Path(__file__).with_name("pyfunc_model.py")),
        artifacts={"encoder": str(encoder_dir), "settings": str(settings), ARTEFACT: str(oak_dir)},
        pip_requirements=pinned([*PIP_REQUIREMENTS, "faiss-cpu"]), input_example=["running shoes", "bank of america"])
