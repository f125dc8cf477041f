"""MLflow "models from code" entry point of the OAK pyfunc (no pickled Python object is logged)."""

import mlflow.models

from xc_core.methods.oak.pyfunc import OakPyfunc

mlflow.models.set_model(OakPyfunc())
