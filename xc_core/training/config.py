"""Training hyper-parameters: one typed object; methods and profiles only change its fields."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from xc_core.evaluation.fallback import FallbackPolicy


class TrainConfig(BaseModel):
    epochs: int = Field(default=5, ge=1)
    batch_size: int = Field(default=64, ge=2)
    lr: float = Field(default=5e-5, gt=0, description="AdamW learning rate (RAMEN full: 2e-4 at batch 1024)")
    weight_decay: float = 0.01
    warmup_fraction: float = Field(default=0.1, ge=0, lt=1, description="linear LR warm-up share of all steps")
    loss: Literal["softmax", "triplet"] = Field(
        default="softmax", description="loss family of the task loss and the regularizers: in-batch softmax "
        "(default; see losses/softmax.py) or RAMEN's hardest-negative triplet")
    softmax_scale: float = Field(default=20.0, gt=0, description="inverse temperature of the softmax loss")
    margin: float = Field(default=0.3, description="triplet margin γ (RAMEN: 0.3)")
    hard_negatives: int = Field(default=3, ge=1, description="hardest in-batch negatives per row")
    tower: bool = Field(default=False, description="train a light tower beside the frozen transformer "
                        "(encoders/tower.py: a bag of token embeddings and a linear map added to the frozen vector) "
                        "instead of fine-tuning it: a step costs no transformer pass (the CPU profiles); False: "
                        "fine-tune every layer (the GPU profile)")
    tower_hidden: int = Field(default=0, ge=0, description="width of the tower's residual MLP on the frozen vector "
                              "(0: none; the bag of token embeddings and the linear map only)")
    tower_bigrams: int = Field(default=0, ge=0, description="rows of the tower's second bag, of adjacent token "
                               "pairs hashed into that many rows (0: none; encoders/tower.py)")
    tower_lr: float = Field(default=1e-2, gt=0, description="learning rate of the tower (``tower``; ``lr`` is the "
                            "transformer's): a tower starts at zero and its rows are few steps' worth of updates")
    batching: Literal["clusters", "random"] = "clusters"
    cluster_size: int = Field(default=8, ge=1, description="initial NGAME cluster size (documents)")
    cluster_refresh_every: int = Field(default=5, ge=1, description="epochs between re-clustering (RAMEN: 5)")
    cluster_grow_every: int = Field(default=25, ge=1, description="epochs between doubling the size (RAMEN: 25)")
    regularize: bool = Field(default=True, description="add the graph regularizers R_x^t, R_z^t")
    doc_sets: list[str] | None = Field(default=None, description="document-side anchor sets (None: all)")
    label_sets: list[str] | None = Field(default=None, description="label-side anchor sets (None: all)")
    prune: bool = Field(default=True, description="prune anchors by encoder cosine during training")
    prune_warmup_epochs: int = Field(default=2, ge=0, description="epochs on unpruned anchors (RAMEN: 10)")
    prune_every: int = Field(default=2, ge=1, description="epochs between re-pruning (RAMEN: 5)")
    prune_threshold: float = Field(default=0.0, description="keep anchors with cosine > threshold (RAMEN: 0)")
    prune_center: bool = Field(default=True, description="cosine on mean-centred embeddings: mean-pooled encoders "
                               "are anisotropic, so raw cosine > 0 keeps every edge")
    exclude_heldout_anchors: bool = Field(default=True, description="drop anchor edges whose anchor text is a "
                                          "validation or test document: held-out queries never act as anchors")
    anchor_pairs: bool = Field(default=False, description="control for label-side anchor sets of documents (e.g. "
                               "the click graph): add each (anchor document, label) edge as a training pair instead "
                               "of a regularizer, so 'more labelled pairs' and 'graph signal' can be told apart")
    attribute_negatives: int = Field(default=0, ge=0, description="brand/location-safe hard negatives "
                                     "(training/attributes.py): every attribute_refresh_every epochs, per training "
                                     "document whose text names a brand or place some label carries, mine this many of "
                                     "the encoder's most "
                                     "similar labels carrying another value; each step adds one to the row's softmax "
                                     "(0: off; nothing changes on data sets without item metadata; softmax loss only)")
    anchor_negatives: int = Field(default=0, ge=0, description="hard negatives in the graph regularizers (the "
                                  "hypothesis: in-batch anchors are random texts, easy to tell from a node's "
                                  "own): before every epoch, per regularized node, mine this many of the current "
                                  "encoder's most similar anchors of the set that are not its own "
                                  "(training/anchor_negatives.py); each step adds one to the row's regularizer "
                                  "softmax, as NGAME's shortlist negatives do for the task (0: off; softmax loss only)")
    attribute_refresh_every: int = Field(default=1, ge=1, description="epochs between re-mining the attribute "
                                         "negatives (1: before every epoch)")
    shortlist_negatives: int = Field(default=0, ge=0, description="NGAME/ANCE hard negatives for the task loss: "
                                     "every shortlist_refresh_every epochs after shortlist_warmup_epochs, each "
                                     "training document's this many labels the current encoder ranks highest among "
                                     "those that are not its known positives (nor read as it); each step adds one, "
                                     "drawn uniformly, to the row's softmax (0: off; softmax loss only)")
    positive_weights: Literal["uniform", "click_days"] = Field(
        default="uniform", description="how a batch draws each document's positive among its known labels: "
        "uniformly, or in proportion to the distinct days the pair was clicked before the validation days "
        "(training/positives.py; data sets without click days draw uniformly either way)")
    graded_positives: bool = Field(default=False, description="with click_days: a known label clicked on fewer "
                                   "days than the row's drawn positive is a negative of that row in its batch")
    sampled_negatives: int = Field(default=0, ge=0, description="a many-negatives softmax for the task loss "
                                   "(DEXML's all-label softmax, sampled): each step draws this many labels uniformly "
                                   "from the whole label set, shared by the batch's rows, and every row's softmax "
                                   "also ranks its positive against them (a row's known positives and texts equal to "
                                   "its own are masked). Each step encodes them, so it suits the tower, where a label "
                                   "costs no transformer pass (0: off; softmax loss only)")
    regularizer_sampled_negatives: bool = Field(default=False, description="the graph regularizers' softmax also "
                                                "ranks each node's anchor against the task's sampled labels "
                                                "(sampled_negatives; those equal to the anchor's text or the "
                                                "row's masked ones excepted), so a regularizer's weight against "
                                                "the task does not depend on how many negatives the task has "
                                                "(softmax loss with sampled_negatives only)")
    logq_correction: bool = Field(default=False, description="correct the task softmax for how its negatives are "
                                  "drawn (Yi et al. 2019): each batch label's logit less the log of its expected "
                                  "count in a batch. In-batch negatives are other rows' positives, drawn in "
                                  "proportion to popularity, so the uncorrected loss demotes popular labels; "
                                  "sampled_negatives are uniform (softmax loss only)")
    distill: float = Field(default=0.0, ge=0, description="weight of the score distillation from the frozen "
                           "encoder added to the task loss (training/losses/distill.py): the trained encoder keeps "
                           "the frozen one's order of each row's non-positive batch labels (0: off; tower only)")
    shortlist_warmup_epochs: int = Field(default=2, ge=0, description="epochs of in-batch negatives only before "
                                         "the first shortlist (NGAME's warm-up on random batches)")
    shortlist_refresh_every: int = Field(default=5, ge=1, description="epochs between shortlist refreshes "
                                         "(NGAME: 5)")
    attribute_anchor_filter: bool = Field(default=False, description="drop anchor edges whose two ends carry "
                                          "different brands / places (item metadata, query text); a no-op "
                                          "on data sets without item metadata")
    graph_worth: bool = Field(default=True, description="start the regularizer of every anchor set the graph-worth "
                              "check (graphs/worth.py, recorded by `xc anchors`) does not find adding information at "
                              "λ = 0 (the bandit may raise it on its training-side reward); with no set left the "
                              "method trains without regularizers, as dual_encoder. False: every set at lambda_reg")
    select_best: bool = Field(default=True, description="serve the epoch with the best validation recall on half "
                              "the validation rows when it beats epoch 0 (the starting encoder) on the other half "
                              "(``fallback``), else epoch 0: a fine-tune is never worse than its start out of sample")
    select_within_guards: bool = Field(default=False, description="pick the best validation-recall epoch only "
                                       "among those that lose no guard metric (fallback.guards: P@1, PSP@1) to "
                                       "epoch 0 in the point estimate on the picking rows (training/selection.py)")
    fallback: FallbackPolicy = Field(default_factory=FallbackPolicy, description="how a trained epoch must beat "
                                     "epoch 0 on held-out validation rows to be served")
    text_only_guard_margin: float | None = Field(default=0.0, description=(
        "the guard margin (FallbackPolicy.guard_margin) of the test a graph method's trained encoder (ramen) must pass "
        "against its text-only method's (dual_encoder) on the validation rows, under ``fallback``'s other settings: "
        "the epoch metric's interval above 0, and 0: no guard (P@1, PSP@1) below dual_encoder's in the point "
        "estimate. The fallback here is a trained model the method claims never to fall below, so a loss inside the "
        "interval is not let through: with the significance rule (None) a true loss of 2 standard errors on P@1 "
        "passes about half the time"))
    anchor_grad: bool = Field(default=True, description="backpropagate through anchor encodings (RAMEN eq. 2); "
                              "False: anchors are fixed targets, deduplicated and encoded without gradient")
    bandit: bool = Field(default=True, description="tune the λs online (RAMEN §3); False: fixed λ")
    bandit_period: int = Field(default=30, ge=1)
    bandit_lr: float = 0.01
    bandit_variance: float = 0.01
    lambda_task: float = 1.0
    lambda_reg: float = 0.1
    val_split: Literal["auto", "documents", "temporal"] = Field(
        default="auto", description="how validation is built (training/validation.py): temporal — the last days of "
        "the training window, repeated queries included — where the data set records click days (event logs), held-"
        "out documents elsewhere; auto picks by the data set, as its test split is built")
    val_fraction: float = Field(default=0.05, gt=0, lt=0.5, description="share of the training documents held "
                                "out for validation, before the floor and the cap")
    val_min: int = Field(default=1000, ge=10, description="validation rows at least (power before verdicts: ~1,000 "
                         "rows detect a few points where 100 detect only ~10), as far as val_min_share allows")
    val_min_share: float = Field(default=0.2, gt=0, lt=0.5, description="the floor never holds out more than this "
                                 "share of the training documents (a small data set keeps most of them to train on)")
    val_max: int = Field(default=2000, ge=10)
    val_from_unused: bool = Field(default=False, description="with max_train_docs: the documents beyond the "
                                  "subsample (never trained on) are validation rows too, up to val_max — more "
                                  "held-out rows for the fallback test at no cost in training documents")
    val_k: int = Field(default=10, ge=1)
    val_max_labels: int | None = Field(default=None, ge=10, description="validation ranks the validation "
                                       "positives plus a seeded sample of the other labels up to this many (None: all)")
    max_train_docs: int | None = Field(default=None, description="seeded subsample of train documents")
    train_share: float = Field(default=1.0, gt=0, le=1, description="seeded share of the training documents the "
                               "encoder trains on; the rest are never trained on, so the classifier stage of a "
                               "'-clf' method can score them out of fold (it never scores the encoder's own rows)")
    stage_cutoff: bool = Field(default=False, description="event logs: the encoder trains on every document's "
                               "clicks before the classifier stage's first out-of-fold block of days (its "
                               "``train_before_day``, set by the encoder methods), instead of a ``train_share`` of "
                               "the documents, so the stage scores every query of its blocks as a test query meets "
                               "the encoder (repeated ones trained on, new ones not); data sets without click days, "
                               "or whose stage folds documents, keep ``train_share``")
    train_before_day: int | None = Field(default=None, ge=1, description="train only on the clicks before this "
                                         "day of the window (days from its start; None: every click before the "
                                         "validation days). Set from ``stage_cutoff``")
    checkpoint_every_steps: int = Field(default=0, ge=0, description="also checkpoint every N steps (0: epochs)")
    log_every_steps: int = Field(default=10, ge=1)
    seed: int = 0

    @property
    def text_only_fallback(self) -> FallbackPolicy:
        """The policy of a graph method's test against its text-only method: ``fallback`` with
        ``text_only_guard_margin`` (so disabling or tuning the never-worse rule reaches this test too)."""
        return self.fallback.model_copy(update={"guard_margin": self.text_only_guard_margin})
