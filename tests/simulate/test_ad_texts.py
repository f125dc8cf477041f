"""Generated ad texts (the large catalogues' labels): distinct, seeded, and a larger draw extends a smaller one."""

from __future__ import annotations

from xc_core.simulate.ad_texts import ad_texts
from xc_core.simulate.vocabulary import load_vocabulary


def test_ad_texts_are_distinct_and_seeded() -> None:
    texts = ad_texts(3000, 0)
    assert len(set(texts)) == 3000
    assert ad_texts(1000, 0) == texts[:1000]  # a prefix of a larger draw: the vector cache's key follows the texts
    assert ad_texts(1000, 1) != texts[:1000]


def test_every_ad_text_names_a_product_of_the_vocabulary() -> None:
    vocab = load_vocabulary()
    names = {name for p in vocab.products
             for name in (p.name, *p.aliases, *(a for aliases in p.market_aliases.values() for a in aliases))}
    for text in ad_texts(500, 2):
        assert any(name in text for name in names), text
