"""FleetSLO documents as they come: files, Kubernetes resources, and ``kubectl get -o yaml`` Lists.

A resource (``apiVersion: fleetslo.io/v1alpha1``) carries what the API server adds — metadata
such as ``uid`` and ``resourceVersion``, and ``status`` — and its target namespace defaults to the
resource's own namespace, as Kubernetes objects' references do. ``normalize`` turns any of these
into the one spec document the loader validates; ``documents`` flattens ``List`` documents.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: The same spec served by the Kubernetes API as a custom resource (``kubectl get fleetslo``):
#: ``fleetslo.core.spec.crd`` generates its schema from the spec's models, so it is one spec.
RESOURCE_API_VERSION = "fleetslo.io/v1alpha1"


def documents(raw: Iterable[Any]) -> list[Any]:
    """Every FleetSLO document in ``raw``, with ``kind: List`` (or ``FleetSLOList``) items flattened."""
    out: list[Any] = []
    for doc in raw:
        if isinstance(doc, Mapping) and str(doc.get("kind", "")).endswith("List") and "items" in doc:
            out.extend(documents(doc.get("items") or []))
        elif doc is not None:
            out.append(doc)
    return out


def normalize(doc: Any) -> Any:
    """A resource as the spec document it is; anything else unchanged (the loader judges it)."""
    if not isinstance(doc, Mapping) or doc.get("apiVersion") != RESOURCE_API_VERSION:
        return doc
    metadata: Mapping[str, Any] = doc["metadata"] if isinstance(doc.get("metadata"), Mapping) else {}
    spec = doc.get("spec")
    if isinstance(spec, Mapping) and isinstance(spec.get("target"), Mapping) and metadata.get("namespace"):
        target = dict(spec["target"])
        target.setdefault("namespace", metadata["namespace"])
        spec = {**spec, "target": target}
    return {
        "apiVersion": doc["apiVersion"],
        "kind": doc.get("kind"),
        "metadata": {"name": metadata.get("name")},
        "spec": spec,
    }


def resource_key(doc: Mapping[str, Any]) -> tuple[str, str]:
    """``(namespace, name)`` of a resource as the API returned it."""
    metadata = doc.get("metadata") or {}
    return str(metadata.get("namespace", "")), str(metadata.get("name", ""))
