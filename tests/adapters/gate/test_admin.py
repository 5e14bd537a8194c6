"""The gate's admin API over real sockets: auth, the live limit, drain and resume, status."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path

import pytest
from fleetslo.sidecar.gate.testing import FakeOpenAIUpstream

from tests.adapters.gate.harness import TOKEN, chat, running

pytestmark = [pytest.mark.asyncio, pytest.mark.virtual_time]


async def test_without_a_token_configured_there_is_no_admin_listener() -> None:
    async with running(token=None) as rig:
        assert rig.gate.admin_port is None
        assert (await rig.post("/v1/chat/completions", chat(1)))[0] == 200


@pytest.mark.parametrize(
    "header", [None, "Bearer wrong", f"Basic {TOKEN}", "Bearer", f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}"]
)
async def test_a_missing_or_wrong_token_is_401_and_changes_nothing(
    header: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with running(max_inflight=5) as rig:
        headers = {} if header is None else {"Authorization": header}
        url = rig.admin_url + "/admin/limit"
        async with rig.client.put(url, data=json.dumps({"limit": 1}), headers=headers) as resp:
            assert resp.status == 401
            assert resp.headers["WWW-Authenticate"].startswith("Bearer")
            assert (await resp.json())["error"]["code"] == "invalid_token"
        assert rig.gate.admission.limit == 5
    assert TOKEN not in caplog.text


async def test_the_limit_can_be_read_and_set_and_the_token_is_never_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    async with running(max_inflight=8) as rig:
        assert await rig.admin("GET", "/admin/limit") == (200, {"limit": 8})
        assert await rig.admin("PUT", "/admin/limit", {"limit": 3}) == (200, {"limit": 3, "previous": 8})
        assert rig.gate.admission.limit == 3
        assert await rig.admin("PUT", "/admin/limit", {"limit": None}) == (
            200,
            {"limit": None, "previous": 3},
        )
    assert TOKEN not in caplog.text
    assert "limit changed from 8 to 3" in caplog.text


BAD_LIMITS = [{"limit": 0}, {"limit": -1}, {"limit": 1.5}, {"limit": "8"}, {"limit": True}, {}, [],
              {"limit": 70_000}]  # fmt: skip


@pytest.mark.parametrize("body", BAD_LIMITS)
async def test_a_bad_limit_is_400_and_changes_nothing(body: object) -> None:
    async with running(max_inflight=8) as rig:
        status, answer = await rig.admin("PUT", "/admin/limit", body)
        assert status == 400
        assert answer["error"]["type"] == "invalid_request_error"
        assert rig.gate.admission.limit == 8


async def test_drain_finishes_in_flight_requests_refuses_new_ones_and_reports_drained() -> None:
    async with running(FakeOpenAIUpstream(first_token_delay=0.3), max_inflight=1) as rig:
        in_flight = asyncio.create_task(rig.post("/v1/chat/completions", chat(3)))
        queued = asyncio.create_task(rig.post("/v1/chat/completions", chat(3)))
        await asyncio.sleep(0.1)
        status, state = await rig.admin("POST", "/admin/drain")
        assert status == 202
        assert state["draining"] and not state["drained"] and state["inflight"] == 1 and state["queued"] == 1
        assert rig.gate.not_ready() == "gate draining"
        refused, body = await rig.post("/v1/chat/completions", chat(3))
        assert refused == 503 and json.loads(body)["error"]["code"] == "draining"
        assert [s for s, _ in await asyncio.gather(in_flight, queued)] == [200, 200]
        status, state = await rig.admin("GET", "/admin/status")
        assert state["drained"] and state["rejected"] == {"draining": 1}
        assert (await rig.admin("POST", "/admin/drain"))[0] == 200
        # Other paths (health checks, model lists) still answer while draining.
        async with rig.client.get(rig.url + "/v1/models") as resp:
            assert resp.status == 200


async def test_resume_after_a_drain_admits_again() -> None:
    async with running() as rig:
        await rig.admin("POST", "/admin/drain")
        assert (await rig.post("/v1/completions", chat(1)))[0] == 503
        status, state = await rig.admin("DELETE", "/admin/drain")
        assert status == 200 and not state["draining"]
        assert rig.gate.not_ready() is None
        assert (await rig.post("/v1/chat/completions", chat(1)))[0] == 200


async def test_status_reports_the_admission_state() -> None:
    async with running(max_inflight=2, max_queue=7) as rig:
        await rig.post("/v1/chat/completions", chat(1))
        status, state = await rig.admin("GET", "/admin/status")
        assert status == 200
        assert state == {
            "limit": 2, "inflight": 0, "queued": 0, "max_queue": 7, "draining": False, "drained": False,
            "rejected": {}, "requests": {"completed": 1},
        }  # fmt: skip


async def test_deeply_nested_json_is_a_400_not_a_recursion_error() -> None:
    async with running(max_inflight=8) as rig:
        for body in ("[" * 4000, "[" * 2000 + "]" * 2000, '{"limit":' * 400):
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with rig.client.put(rig.admin_url + "/admin/limit", data=body, headers=headers) as resp:
                assert resp.status == 400
        assert rig.gate.admission.limit == 8


async def test_a_rotated_token_file_takes_effect_without_a_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    path = tmp_path / "token"
    path.write_text("first-token-0123456789\n")
    path.chmod(0o600)
    async with running(token=None, admin_token_file=str(path)) as rig:
        assert (await rig.admin("GET", "/admin/limit", token="first-token-0123456789"))[0] == 200
        replacement = tmp_path / "token.new"
        replacement.write_text("second-token-0123456789\n")
        replacement.chmod(0o600)
        replacement.replace(path)  # as a Secret's atomic swap
        assert (await rig.admin("GET", "/admin/limit", token="first-token-0123456789"))[0] == 401
        assert (await rig.admin("GET", "/admin/limit", token="second-token-0123456789"))[0] == 200
        path.write_text("short\n")  # rotated to an unusable token: refuse everything
        os.utime(path, ns=(1, 1))
        assert (await rig.admin("GET", "/admin/limit", token="short"))[0] == 401
        assert (await rig.admin("GET", "/admin/limit", token="second-token-0123456789"))[0] == 401
    assert "shorter than 16 characters" in caplog.text
    assert "first-token" not in caplog.text and "second-token" not in caplog.text


async def test_a_token_file_others_can_read_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "token"
    path.write_text("a-token-others-can-read\n")
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING):
        async with running(token=None, admin_token_file=str(path)) as rig:
            assert (await rig.admin("GET", "/admin/limit", token="a-token-others-can-read"))[0] == 200
    assert "readable by its group or others (mode 644)" in caplog.text
