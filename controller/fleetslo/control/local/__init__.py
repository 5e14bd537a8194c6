"""A local fleet of replica processes (the demo today; `fleetslo run` without Kubernetes next)."""
