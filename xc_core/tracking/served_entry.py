"""MLflow "models from code" entry point of the served model (``served.py``): stored with the model and run at
load time, so no pickled Python object is logged."""

import mlflow.models

from xc_core.tracking.served import ServedPyfunc

mlflow.models.set_model(ServedPyfunc())
