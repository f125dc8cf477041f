"""The pip requirements every logged pyfunc model declares (explicit: MLflow does not infer them, which is fast);
a method's model adds its own (e.g. ``faiss-cpu``)."""

PIP_REQUIREMENTS = ["torch==2.13.0", "transformers==5.23.0", "tokenizers==0.23.3", "numpy==2.4.6",
                    "pandas==2.3.3", "pydantic==2.14.3", "mlflow==3.17.2"]
