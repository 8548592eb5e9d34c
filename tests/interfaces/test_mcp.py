"""`jaxrun mcp` against the MCP SDK's own stdio client: a real server process, real tool calls."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

import jaxrun

mcp = pytest.importorskip("mcp")
from helpers import (  # noqa: E402
    load,
    mcp_call,
    mcp_plain,
    mcp_server_parameters,
    mcp_session,
    survivors,
    write,
)
from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

QUICK = "if False:\n    import jax\nprint('quick')\n"
SLEEPY = "if False:\n    import jax\nimport time\ntime.sleep(300)\n"
TOOLS = {"execute.run_jax_scripts", "execute.check_jax_availability", "execute.monitor_jax_performance",
         "execute.benchmark_jax_script", "history.changes"}


@pytest.mark.slow
def test_the_four_tools_run_report_and_refuse_paths_outside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root / "scripts", "a.py", QUICK)
    write(root / "scripts", "b.py", QUICK)
    outside = tmp_path / "outside"
    write(outside, "c.py", QUICK)
    (root / "link").symlink_to(outside, target_is_directory=True)

    async def body(session: ClientSession) -> None:
        tools = {t.name: mcp_plain(t) for t in (await session.list_tools()).tools}
        assert set(tools) == TOOLS
        for name in ("execute.check_jax_availability", "execute.monitor_jax_performance"):
            assert tools[name]["annotations"]["readOnlyHint"] is True
        assert tools["execute.run_jax_scripts"]["annotations"]["readOnlyHint"] is False
        assert "results_dir" in tools["execute.run_jax_scripts"]["outputSchema"]["properties"]

        cpu = await mcp_call(session, "execute.check_jax_availability", {"device": "cpu"})
        assert not cpu["isError"] and cpu["structuredContent"]["available"] is True
        assert cpu["structuredContent"]["platforms"]["cpu"] >= 1
        gpu = (await mcp_call(session, "execute.check_jax_availability", {"device": "gpu"}))["structuredContent"]
        # The true reason, as `jaxrun devices` reads it (no CUDA backend here), not a list of names.
        truth = jaxrun.get_jax_device_info().platforms["gpu"].error
        assert gpu["available"] is False and gpu["reason"] == f"gpu is not available: {truth}", gpu
        assert "gpu" not in gpu["platforms"]  # JAX sees no GPU: only usable platforms are listed

        progress: list[tuple[float, float | None, str | None]] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append((done, total, message))

        ran = await mcp_call(session, "execute.run_jax_scripts", {"pipeline_output_dir": "scripts", "device": "cpu"},
                          progress_callback=on_progress)
        assert not ran["isError"], ran["content"]
        report = ran["structuredContent"]
        assert report["success"] and report["scripts_successful"] == 2
        assert [s["script_name"] for s in report["scripts"]] == ["a", "b"]
        assert [m for _, _, m in progress][0] == "running a.py" and progress[-1][:2] == (2, 2)
        assert len(progress) == 4  # each script started and finished

        watched = (await mcp_call(session, "execute.monitor_jax_performance",
                               {"results_dir": report["results_dir"]}))["structuredContent"]
        assert watched["complete"] and watched["scripts_executed"] == 2

        bench = await mcp_call(session, "execute.benchmark_jax_script",
                            {"script_path": "scripts/a.py", "benchmark_runs": 2, "warmup_runs": 0, "device": "cpu"})
        assert not bench["isError"], bench["content"]
        assert bench["structuredContent"]["runs_completed"] == 2 and len(bench["structuredContent"]["wall_times"]) == 2

        for path in (str(outside), "link", "scripts/../../outside", "/etc"):
            refused = await mcp_call(session, "execute.run_jax_scripts", {"pipeline_output_dir": path})
            assert refused["isError"], path
            assert "outside the allowed folders" in refused["content"][0]["text"]
        refused = await mcp_call(session, "execute.monitor_jax_performance", {"results_dir": "link"})
        assert refused["isError"] and "outside the allowed folders" in refused["content"][0]["text"]

    anyio.run(mcp_session, root, body)
    assert not (outside / "jaxrun_results").exists()


@pytest.mark.slow
def test_cancelling_a_run_stops_its_scripts(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root / "slow", "sleepy.py", SLEEPY)

    async def body(session: ClientSession) -> None:
        started = anyio.Event()

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            if message == "running sleepy.py":
                started.set()

        async with anyio.create_task_group() as group:
            async def call() -> None:
                await session.call_tool("execute.run_jax_scripts", {"pipeline_output_dir": "slow", "device": "cpu"},
                                        progress_callback=on_progress)

            group.start_soon(call)
            with anyio.fail_after(60):
                await started.wait()
            await anyio.sleep(0.5)
            group.cancel_scope.cancel()  # the client cancels the request

        deadline = time.monotonic() + 30
        while survivors(str(root / "slow")) and time.monotonic() < deadline:
            await anyio.sleep(0.2)

    anyio.run(mcp_session, root, body)
    assert survivors(str(root / "slow")) == []
    doc = load(root / "jaxrun_results" / "jax_execution_results.json")
    assert doc["metadata"]["complete"] is False
    assert doc["script_results"][0]["error_class"] == "interrupted"


@pytest.mark.slow
def test_each_tool_error_is_one_plain_line_on_the_servers_stderr(tmp_path: Path) -> None:
    """The SDK logs every tool error; rich's handler made each a boxed block of ~10 wrapped lines."""
    root = tmp_path / "root"
    root.mkdir()
    stderr = tmp_path / "server-stderr.txt"

    async def body(session: ClientSession) -> None:
        for arguments in ({"results_dir": "/etc"}, {"results_dir": "nothing-here"}):
            failed = await mcp_call(session, "execute.monitor_jax_performance", arguments)
            assert failed["isError"], failed

    with stderr.open("w") as errlog:
        anyio.run(mcp_session, root, body, errlog)
    lines = stderr.read_text().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("jaxrun mcp: INFO: Tool 'execute.monitor_jax_performance' failed: ")
    assert "'/etc'" in lines[0] and "outside the allowed folders" in lines[0]
    assert "no jaxrun results in" in lines[1] and "nothing-here" in lines[1]


def test_the_server_says_jaxruns_version_in_its_initialize_result(tmp_path: Path) -> None:
    """``serverInfo.version`` is jaxrun's (jaxrun/core/version.py, what ``jaxrun --version`` says), not
    empty and not the SDK's."""
    from jaxrun.core.version import version

    seen: dict = {}

    async def run() -> None:
        async with stdio_client(mcp_server_parameters(tmp_path)) as (read, write_stream):
            async with ClientSession(read, write_stream) as session:
                seen.update(mcp_plain(await session.initialize()))

    anyio.run(run)
    info = seen["serverInfo"]
    assert info["name"] == "jaxrun"
    assert info["version"] == version() and info["version"] not in ("", mcp_version()), info


def mcp_version() -> str:
    import importlib.metadata

    return importlib.metadata.version("mcp")


TEN_MB = "x" * 10_000_000
# A valid value of each argument a tool requires, so that only the argument under test is wrong.
VALID = {"pipeline_output_dir": "scripts", "script_path": "scripts/a.py", "results_dir": "r", "history": "h.sqlite"}


def _kinds(schema: dict) -> set[str]:
    """The JSON types an argument takes any value of (timeout's "none" is one word, not any text)."""
    if "const" in schema or "enum" in schema:
        return set()
    return {schema["type"]} if "type" in schema else {kind for s in schema.get("anyOf", ()) for kind in _kinds(s)}


def _refusal(called: dict, tool: str, argument: str) -> str:
    """The text of a tool error, which must name ``argument`` at its start and stay short."""
    assert called["isError"], (tool, argument, str(called)[:500])
    text = called["content"][0]["text"]
    assert len(text) < 1000, (tool, argument, len(text), text[:300])
    assert text.startswith((f"{argument}: ", f"{argument} ")), (tool, argument, text)
    return text


@pytest.mark.slow
def test_every_argument_of_every_tool_is_bounded_and_a_refusal_names_it(tmp_path: Path) -> None:
    """Each tool x each string argument, 10 MB long, holding a NUL byte, or just past PATH_MAX;
    each count past its option's bound (2**63) or below 0; each number out of range. Refused
    before anything runs, in a short tool error that names the argument and says why."""
    root = tmp_path / "root"
    write(root / "scripts", "a.py", QUICK)
    (root / "r").mkdir()
    refusals: list[str] = []
    strings: list[tuple[str, str]] = []

    async def body(session: ClientSession) -> None:
        tools = {t.name: mcp_plain(t)["inputSchema"] for t in (await session.list_tools()).tools}
        assert set(tools) == TOOLS
        tried = set()
        for tool, schema in sorted(tools.items()):
            for argument, spec in schema["properties"].items():
                kinds = _kinds(spec)
                bad: list[object] = []
                if "string" in kinds:
                    bad = [TEN_MB, "a\0b", "y" * 5000]
                    strings.append((tool, argument))
                elif "integer" in kinds:
                    bad = [2**63, 10**30, -1]
                elif "number" in kinds:
                    bad = [-1, 0]
                for value in bad:
                    given = {**{k: v for k, v in VALID.items() if k in schema.get("required", ())}, argument: value}
                    with anyio.fail_after(120):  # refused at once, never run (2**63 runs would never end)
                        refusals.append(_refusal(await mcp_call(session, tool, given), tool, argument))
                    tried.add((tool, argument))
        assert {a for _, a in tried} == {"pipeline_output_dir", "device", "timeout", "results_dir", "script_path",
                                         "benchmark_runs", "warmup_runs", "backend", "history", "script", "metric",
                                         "since"}, tried

    anyio.run(mcp_session, root, body)
    assert not (root / "jaxrun_results").exists() and not (root / "jaxrun_benchmarks").exists()  # nothing ran
    assert not any(text.endswith(("Error executing tool", ": ")) for text in refusals)
    nul = [text for text in refusals if "NUL" in text or "\\x00" in text]
    assert len(strings) == 13 and len(nul) == len(strings), nul  # each string argument said why


def test_a_device_is_echoed_as_jaxrun_reads_it_never_as_given(tmp_path: Path) -> None:
    async def body(session: ClientSession) -> None:
        padded = await mcp_call(session, "execute.check_jax_availability", {"device": " " * 1_000_000 + "CPU:0"})
        assert not padded["isError"], padded["content"]
        assert padded["structuredContent"]["device"] == "cpu:0"
        for device in ("gpu:" + "9" * 5000, "cpu:" + "0" * 5000 + "1x", "cpu:2147483648"):
            _refusal(await mcp_call(session, "execute.check_jax_availability", {"device": device}),
                     "execute.check_jax_availability", "device")

    anyio.run(mcp_session, tmp_path, body)


def test_benchmark_takes_one_script_and_refuses_a_folder_or_a_missing_file(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root / "scripts", "a.py", QUICK)
    write(root / "scripts", "b.py", QUICK)

    async def body(session: ClientSession) -> None:
        for path, what in (("scripts", "is a folder"), ("scripts/none.py", "is missing")):
            said = _refusal(await mcp_call(session, "execute.benchmark_jax_script", {"script_path": path}),
                            "execute.benchmark_jax_script", "script_path")
            assert what in said and "execute.run_jax_scripts runs a folder" in said, said

    anyio.run(mcp_session, root, body)
    assert not (root / "jaxrun_benchmarks").exists()


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_monitor_never_opens_a_fifo_or_a_device_as_its_results_file(tmp_path: Path, kind: str) -> None:
    results = tmp_path / "r"
    results.mkdir()
    name = results / "jax_execution_results.json"
    if kind == "fifo":
        os.mkfifo(name)
    else:
        name.symlink_to("/dev/zero")
    what = "a FIFO (named pipe)" if kind == "fifo" else "a character device"

    async def body(session: ClientSession) -> None:
        with anyio.fail_after(60):  # a FIFO's open waits for a writer; /dev/zero never ends
            said = _refusal(await mcp_call(session, "execute.monitor_jax_performance", {"results_dir": "r"}),
                            "execute.monitor_jax_performance", "results_dir")
        assert f"jax_execution_results.json' is not a regular file but {what}" in said, said

    anyio.run(mcp_session, tmp_path, body)


NAN, INF = float("nan"), float("inf")


def _required(schema: dict) -> dict:
    return {k: v for k, v in VALID.items() if k in schema.get("required", ())}


@pytest.mark.slow
def test_every_argument_is_checked_as_the_cli_checks_it_and_an_unknown_one_is_refused(tmp_path: Path) -> None:
    """Each tool x each argument: a value of another JSON type (a number as text, a count with a
    fraction, a list, true for a number), NaN and infinities (which the SDK's client, as any JSON
    client, sends as null), a negative number; and an argument no tool takes. Each is refused
    before anything runs, in one short line that starts with the argument's name; an unknown one
    is named with every valid one listed; the schema a client reads says no other is taken."""
    from helpers import jaxrun

    root = tmp_path / "root"
    write(root / "scripts", "a.py", QUICK)
    (root / "r").mkdir()
    tried: set[tuple[str, str]] = set()
    same_as_cli: dict[tuple[str, object], str] = {}

    async def body(session: ClientSession) -> None:
        tools = {t.name: mcp_plain(t)["inputSchema"] for t in (await session.list_tools()).tools}
        assert set(tools) == TOOLS
        for tool, schema in sorted(tools.items()):
            assert schema["additionalProperties"] is False, tool
            valid = list(schema["properties"])
            for unknown, starts in (("timout", "timout "), ("x" * 10_000, "'xxxxxxxxxx"), ("a\nb", "'a\\nb' ")):
                called = await mcp_call(session, tool, {**_required(schema), unknown: 1})
                said = called["content"][0]["text"]
                assert called["isError"] and said.startswith(starts) and len(said) < 1000, said
                assert said.endswith(f"is not an argument of {tool}; its arguments: {', '.join(valid)}"), said
            for argument, spec in schema["properties"].items():
                kinds = _kinds(spec)
                bad: list[object] = [[1], {"a": 1}]
                if "string" in kinds:
                    bad += [1, True]
                if "boolean" in kinds:
                    bad += ["true", 1, None]
                if kinds & {"integer", "number"}:
                    bad += [NAN, INF, -INF, None, -1, "2", True]
                if "integer" in kinds:
                    bad += [2.5, 2.0, 10_001]
                for value in bad:
                    with anyio.fail_after(120):
                        said = _refusal(await mcp_call(session, tool, {**_required(schema), argument: value}),
                                        tool, argument)
                    assert "\n" not in said and "validation error" not in said, said
                    if kinds & {"integer", "number"} and (value is None or value != value or value in (INF, -INF)):
                        assert "got null (a JSON client sends NaN and infinity as null)" in said, said
                    if argument in ("benchmark_runs", "warmup_runs") and value in (-1, 10_001):
                        same_as_cli[(argument, value)] = said
                    tried.add((tool, argument))
            if "device" in schema["properties"]:
                same_as_cli[("device", "xpu")] = _refusal(
                    await mcp_call(session, tool, {**_required(schema), "device": "xpu"}), tool, "device")
        assert {a for _, a in tried} == {"pipeline_output_dir", "device", "recursive_search", "timeout",
                                         "results_dir", "allow_other_files", "backend", "script_path",
                                         "benchmark_runs", "warmup_runs", "history", "script", "metric", "since"}, tried

    anyio.run(mcp_session, root, body)
    assert not (root / "jaxrun_results").exists() and not (root / "jaxrun_benchmarks").exists()  # nothing ran
    # The values the options' validators refuse are refused in the words of `jaxrun run`.
    for (argument, value), said in same_as_cli.items():
        cli = jaxrun("run", root / "scripts", f"--{argument.replace('_', '-')}", value, cwd=root)
        (line,) = cli.stderr.strip().splitlines()
        assert cli.returncode == 2 and said in (line.removeprefix("jaxrun: error: "),
                                                f"{argument}: {line.removeprefix('jaxrun: error: ')}"), (said, line)


def test_a_non_finite_number_sent_as_json_text_is_refused_as_the_cli_refuses_it(tmp_path: Path) -> None:
    """A client that writes NaN or -Infinity into its JSON (Python's json module does): the
    server reads them as numbers and the options' validators refuse them, as `--timeout nan`;
    Infinity seconds is no limit, as `--timeout inf` is."""
    import json
    import subprocess
    import sys

    from helpers import child_env

    write(tmp_path / "scripts", "a.py", QUICK)
    calls = [("execute.run_jax_scripts", {"pipeline_output_dir": "scripts", "timeout": value}, "timeout")
             for value in ("NaN", "-Infinity")]
    calls += [("execute.benchmark_jax_script", {"script_path": "scripts/a.py", runs: value}, runs)
              for runs in ("benchmark_runs", "warmup_runs") for value in ("NaN", "Infinity", "-Infinity")]
    lines = [json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})]
    for i, (tool, arguments, _) in enumerate(calls, 1):
        text = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                           "params": {"name": tool, "arguments": {k: "@" + str(v) for k, v in arguments.items()}}})
        lines.append(text.replace('"@NaN"', "NaN").replace('"@Infinity"', "Infinity")
                     .replace('"@-Infinity"', "-Infinity").replace('"@', '"'))
    server = subprocess.Popen([sys.executable, "-m", "jaxrun", "mcp", "--root", str(tmp_path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              env=child_env(), cwd=tmp_path)
    replies: dict[int, dict] = {}
    try:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write("\n".join(lines) + "\n")
        server.stdin.flush()
        while len(replies) < len(calls):  # each reply is read before the input ends (EOF stops the server)
            line = server.stdout.readline()
            assert line, replies
            message = json.loads(line)
            if message.get("id"):
                replies[message["id"]] = message
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(timeout=60)
    for i, (tool, _, argument) in enumerate(calls, 1):
        result = replies[i]["result"]
        assert result["isError"], (tool, argument, result)
        said = result["content"][0]["text"]
        assert said.startswith(f"{argument} must be "), said
    assert not (tmp_path / "jaxrun_results").exists() and not (tmp_path / "jaxrun_benchmarks").exists()


def test_history_changes_says_what_the_cli_says(tmp_path: Path) -> None:
    """The tool's changes and series are `jaxrun history --changes --json`'s, for the same history."""
    import json

    import numpy as np
    from helpers import jaxrun as jaxrun_cli
    from helpers import make_run

    from jaxrun.judge.history import HistoryStore

    root = tmp_path / "root"
    root.mkdir()
    rng = np.random.default_rng(2)
    with HistoryStore(root / "h.sqlite") as store:
        for i in range(12):
            level = 1.2 if i >= 6 else 1.0
            store.record(make_run([float(w) for w in rng.normal(level, 0.01, 5)], commit=f"c{i:02d}",
                                  at=f"2026-11-{1 + i:02d}T00:00:00+00:00"))
    cli = json.loads(jaxrun_cli("history", "--changes", "--history", root / "h.sqlite", "--json").stdout)
    seen: dict = {}

    async def body(session: ClientSession) -> None:
        seen["all"] = await mcp_call(session, "history.changes", {"history": "h.sqlite"})
        seen["since"] = await mcp_call(session, "history.changes", {"history": "h.sqlite", "since": "2026-11-08"})
        seen["bad"] = await mcp_call(session, "history.changes", {"history": "h.sqlite", "since": "last week"})
        seen["none"] = await mcp_call(session, "history.changes", {"history": "nowhere.sqlite"})

    anyio.run(mcp_session, root, body)
    reply = seen["all"]["structuredContent"]
    assert not seen["all"]["isError"] and reply["metric"] == cli["metric"] == "run_time"
    assert reply["changes"] == cli["changes"] and reply["series"] == cli["series"]
    (change,) = reply["changes"]
    assert change["first_after"]["git_commit"] == "c06" and change["candidate"] is False
    assert seen["since"]["structuredContent"]["changes"] == [] and seen["since"]["structuredContent"]["since"] == "2026-11-08"
    assert _refusal(seen["bad"], "history.changes", "since").startswith("since 'last week' is not a date or time")
    assert "no such file" in _refusal(seen["none"], "history.changes", "history")
