"""Parameter sweeps' values and points (config/sweeps.py): what --param, a config table and a list
of tables give, in which order, and the one line a bad sweep gets before anything runs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import write

from jaxrun.config.options import BatchOptions
from jaxrun.config.sweeps import MAX_POINTS, parse_sweep, point_changes, points, substitute, typed
from jaxrun.errors import UsageError
from jaxrun.probe.sweep_point import point_env, point_text


def test_the_points_are_the_product_in_the_order_given_with_the_last_parameter_varying_fastest() -> None:
    grids = parse_sweep(["batch=32,64,128", "devices=1,2"])
    assert [point_text(p) for p in points(grids)] == [
        "batch=32,devices=1", "batch=32,devices=2", "batch=64,devices=1", "batch=64,devices=2",
        "batch=128,devices=1", "batch=128,devices=2"]


def test_zip_pairs_the_values_one_by_one_and_refuses_lists_of_other_lengths() -> None:
    grids = parse_sweep(["batch=32,64", "lr=0.1,0.2"])
    assert points(grids, zipped=True) == [{"batch": 32, "lr": 0.1}, {"batch": 64, "lr": 0.2}]
    with pytest.raises(UsageError, match="batch has 2, lr has 3"):
        points(parse_sweep(["batch=32,64", "lr=0.1,0.2,0.3"]), zipped=True)


def test_values_typed_on_the_command_line_keep_their_types_and_tables_keep_theirs() -> None:
    assert [typed(t) for t in ("64", "-3", "1e-3", "0.5", "true", "False", "cpu", "inf")] == \
        [64, -3, 0.001, 0.5, True, False, "cpu", "inf"]
    assert parse_sweep({"batch": [32, 64], "name": "a"}) == ({"batch": (32, 64), "name": ("a",)},)
    # The environment's form (JAXRUN_SWEEP) is --param's words.
    assert parse_sweep("batch=32,64 lr=0.1") == ({"batch": (32, 64), "lr": (0.1,)},)


def test_a_list_of_tables_gives_the_points_of_each_one_after_the_other_each_point_once() -> None:
    grids = parse_sweep([{"batch": [32, 64], "devices": [1]}, {"batch": [64, 4096], "devices": [1, 8]}])
    assert [point_text(p) for p in points(grids)] == [
        "batch=32,devices=1", "batch=64,devices=1", "batch=64,devices=8", "batch=4096,devices=1",
        "batch=4096,devices=8"]


@pytest.mark.parametrize("given, message", [
    (["batch"], "a parameter is NAME=V1,V2"),
    (["batch="], "parameter batch has no values"),
    (["batch=1,2", "batch=3"], "parameter batch is given twice"),
    (["batch=1,1"], "parameter batch lists 1 twice"),
    (["2x=1"], "parameter name '2x'"),
    (["devices=0,2"], "parameter devices: a device count is a whole number >= 1, got 0"),
    (["devices=two"], "a device count is a whole number"),
    (["device=xpu"], "xpu"),
    (["x64=maybe"], "parameter x64: true or false"),
    (["matmul_precision=fastest"], "fastest"),
    ([{"batch": [[1, 2]]}], "values are numbers, true/false or text"),
    (3, "sweep must be NAME=V1,V2 texts"),
])
def test_a_bad_sweep_names_the_culprit(given: object, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace("[", r"\[")):
        parse_sweep(given)


def test_a_sweep_of_more_than_the_bound_of_points_is_refused_before_anything_runs() -> None:
    side = int(MAX_POINTS ** 0.5) + 1
    with pytest.raises(UsageError, match="points"):
        BatchOptions.build("cli", paths=["x"], sweep=(f"a={','.join(map(str, range(side)))}",
                                                       f"b={','.join(map(str, range(side)))}"))


def test_a_point_sets_what_jaxrun_applies_and_fills_the_arguments_and_variables() -> None:
    point = {"batch": 64, "devices": 2, "x64": True, "matmul_precision": "highest", "xla_flags": "--xla_x=1",
             "python": sys.executable}
    changes = point_changes(point, ("--bs", "{batch}", '{"json": 1}', "{unknown}"), {"BS": "b{batch}"})
    assert changes["host_devices"] == 2 and changes["x64"] is True and changes["matmul_precision"] == "highest"
    assert changes["xla_flags"] == "--xla_x=1" and changes["python"] == sys.executable
    assert changes["args"] == ("--bs", "64", '{"json": 1}', "{unknown}")  # JSON and other names left as written
    assert changes["env"] == {"BS": "b64"}
    assert changes["params"] == point and changes["sweep"] is None
    assert substitute("{x64}", point) == "true"
    env = point_env({"batch": 64, "lr": 0.001, "x64": False})
    assert env["JAXRUN_PARAMS"] == '{"batch":64,"lr":0.001,"x64":false}'
    assert (env["JAXRUN_PARAM_BATCH"], env["JAXRUN_PARAM_LR"], env["JAXRUN_PARAM_X64"]) == ("64", "0.001", "false")


def test_a_bad_param_on_the_command_line_is_one_line_and_exit_2_before_any_file_is_written(
        tmp_path: Path, jaxrun_cli) -> None:  # type: ignore[no-untyped-def]
    write(tmp_path, "s.py", "import jax\n")
    for args, says in ((["--param", "batch"], "a parameter is NAME=V1,V2"),
                       (["--param", "a=1,2", "--param", "b=1", "--zip"], "a has 2, b has 1"),
                       (["--param", "devices=2", "--host-devices", "2"], "keep one")):
        result = jaxrun_cli.run("run", "s.py", "--results-dir", "out", "--no-history", *args, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and says in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
        assert not (tmp_path / "out").exists()
