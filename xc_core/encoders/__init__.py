"""Text encoders: any local Hugging Face encoder, mean-pooled and L2-normalised (RAMEN's unit sphere)."""

from xc_core.encoders.text import EncoderConfig, TextEncoder, default_model_path, encoder_for

__all__ = ["EncoderConfig", "TextEncoder", "default_model_path", "encoder_for"]
