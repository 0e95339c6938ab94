"""The language sets the benchmarks run: the paper's six (sampling.languages' default)
and the catalogue's fourteen (without the locales pt-PT and zh-Hant)."""

from __future__ import annotations

__all__ = ["FOURTEEN", "SIX"]

SIX = ["en", "ja", "zh", "fr", "de", "ko"]
FOURTEEN = [*SIX, "es", "pt", "ar", "hi", "id", "it", "tr", "ru"]
