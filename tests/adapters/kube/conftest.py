"""Fixtures: a fresh in-process Kubernetes API per test (``kapi``), reached by the official client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.kube.kapi import KubeApi, running_api


@pytest.fixture
def kapi() -> Iterator[KubeApi]:
    with running_api() as api:
        yield api
