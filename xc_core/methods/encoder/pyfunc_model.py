"""MLflow "models from code" entry point of the encoder pyfunc: MLflow stores this file with the model and
runs it at load time, so no pickled Python object is logged (no cloudpickle warning, nothing opaque)."""

import mlflow.models

from xc_core.methods.encoder.pyfunc import EncoderPyfunc

mlflow.models.set_model(EncoderPyfunc())
