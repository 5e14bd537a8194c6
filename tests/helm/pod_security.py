"""Kubernetes Pod Security Standards, "baseline" and "restricted" (v1.30 policy), as field checks.

Written from the published standard (kubernetes.io "Pod Security Standards"), one function per
control, each returning what violates it; a pod meets a profile when no control of it (and of
the profiles below) reports anything. Only controls a chart can get wrong are here; the
AppArmor, SELinux, /proc mount and sysctl controls are included because a values file could set them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

Pod = dict[str, Any]
Control = Callable[[Pod], list[str]]

#: Capabilities "baseline" lets a container add (anything else is a violation).
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
    "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}  # fmt: skip
#: Volume types "restricted" allows.
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected",
    "secret",
}  # fmt: skip
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}  # fmt: skip


def _containers(pod: Pod) -> Iterator[dict[str, Any]]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from pod.get(key) or []


def _sc(container: dict[str, Any]) -> dict[str, Any]:
    return container.get("securityContext") or {}


def host_namespaces(pod: Pod) -> list[str]:
    return [f"spec.{k}" for k in ("hostNetwork", "hostPID", "hostIPC") if pod.get(k)]


def privileged(pod: Pod) -> list[str]:
    return [f"{c['name']}: privileged" for c in _containers(pod) if _sc(c).get("privileged")]


def baseline_capabilities(pod: Pod) -> list[str]:
    out = []
    for c in _containers(pod):
        added = set((_sc(c).get("capabilities") or {}).get("add") or [])
        out += [f"{c['name']}: adds {cap}" for cap in sorted(added - BASELINE_CAPABILITIES)]
    return out


def host_path(pod: Pod) -> list[str]:
    return [f"volume {v['name']}: hostPath" for v in pod.get("volumes") or [] if "hostPath" in v]


def host_ports(pod: Pod) -> list[str]:
    return [f"{c['name']}: hostPort {p['hostPort']}" for c in _containers(pod) for p in c.get("ports") or []
            if p.get("hostPort")]  # fmt: skip


def proc_mount_and_selinux(pod: Pod) -> list[str]:
    out = []
    for c in _containers(pod):
        sc = _sc(c)
        if sc.get("procMount", "Default") != "Default":
            out.append(f"{c['name']}: procMount {sc['procMount']}")
        selinux_type = (sc.get("seLinuxOptions") or {}).get("type")
        if selinux_type not in (None, "", "container_t", "container_init_t", "container_kvm_t"):
            out.append(f"{c['name']}: seLinux type {selinux_type}")
    return out


def seccomp_not_unconfined(pod: Pod) -> list[str]:
    profiles = [("pod", (pod.get("securityContext") or {}).get("seccompProfile"))]
    profiles += [(c["name"], _sc(c).get("seccompProfile")) for c in _containers(pod)]
    return [f"{where}: seccomp Unconfined" for where, p in profiles if p and p.get("type") == "Unconfined"]


def sysctls(pod: Pod) -> list[str]:
    names = [s["name"] for s in (pod.get("securityContext") or {}).get("sysctls") or []]
    return [f"sysctl {n}" for n in names if n not in SAFE_SYSCTLS]


def volume_types(pod: Pod) -> list[str]:
    out = []
    for volume in pod.get("volumes") or []:
        kinds = set(volume) - {"name"}
        out += [f"volume {volume['name']}: {k}" for k in sorted(kinds - RESTRICTED_VOLUMES)]
    return out


def no_privilege_escalation(pod: Pod) -> list[str]:
    return [f"{c['name']}: allowPrivilegeEscalation not false" for c in _containers(pod)
            if _sc(c).get("allowPrivilegeEscalation") is not False]  # fmt: skip


def non_root(pod: Pod) -> list[str]:
    pod_sc = pod.get("securityContext") or {}
    out = []
    for c in _containers(pod):
        sc = _sc(c)
        if sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is not True:
            out.append(f"{c['name']}: runAsNonRoot not true")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
            out.append(f"{c['name']}: runAsUser 0")
    return out


def seccomp_set(pod: Pod) -> list[str]:
    pod_profile = ((pod.get("securityContext") or {}).get("seccompProfile") or {}).get("type")
    out = []
    for c in _containers(pod):
        profile = (_sc(c).get("seccompProfile") or {}).get("type", pod_profile)
        if profile not in ("RuntimeDefault", "Localhost"):
            out.append(f"{c['name']}: seccompProfile {profile}")
    return out


def restricted_capabilities(pod: Pod) -> list[str]:
    out = []
    for c in _containers(pod):
        caps = _sc(c).get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"{c['name']}: does not drop ALL capabilities")
        out += [f"{c['name']}: adds {cap}" for cap in caps.get("add") or [] if cap != "NET_BIND_SERVICE"]
    return out


BASELINE: tuple[Control, ...] = (host_namespaces, privileged, baseline_capabilities, host_path, host_ports,
                                 proc_mount_and_selinux, seccomp_not_unconfined, sysctls)  # fmt: skip
RESTRICTED: tuple[Control, ...] = (*BASELINE, volume_types, no_privilege_escalation, non_root, seccomp_set,
                                   restricted_capabilities)  # fmt: skip


def violations(pod: Pod, profile: tuple[Control, ...]) -> list[str]:
    return [problem for control in profile for problem in control(pod)]
