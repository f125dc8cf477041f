"""Typed run profiles: ``tiny`` (tests, seconds), ``demo`` (the default CPU run, minutes), ``full`` (GPU,
the papers' settings). A profile fixes every knob a stage needs; stages take it, never globals."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from xc_core.encoders.text import EncoderConfig
from xc_core.graphs.rwr import RWRConfig

ProfileName = Literal["tiny", "demo", "full"]


class Profile(BaseModel):
    name: ProfileName
    encoder: EncoderConfig
    rwr: RWRConfig
    tiny_model: bool = Field(default=False, description="use a random tiny BERT built under <home>/models")
    seed: int = 0


def get_profile(name: str) -> Profile:
    profiles: dict[str, Profile] = {
        "tiny": Profile(name="tiny", encoder=EncoderConfig(max_length=16, batch_size=512),
                        rwr=RWRConfig(walk_length=100), tiny_model=True),
        "demo": Profile(name="demo", encoder=EncoderConfig(max_length=32, n_layers=3, batch_size=256),
                        rwr=RWRConfig()),
        "full": Profile(name="full", encoder=EncoderConfig(max_length=32, batch_size=1024), rwr=RWRConfig()),
    }
    if name not in profiles:
        raise ValueError(f"unknown profile '{name}': choose one of {', '.join(profiles)}")
    return profiles[name]


def encoder_config(profile: Profile, home: Path) -> EncoderConfig:
    """The profile's encoder; ``tiny`` builds (once) a random tiny BERT under ``<home>/models/tiny-bert``."""
    if not profile.tiny_model or profile.encoder.model_path:
        return profile.encoder
    from xc_core.encoders.tiny import build_tiny_bert

    path = home / "models" / "tiny-bert"
    if not (path / "config.json").exists():
        build_tiny_bert(path, seed=profile.seed)
    return profile.encoder.model_copy(update={"model_path": str(path)})
