"""MLflow "models from code" entry point of TextGNN's pyfunc (see ``pyfunc.py``)."""

import mlflow.models

from xc_core.methods.textgnn.pyfunc import TextGNNPyfunc

mlflow.models.set_model(TextGNNPyfunc())
