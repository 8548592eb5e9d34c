"""The environment each started process gets (core/environ.py): os.environ as it is at each call,
decoded once while it stays the same, never shared between callers."""

from __future__ import annotations

import os

import pytest

from jaxrun.core.environ import environment


def test_it_is_os_environ_as_it_is_now(monkeypatch: pytest.MonkeyPatch) -> None:
    assert environment() == dict(os.environ)
    monkeypatch.setenv("JAXRUN_TEST_ENVIRON", "one")
    assert environment()["JAXRUN_TEST_ENVIRON"] == "one"
    monkeypatch.setenv("JAXRUN_TEST_ENVIRON", "two")  # a value changed, the names the same
    assert environment()["JAXRUN_TEST_ENVIRON"] == "two"
    monkeypatch.delenv("JAXRUN_TEST_ENVIRON")
    assert "JAXRUN_TEST_ENVIRON" not in environment()
    assert environment() == dict(os.environ)


def test_each_caller_gets_its_own_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAXRUN_TEST_ENVIRON", "kept")
    first = environment()
    first["JAXRUN_TEST_ENVIRON"] = "changed by its caller"
    first["JAXRUN_TEST_ADDED"] = "1"
    second = environment()
    assert second["JAXRUN_TEST_ENVIRON"] == "kept" and "JAXRUN_TEST_ADDED" not in second
    assert os.environ["JAXRUN_TEST_ENVIRON"] == "kept"


def test_undecodable_bytes_come_through_as_os_environ_gives_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(os.environb, b"JAXRUN_TEST_BYTES", b"caf\xe9")
    assert environment()["JAXRUN_TEST_BYTES"] == os.environ["JAXRUN_TEST_BYTES"] == "caf\udce9"
