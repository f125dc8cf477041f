"""The stages the CLI and Dagster both run, one module each: they put a profile, the home's folders and MLflow
around the libraries below (datasets, graphs, training, classifier, evaluation, tracking), which never import
them. A stage may use the stages before it (evaluation reads what training wrote)."""
