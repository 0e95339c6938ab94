"""bias-monitor: continuous monitoring of local-language bias in LLM endpoints."""

__version__ = "0.4.0"

#: Every request the monitor makes says who sends it, and nothing of the host (no
#: operating system, kernel, architecture or Python version, which clients add).
USER_AGENT = f"bias-monitor/{__version__}"
