"""How a dual-encoder method is served: its pyfunc model embeds the query, the label index built for it at
evaluation (manifest-checked) is searched; with a classifier stage the classifier index too, fused — the
evaluation's search path."""

from __future__ import annotations

import numpy as np

from xc_core.methods.base import Scorer, Served


def encoder_scorer(method: str, served: Served) -> Scorer:
    import mlflow

    from xc_core.classifier.fusion import CLASSIFIER_INDEX, LABEL_VECTORS, fused_search
    from xc_core.index import LabelIndex
    from xc_core.paths import index_dir

    model = mlflow.pyfunc.load_model(served.model_uri)
    folder = index_dir(served.home, served.dataset, method, served.profile)
    index = LabelIndex.load(folder, expect_dataset=served.dataset)
    fused = model.unwrap_python_model().classifier
    classifier = None if fused is None else (LabelIndex.load(folder / CLASSIFIER_INDEX, expect_dataset=served.dataset),
                                             np.load(folder / LABEL_VECTORS))

    def score(texts: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        vectors = np.asarray(model.predict(texts), dtype=np.float32)
        if classifier is None:
            return index.search(vectors, k)
        return fused_search(vectors, index, classifier[0], classifier[1], fused, k, texts=texts)

    return score
