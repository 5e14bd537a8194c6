"""Fleet simulator: an event-driven vLLM engine model, real traces, and replay through the same policies."""
