"""Suite-wide test settings."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

# Property tests check results, not speed: on a shared 2-core machine one example can take longer
# than hypothesis' default 200 ms deadline, and a deadline failure there says nothing about the code.
settings.register_profile(
    "fleetslo", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("fleetslo")
