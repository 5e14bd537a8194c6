"""The sidecar beside each vLLM server: scrape, derive windowed signals, serve and push them."""
