"""fleetslo: fleet observability and an SLO controller for vLLM inference servers."""

__version__ = "0.1.0"
