"""`fleetslo demo`: the whole loop on one machine (scenario, router, load, control, live view, verdict)."""
