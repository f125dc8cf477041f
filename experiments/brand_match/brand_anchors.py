"""Issue #32: what each anchor set ties a branded (located) node to, by item metadata and query text only.

    .venv/bin/python experiments/brand_match/brand_anchors.py --home /work/brand_home/final [--dataset synthetic]

For every anchor set of the home's data set (RWR-expanded, as trained on): the edges ``attribute_anchor_filter``
drops (``xc_core.training.attributes.crossing_edges``), and, of the edges whose node carries a brand (place), the
share whose anchor carries the same value, another value, or none (an unbranded query or item). Prints JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from xc_core.datasets.container import XCDataset
from xc_core.training.attributes import AttributeIndex, crossing_edges


def measure(data: XCDataset) -> dict[str, Any]:
    index = AttributeIndex.build(data.label_attributes, data.label_texts)
    if index is None:
        raise SystemExit(f"{data.name}: no item metadata")
    out: dict[str, Any] = {}
    for name, anchors in data.anchor_sets.items():
        doc_cross, label_cross = crossing_edges(anchors, index, data.train_texts)
        row: dict[str, Any] = {"doc_edges": len(anchors.doc_edges), "label_edges": len(anchors.label_edges),
                               "dropped_doc": int(doc_cross.sum()), "dropped_label": int(label_cross.sum())}
        for attribute in index.attributes:
            anchor_values = index.carried(anchors.texts, attribute)
            label_values = [frozenset({int(c)} if c >= 0 else ()) for c in index.label_codes[attribute]]
            for side, edges in (("doc", anchors.doc_edges), ("label", anchors.label_edges)):
                if not len(edges):
                    continue
                node_values = index.named(data.train_texts, attribute) if side == "doc" else label_values
                kinds = {"same": 0, "other": 0, "none": 0}
                for node, anchor in edges.tolist():
                    if node_values[node]:
                        value = anchor_values[anchor]
                        kinds["none" if not value else "same" if value & node_values[node] else "other"] += 1
                total = sum(kinds.values())
                row[f"{attribute}_{side}_named_edges"] = total
                row.update({f"{attribute}_{side}_{k}_pct": round(100 * c / max(total, 1), 2) for k, c in kinds.items()})
        out[name] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--dataset", default="synthetic")
    args = parser.parse_args()
    print(json.dumps(measure(XCDataset.load(args.home / "anchor_sets" / args.dataset)), indent=1))


if __name__ == "__main__":
    main()
