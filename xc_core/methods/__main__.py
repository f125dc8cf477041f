"""``python -m xc_core.methods <role>``: the registry's list for a role, comma-separated (the Makefile's default
``METHODS`` is ``run``): run, results, headline, references, all, or one of default, control, cost_reference,
keywords."""

from __future__ import annotations

import sys

from xc_core.methods import roles

QUERIES = {"run": roles.run_methods, "results": roles.result_methods, "headline": roles.headline_methods,
           "references": roles.references, "all": roles.method_names,
           "default": lambda: [roles.default_method()], "control": lambda: [roles.control_method()],
           "cost_reference": lambda: [roles.cost_reference()], "keywords": lambda: [roles.keyword_method()]}


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in QUERIES:
        print(f"usage: python -m xc_core.methods {{{','.join(QUERIES)}}}", file=sys.stderr)
        return 2
    print(",".join(QUERIES[argv[0]]()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
