"""bias-monitor: continuous monitoring of local-language bias in LLM endpoints."""

__version__ = "0.4.0"
