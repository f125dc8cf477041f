"""Ad texts at any scale, from the simulator's vocabulary: ``[prefix] [modifier] [brand] product [place] [suffix]``,
each part optional but the product's name, distinct and seeded. They size catalogues of a million ads (the
serving and index benchmarks) with texts of the simulated market's words; no world, intent or click stands behind
them."""

from __future__ import annotations

import numpy as np

from xc_core.simulate.vocabulary import load_vocabulary


def _parts() -> tuple[list[tuple[list[str], list[str], list[str]]], list[str], tuple[str, ...], tuple[str, ...]]:
    """Per product (its names, its modifier words, its category's brands); every place; ad prefixes; suffixes."""
    vocab = load_vocabulary()
    products = []
    for p in vocab.products:
        names = [p.name, *p.aliases, *(a for aliases in p.market_aliases.values() for a in aliases)]
        modifiers = [w for m in p.modifiers for w in (m, *vocab.modifiers[m])]
        products.append((sorted(set(names)), sorted(set(modifiers)), list(vocab.brands[p.category])))
    places = sorted({place for market in vocab.locations.values() for place in market})
    return products, places, vocab.ad_prefixes, vocab.ad_suffixes


def ad_texts(n: int, seed: int) -> list[str]:
    """``n`` distinct ad texts, the same for the same (n, seed): drawn in blocks, repeats rejected."""
    products, places, prefixes, suffixes = _parts()
    rng = np.random.default_rng([seed, 41, 4])
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < n:
        block = rng.random((max(1024, 2 * (n - len(out))), 9))
        for u in block.tolist():
            text = _ad_text(u, products, places, prefixes, suffixes)
            if text not in seen:
                seen.add(text)
                out.append(text)
                if len(out) == n:
                    break
    return out


def _ad_text(u: list[float], products: list[tuple[list[str], list[str], list[str]]], places: list[str],
             prefixes: tuple[str, ...], suffixes: tuple[str, ...]) -> str:
    """One text from nine uniforms: [prefix] [modifier] [brand] name [place] [suffix], each part optional but the
    name (the odds echo keywords.py: brands 30–50%, places under half, an ad word about a third)."""
    def pick(options: list[str] | tuple[str, ...], x: float) -> str:
        return options[min(int(x * len(options)), len(options) - 1)]

    names, modifiers, brands = products[min(int(u[0] * len(products)), len(products) - 1)]
    words = [pick(names, u[1])]
    if modifiers and u[2] < 0.4:
        words.insert(0, pick(modifiers, u[2] / 0.4))
    if u[3] < 0.5:
        words.insert(0, pick(brands, u[4]))
    if u[5] < 0.45:
        words.append(pick(places, u[5] / 0.45))
    if u[6] < 0.2:
        words.insert(0, pick(prefixes, u[7]))
    if u[8] < 0.35:
        words.append(pick(suffixes, u[8] / 0.35))
    return " ".join(words)
