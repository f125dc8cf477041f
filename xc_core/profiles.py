"""Typed run profiles: ``tiny`` (tests, seconds), ``demo`` (the default CPU run, minutes), ``cpu`` (CPU, every
training document, long enough for the regularizers to matter), ``full`` (GPU, the papers' schedule). A profile
fixes every knob a stage needs; stages take it, never globals. Every real profile starts from the full shipped
encoder: a fine-tune has to beat the encoder the user already has."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, TypedDict, get_args

from pydantic import BaseModel, Field

from xc_core.classifier.config import ClassifierConfig
from xc_core.encoders.text import EncoderConfig
from xc_core.graphs.rwr import RWRConfig
from xc_core.paths import vectors_dir
from xc_core.training.config import TrainConfig

ProfileName = Literal["tiny", "demo", "cpu", "full"]
#: every profile, cheapest first (CLI choices, Dagster config docs): the one list, read off ``ProfileName``
PROFILE_NAMES: tuple[str, ...] = get_args(ProfileName)


class Profile(BaseModel):
    name: ProfileName
    encoder: EncoderConfig
    rwr: RWRConfig
    train: TrainConfig = Field(default_factory=TrainConfig)
    finetune: TrainConfig | None = Field(default=None, description="the schedule of methods that fine-tune the "
                                         "transformer itself (TextGNN, OAK: their GNN trains with it) where "
                                         "``train`` trains a tower beside it; None: ``train``")
    classifier: ClassifierConfig = Field(default_factory=ClassifierConfig, description="the classifier stage of "
                                         "'-clf' methods (the same settings for every data set)")
    tiny_model: bool = Field(default=False, description="use a random tiny BERT built under <home>/models")
    seed: int = 0


class _Recipe(TypedDict):
    """The :class:`TrainConfig` fields :data:`RECIPE` sets, with their types (a plain dict at run time)."""

    loss: Literal["softmax", "triplet"]
    lr: float
    batching: Literal["clusters", "random"]
    select_best: bool
    attribute_negatives: int
    attribute_anchor_filter: bool


#: The fine-tuning recipe every real profile shares, chosen on validation (docs/training.md):
#: the full shipped encoder as the start, in-batch softmax loss, lr 2e-5 with 10% warm-up, random batches
#: (NGAME clusters of similar queries make unrecorded positives the negatives on sparse-label sets), and the
#: best validation epoch kept, the starting encoder included. Brand- and location-safe
#: (docs/results/issue-32.md): per branded / located training query 10 mined labels of another brand / place as
#: negatives, and no anchor edge between two different brands / places — item metadata and query text only, so a
#: no-op on data sets without item metadata.
RECIPE: _Recipe = {"loss": "softmax", "lr": 2e-5, "batching": "random", "select_best": True,
                   "attribute_negatives": 10, "attribute_anchor_filter": True}


class _TowerRecipe(_Recipe):
    """:data:`TOWER_RECIPE`'s fields: the recipe's, and the tower and its shortlist negatives."""

    tower: bool
    tower_lr: float
    shortlist_negatives: int
    sampled_negatives: int
    shortlist_warmup_epochs: int
    shortlist_refresh_every: int
    attribute_refresh_every: int
    distill: float
    stage_cutoff: bool


#: The CPU profiles' recipe: :data:`RECIPE` with the light tower beside the frozen encoder instead of fine-tuning
#: it (its zero start is the shipped encoder; its lr chosen on validation: docs/training.md),
#: NGAME's hard negatives from the encoder's own shortlist after a 2-epoch warm-up, refreshed every 5 epochs
#: (the attribute negatives on the same period), and the frozen encoder's order of each row's other labels kept by
#: a distillation term of weight 0.3 (training/losses/distill.py; chosen on validation: experiments/ab_depth).
#: Each step also ranks every row's positive against 1,024 labels drawn uniformly from the whole label set (DEXML's
#: sampled all-label softmax): in-batch negatives are other rows' positives, drawn in proportion to popularity, and
#: the uniform ones dilute that bias without removing popularity from the loss (chosen on three data sets'
#: validation rows: experiments/encoder_tower, round 8).
#: ``stage_cutoff`` (every document's clicks before the classifier stage's first out-of-fold block instead of
#: :data:`TRAIN_SHARE` of the documents) stays off: on synthetic's validation rows over three seeds it moved neither
#: the encoder nor its ``-clf`` out of noise (experiments/stage_cutoff).
TOWER_RECIPE: _TowerRecipe = {**RECIPE, "tower": True, "tower_lr": 1e-2, "shortlist_negatives": 10,
                              "sampled_negatives": 1024,
                              "shortlist_warmup_epochs": 2, "shortlist_refresh_every": 5,
                              "attribute_refresh_every": 5, "distill": 0.3, "stage_cutoff": False}
#: epochs of the demo profile (30 × 0.7 of the documents: 21 epochs' worth of every training document)
DEMO_EPOCHS = 30
#: the share of training documents the CPU profiles' encoder trains on: the other 30% stay clean rows for the '-clf'
#: stage's out-of-fold choice, which never scores a document its encoder trained on (with every document trained
#: on, synthetic's stage found no row to score and served the encoder alone)
TRAIN_SHARE = 0.7


def get_profile(name: str) -> Profile:
    profiles: dict[str, Profile] = {
        # seconds: a random tiny BERT, a few hundred documents
        "tiny": Profile(name="tiny", encoder=EncoderConfig(max_length=16, batch_size=512),
                        rwr=RWRConfig(walk_length=100), tiny_model=True,
                        train=TrainConfig(epochs=2, batch_size=16, lr=1e-3, cluster_size=4, max_train_docs=400,
                                          val_max=40, val_min=10, log_every_steps=2, prune_warmup_epochs=1,
                                          prune_every=1, bandit_period=5)),
        # CPU minutes (`make run` ≤ 15 min on 2 cores): 70% of the training documents, the tower beside the frozen
        # shipped encoder (encoders/tower.py; a step runs no transformer), NGAME's curriculum: random batches,
        # then every 5 epochs each document's own shortlist of non-positive labels as hard negatives; RAMEN's
        # pruning on the same period (RAMEN: warm-up 10 and every 5 of 100 epochs).
        "demo": Profile(name="demo", encoder=EncoderConfig(max_length=32, batch_size=256), rwr=RWRConfig(),
                        train=TrainConfig(epochs=DEMO_EPOCHS, batch_size=256, cluster_size=8, val_max=2000,
                                          train_share=TRAIN_SHARE,
                                          val_max_labels=20_000, prune_warmup_epochs=5, prune_every=5,
                                          bandit_period=10, **TOWER_RECIPE),
                        # the former demo fine-tune (2 epochs of a 2,000-document subsample): TextGNN and OAK
                        finetune=TrainConfig(epochs=2, batch_size=64, cluster_size=8, max_train_docs=2_000,
                                             val_max=2000, val_from_unused=True, val_max_labels=20_000,
                                             prune_warmup_epochs=1, prune_every=1, bandit_period=10, **RECIPE)),
        # CPU, an hour on aol-1000: the demo's recipe for 100 epochs.
        "cpu": Profile(name="cpu", encoder=EncoderConfig(max_length=32, batch_size=256), rwr=RWRConfig(),
                       train=TrainConfig(epochs=100, batch_size=256, cluster_size=8, val_max=2000,
                                         train_share=TRAIN_SHARE,
                                         val_max_labels=20_000, prune_warmup_epochs=10, prune_every=5,
                                         bandit_period=10, **TOWER_RECIPE),
                       finetune=TrainConfig(epochs=5, batch_size=64, cluster_size=8, val_max=2000,
                                            val_max_labels=20_000, prune_warmup_epochs=2, prune_every=1,
                                            bandit_period=10, **RECIPE)),
        # GPU: the papers' schedule (RAMEN: batch 1024, warm-up 10 epochs, re-prune every 5) with xc's recipe;
        # lr scaled with the batch from the CPU recipe's 2e-5 at 64 (RAMEN used 2e-4 at 1024).
        "full": Profile(name="full", encoder=EncoderConfig(max_length=32, batch_size=1024), rwr=RWRConfig(),
                        train=TrainConfig(epochs=100, batch_size=1024, cluster_size=64, prune_warmup_epochs=10,
                                          prune_every=5, val_max=5000, val_max_labels=50_000,
                                          **(RECIPE | {"lr": 1e-4}))),
    }
    if name not in profiles:
        raise ValueError(f"unknown profile '{name}': choose one of {', '.join(profiles)}")
    return profiles[name]


def train_settings(profile: Profile) -> TrainConfig:
    """The profile's training config, seeded by the profile: the same for every data set (no data set is
    special-cased; a user's own settings go in as overrides)."""
    return profile.train.model_copy(update={"seed": profile.seed})


def finetune_settings(profile: Profile) -> TrainConfig:
    """The schedule of a method that fine-tunes the transformer with its own parts (TextGNN, OAK), seeded by the
    profile: the profile's ``finetune`` where its ``train`` trains a tower, else ``train``."""
    return (profile.finetune or profile.train).model_copy(update={"seed": profile.seed})


def encoder_config(profile: Profile, home: Path) -> EncoderConfig:
    """The profile's encoder, its encodings stored in the home's vector cache; ``tiny`` builds (once) a random tiny
    BERT under ``<home>/models/tiny-bert``."""
    cache = {"vector_cache": str(vectors_dir(home))}
    if not profile.tiny_model or profile.encoder.model_path:
        return profile.encoder.model_copy(update=cache)
    from xc_core.encoders.tiny import build_tiny_bert

    path = home / "models" / "tiny-bert"
    if not (path / "config.json").exists():
        build_tiny_bert(path, seed=profile.seed)
    return profile.encoder.model_copy(update={"model_path": str(path), **cache})
