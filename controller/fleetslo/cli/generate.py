"""``fleetslo alerts build`` and ``fleetslo dashboards build``: generated, committed artifacts."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

from fleetslo.cli.common import (
    EXIT_FAILURE,
    EXIT_OK,
    read_yaml_documents,
)

# --------------------------------------------------------------------------------------------
# fleetslo alerts build / fleetslo dashboards build
# --------------------------------------------------------------------------------------------


def _sync_generated(files: Mapping[str, str], out: Path, check: bool, command: str) -> int:
    """Write generated files into ``out`` (removing the stale ones it generated earlier), or with
    ``check`` report drift; either way only files listed in ``out``'s manifest are fleetslo's."""
    from fleetslo.generate.alerts.build import MANIFEST, drift, manifest_text, parse_manifest, plan_sync

    manifest = _read(out / MANIFEST)
    owned = parse_manifest(manifest)
    on_disk = {n: t for n in {*files, *owned} if (t := _read(out / n)) is not None}
    if check:
        problems = drift(files, on_disk, manifest, command)
        for problem in problems:
            print(f"drift: {out / problem}", file=sys.stderr)
        if problems:
            print("regenerate with the same command without --check and commit the result", file=sys.stderr)
        return EXIT_FAILURE if problems else EXIT_OK
    plan = plan_sync(files, on_disk, owned)
    if plan.conflicts:
        for name in plan.conflicts:
            print(f"fleetslo {command} build: {out / name} exists and was not written by fleetslo (not "
                  f"in {out / MANIFEST}); move it away or choose another --out", file=sys.stderr)  # fmt: skip
        return EXIT_FAILURE
    out.mkdir(parents=True, exist_ok=True)
    for name in plan.remove:
        (out / name).unlink()
        print(f"removed {out / name} (generated earlier; none of these specs generates it)")
    for name in plan.keep:
        print(f"kept {out / name}: generated earlier but edited since; delete it if it is not needed",
              file=sys.stderr)  # fmt: skip
    for name, text in plan.write.items():
        (out / name).write_text(text, encoding="utf-8")
    (out / MANIFEST).write_text(manifest_text(files, command), encoding="utf-8")
    print(f"wrote {len(files)} files to {out} ({len(plan.write)} changed; listed in {MANIFEST})")
    return EXIT_OK


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8") if path.is_file() else None
    except OSError:
        return None


def _configure_alerts(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = sub.add_parser("build", help="FleetSLO specs -> rule files and Alertmanager config")
    build.add_argument("--slo", action="append", required=True, help="FleetSLO spec file (repeatable)")
    build.add_argument("--out", default="alerts/generated", help="output folder (default alerts/generated)")
    build.add_argument("--check", action="store_true", help="compare with --out instead; exit 1 on drift")


def _run_alerts(args: argparse.Namespace) -> int:
    from fleetslo.core.spec import load_fleetslo_documents
    from fleetslo.generate.alerts.build import generate

    specs = [(Path(f).name, load_fleetslo_documents(read_yaml_documents(f), f)) for f in args.slo]
    output = generate(specs)
    for warning in output.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return _sync_generated(output.files, Path(args.out), args.check, "alerts")


def _configure_dashboards(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = sub.add_parser("build", help="Grafana dashboards (JSON, Grafana 11)")
    build.add_argument(
        "--out", default="dashboards/generated", help="output folder (default dashboards/generated)"
    )
    build.add_argument("--check", action="store_true", help="compare with --out instead; exit 1 on drift")


def _run_dashboards(args: argparse.Namespace) -> int:
    from fleetslo.generate.dashboards.build import generate

    return _sync_generated(generate(), Path(args.out), args.check, "dashboards")


# --------------------------------------------------------------------------------------------
# fleetslo autoscaler build
# --------------------------------------------------------------------------------------------


def _configure_autoscaler(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = sub.add_parser(
        "build", help="the KEDA ScaledObject or HPA that follows fleetslo's desired replicas"
    )
    build.add_argument("--slo", action="append", required=True,
                       help="FleetSLO spec file, or kubectl get -o yaml output (repeatable)")  # fmt: skip
    build.add_argument(
        "--kind", choices=["keda", "hpa"], default="keda", help="ScaledObject (default) or HPA"
    )
    build.add_argument("--prometheus-url", default="http://prometheus-operated.monitoring:9090",
                       help="where KEDA queries the controller's metrics (keda only)")  # fmt: skip


def _run_autoscaler(args: argparse.Namespace) -> int:
    import yaml

    from fleetslo.core.spec import ReplicaActuatorKind, load_fleetslo_documents
    from fleetslo.generate.autoscalers import AutoscalerKind, follower

    specs = [s for f in args.slo for s in load_fleetslo_documents(read_yaml_documents(f), f)]
    for s in specs:
        if s.spec.replicas.actuator != ReplicaActuatorKind.EXTERNAL:
            actuator = s.spec.replicas.actuator.value
            print(f"warning: {s.metadata.name}: replicas.actuator is {actuator}, so fleetslo scales it "
                  "too; set it to external before applying this", file=sys.stderr)  # fmt: skip
    objects = [follower(s, AutoscalerKind(args.kind), args.prometheus_url) for s in specs]
    sys.stdout.write(yaml.safe_dump_all(objects, sort_keys=False))
    return EXIT_OK
