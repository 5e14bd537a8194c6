"""``fleetslo run`` over FleetSLO resources: hold what the cluster declares, and follow its changes.

The specs come from the file (``--slo``, a ConfigMap for clusters that forbid CRDs) and, with
``resources.enabled``, from the FleetSLO resources of the watched namespaces. Every ``resync``
the resources are listed again; when the set of specs changed (a FleetSLO created, edited or
deleted; an autoscaler appeared or went), the running controller is stopped — reconciles finish,
the lease is released — and built again for the new set. Spec changes are rare and a rebuild
takes a fraction of a second, so a list-and-compare is simpler and as correct as a watch stream.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from kubernetes import client

from fleetslo.control.kube.client import connect
from fleetslo.control.kube.events import KubeEventRecorder
from fleetslo.control.kube.fleetslo_resources import Autoscalers, FleetSLOResources
from fleetslo.control.resources import Held, Loaded, guard_conflicts, invalid_status, load_resources
from fleetslo.control.service import Environment, Service, build, no_profile_reader, read_profile
from fleetslo.control.settings import ControllerSettings
from fleetslo.core.errors import ConfigError, FleetSLOError
from fleetslo.core.spec import FleetSLO
from fleetslo.policy.registry import check_options

log = logging.getLogger("fleetslo.run")


def held_specs(
    settings: ControllerSettings,
    file_specs: Sequence[FleetSLO],
    api: client.ApiClient,
    events: KubeEventRecorder | None = None,
    env: Environment | None = None,
) -> list[Held]:
    """Every spec to hold now: the file's, the valid resources', conflicts made advisory.
    Invalid resources get a Degraded status saying why they are not held. Pass the same
    ``events`` on every resync, so a lasting conflict counts up on one Event."""
    held = [Held(s) for s in file_specs]
    if settings.resources.enabled:
        resources = FleetSLOResources(api)
        loaded = load_resources(resources.find(settings.resources.namespaces))
        refuse_unreadable_profiles(loaded, env)
        for (namespace, name), message in loaded.invalid.items():
            log.error("FleetSLO %s/%s is not held: %s", namespace, name, message)
            try:
                resources.write_status(namespace, name, invalid_status(message))
            except FleetSLOError as exc:
                log.warning("could not write the status of FleetSLO %s/%s: %s", namespace, name, exc)
        held.extend(loaded.held)
    if settings.resources.conflict_check:
        if events is None and not settings.dry_run:
            events = KubeEventRecorder(api, settings.kubernetes.component, time.time)
        held = guard_conflicts(held, Autoscalers(api), events)
    return held


def refuse_unreadable_profiles(loaded: Loaded, env: Environment | None) -> None:
    """A resource whose ``spec.profile`` cannot be read is not held: it is invalid as written, and
    its status says why (as for any other invalid spec), rather than running on the wrong prior."""
    for h in list(loaded.held):
        if h.slo.spec.profile is None or h.resource is None:
            continue
        try:
            read_profile(h.slo, env.profiles if env is not None else no_profile_reader)
        except ConfigError as exc:
            loaded.held.remove(h)
            loaded.invalid[h.resource] = str(exc)


def fingerprint(held: Sequence[Held]) -> list[tuple[str, str, str]]:
    """What a rebuild depends on: each spec as validated, and the autoscaler it conflicts with."""
    return sorted((h.slo.metadata.name, h.slo.model_dump_json(), str(h.conflict)) for h in held)


def serve(
    settings: ControllerSettings,
    file_specs: Sequence[FleetSLO],
    env: Environment,
    stop: threading.Event,
    api: client.ApiClient | None = None,
) -> None:
    """Run the controller until ``stop``; rebuilt whenever the held specs change."""
    check_options(settings.policy, settings.policy_options)  # a typo stops here, before any cluster call
    api = api or connect(settings.kubernetes, in_pod=env.in_pod)
    status = FleetSLOResources(api) if settings.resources.enabled else None
    events = None if settings.dry_run else KubeEventRecorder(api, settings.kubernetes.component, time.time)
    held = held_specs(settings, file_specs, api, events, env)
    while not stop.is_set():
        log.info(
            "holding %d FleetSLO(s): %s", len(held), ", ".join(h.slo.metadata.name for h in held) or "none"
        )
        service = Service(
            build(settings, [h.slo for h in held], env, api, status=status, held=held), settings
        )
        service.start()
        try:
            held = _until_changed(settings, file_specs, api, held, stop, events, env)
        finally:
            service.stop()


def _until_changed(  # noqa: PLR0917 (private, one caller)
    settings: ControllerSettings,
    file_specs: Sequence[FleetSLO],
    api: client.ApiClient,
    held: list[Held],
    stop: threading.Event,
    events: KubeEventRecorder | None,
    env: Environment,
) -> list[Held]:
    """Wait for ``stop`` or for a different set of specs (then returned)."""
    if not settings.resources.enabled and not settings.resources.conflict_check:
        stop.wait()
        return held
    while not stop.wait(settings.resources.resync):
        try:
            fresh = held_specs(settings, file_specs, api, events, env)
        except FleetSLOError as exc:
            log.warning("could not list FleetSLOs again (keeping the current ones): %s", exc)
            continue
        if fingerprint(fresh) != fingerprint(held):
            log.info("the FleetSLOs changed: restarting the targets")
            return fresh
    return held
