"""Each option is declared once (its field in jaxrun/config/options.py); the CLI's flags, the API's
signatures, the MCP tools' schemas and the verdict flags of compare/history are made from it. These
tests read what each surface's reader sees: click's parsed command line and help, inspect's
signature, the MCP server's tool list."""

from __future__ import annotations

import asyncio
import inspect
import sys
from pathlib import Path
from typing import Optional

import click
import pytest
from click.testing import CliRunner
from helpers import write

import jaxrun
import jaxrun.batch.pipeline
from jaxrun.config.option_spec import flag_of, shown_default
from jaxrun.config.options import BatchOptions, RunOptions, VerdictOptions
from jaxrun.interfaces.cli import app

FLAGGED = [(model, name) for model in (BatchOptions, RunOptions) for name, field in model.fields.items()
           if flag_of(field) is not None and not (model is RunOptions and name == "device")]
# A value for each kind of option, as a user types it, and what the option then holds.
SAMPLES = {
    "include": (["--include", "a*.py"], ("a*.py",)), "exclude": (["--exclude", "b*.py"], ("b*.py",)),
    "device": (["--device", "cpu"], ("cpu",)), "backend": (["--backend", "local"], "local"),
    "ray_address": (["--backend", "ray", "--ray-address", "auto"], "auto"),
    "env": (["--env", "A=1", "--env", "B=x y"], {"A": "1", "B": "x y"}),
    "entry": (["--warm"], "main"), "fallback": (["--no-fallback"], False), "recursive": (["--no-recursive"], False),
    "memory_limit": (["--memory-limit", "1GB"], 10**9), "compile_cache_max_size": (["--compile-cache-max-size", "2GiB"], 2**31),
    "matmul_precision": (["--matmul-precision", "highest"], "highest"), "xla_flags": (["--xla-flags", "--xla_x=1"], "--xla_x=1"),
    "timeout": (["--timeout", "12.5"], 12.5), "enable_profiling": (["--profile"], True), "verbose": (["-v"], True),
    "jobs": (["-j", "2"], 2), "xla_analysis": (["--no-xla-analysis"], False),
    "python": (["--python", sys.executable], sys.executable),
    "processes": (["--processes", "2"], 2), "prestart": (["--prestart", "jax"], "jax"),
    **{f"slurm_{name}": (["--backend", "slurm", f"--slurm-{name}", "x"], "x") for name in ("partition", "account", "qos", "constraint")},
    "slurm_cpus_per_task": (["--backend", "slurm", "--slurm-cpus-per-task", "3"], 3),
    "slurm_options": (["--backend", "slurm", "--slurm-option", "--mail-type=END", "--slurm-option", "exclusive"],
                      ("mail-type=END", "exclusive")),
    "slurm_setup": (["--backend", "slurm", "--slurm-setup", "module load cuda"], ("module load cuda",)),
    "slurm_timeout": (["--backend", "slurm", "--slurm-timeout", "5"], 5.0),
    "nodes": (["--backend", "slurm", "--nodes", "2", "--processes", "4"], 2),
    "sweep": (["--param", "batch=32,64", "--param", "lr=1e-3,0.01", "--param", "x64=true,false"],
              ({"batch": (32, 64), "lr": (0.001, 0.01), "x64": (True, False)},)),
    "sweep_zip": (["--param", "a=1,2", "--param", "b=x,y", "--zip"], True),
}


def cli_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> BatchOptions:
    """The BatchOptions `jaxrun run` builds from ``args`` (the batch itself is not run)."""
    seen: list[BatchOptions] = []

    def capture(options: BatchOptions, **_: object):  # type: ignore[no-untyped-def]
        seen.append(options)
        raise KeyboardInterrupt

    monkeypatch.setattr(jaxrun.batch.pipeline, "run_batch", capture)
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "s", "a.py", "import jax\n")
    result = CliRunner().invoke(app, ["run", "s", "--no-config", *args])
    assert result.exit_code == 130, result.output
    return seen[0]


def value_of(options: BatchOptions, name: str):  # type: ignore[no-untyped-def]
    return getattr(options, name) if name in BatchOptions.fields else getattr(options.run, name)


def test_every_field_is_declared_with_its_help() -> None:
    for model in (BatchOptions, RunOptions, VerdictOptions):
        for name, field in model.fields.items():
            if name != "run":
                assert field.description, f"{model.__name__}.{name} has no help"


@pytest.mark.parametrize("model, name", FLAGGED, ids=[n for _, n in FLAGGED])
def test_each_flag_sets_its_option_and_says_it_came_from_the_command_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model, name: str) -> None:  # type: ignore[no-untyped-def]
    field = model.fields[name]
    flag = flag_of(field)
    spelled = (flag.names or ("--" + name.replace("_", "-"),))[0]
    if name in SAMPLES:
        args, expected = SAMPLES[name]
    elif field.annotation is bool:
        args, expected = [spelled], True
    elif "Path" in str(field.annotation):
        args, expected = [spelled, str(tmp_path / "x")], tmp_path / "x"
    else:
        args, expected = [spelled, "3"], 3
    options = cli_options(tmp_path, monkeypatch, *args, *(["--benchmark-runs", "1"] if name == "warmup_runs" else []))
    got = value_of(options, name)
    assert (got.resolve() if isinstance(got, Path) else got) == expected, (name, got)
    assert options.source_of(name) == "cli"
    assert options.origin_of(name) in (*args, spelled, "--no-" + spelled[2:]), options.origin_of(name)


def test_a_flag_left_out_leaves_the_config_file_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "jaxrun.toml").write_text("timeout = 42\nfallback = false\nhistory = false\n")
    seen: list[BatchOptions] = []
    monkeypatch.setattr(jaxrun.batch.pipeline, "run_batch", lambda options, **_: (seen.append(options), (_ for _ in ()).throw(KeyboardInterrupt))[1])
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "s", "a.py", "import jax\n")
    assert CliRunner().invoke(app, ["run", "s", "--jobs", "1"]).exit_code == 130
    (options,) = seen
    assert options.run.timeout == 42 and options.source_of("timeout") == "config"
    assert options.run.fallback is False and options.history is None and options.source_of("history") == "config"
    assert options.source_of("jobs") == "cli"


def test_off_switches_win_over_the_flag_they_undo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    options = cli_options(tmp_path, monkeypatch, "--history", str(tmp_path / "h.sqlite"), "--no-history",
                          "--no-compile-cache")
    assert options.history is None and options.origin_of("history") == "--no-history"
    assert options.run.compile_cache is None and options.origin_of("compile_cache") == "--no-compile-cache"


def test_help_shows_every_flag_with_its_help_and_default() -> None:
    text = CliRunner().invoke(app, ["run", "--help"], terminal_width=200).output
    flat = " ".join(text.split())
    for model, name in FLAGGED:
        field = model.fields[name]
        flag = flag_of(field)
        spelled = (flag.names or ("--" + name.replace("_", "-"),))[0]
        assert spelled in text, name
        assert " ".join((flag.help or field.description).split()) in flat, name
        default = shown_default(field)
        if default is not None and field.annotation is not bool:
            assert f"[default: {default}]" in flat, (name, default)


def test_the_api_signatures_list_every_option_with_its_default() -> None:
    one = inspect.signature(jaxrun.execute_jax_script).parameters
    batch = inspect.signature(jaxrun.run_jax_scripts).parameters
    for name, field in RunOptions.fields.items():
        assert one[name].default == field.default, name
        assert batch[name].default == (field.default if name != "device" else BatchOptions.fields["device"].default)
    for name, field in BatchOptions.fields.items():
        if name not in ("paths", "run", "rules", "config_file", "recursive"):
            assert batch[name].default == field.default, name
    assert list(one)[:2] == ["script_path", "device"] and list(batch)[:2] == ["pipeline_output_dir", "recursive_search"]


@pytest.mark.slow
def test_an_api_keyword_left_out_takes_the_config_file_value(tmp_path: Path) -> None:
    (tmp_path / "jaxrun.toml").write_text('args = ["from-config"]\n')
    script = write(tmp_path, "s.py", "import sys\nimport jaxrun\njaxrun.record(argv=sys.argv[1:])\n")
    result = jaxrun.execute_jax_script(script, "cpu", results_dir=tmp_path / "r", compile_cache=False)
    assert result.success and result.results["argv"] == ["from-config"]
    given = jaxrun.execute_jax_script(script, "cpu", results_dir=tmp_path / "r", compile_cache=False, args=["mine"])
    assert given.results["argv"] == ["mine"]
    with pytest.raises(jaxrun.UsageError, match="unknown option 'timout'"):
        jaxrun.execute_jax_script(script, "cpu", timout=3)


@pytest.mark.slow
def test_the_mcp_tools_schemas_come_from_the_options() -> None:
    pytest.importorskip("mcp")
    from jaxrun.interfaces.mcp_server import build_server

    tools = {t.name: t for t in asyncio.run(build_server([]).list_tools())}

    def schema(tool):  # type: ignore[no-untyped-def]
        return getattr(tool, "input_schema", None) or tool.inputSchema

    run = schema(tools["execute.run_jax_scripts"])["properties"]
    assert run["timeout"]["default"] == RunOptions.fields["timeout"].default
    assert run["timeout"]["description"] == RunOptions.fields["timeout"].description
    assert run["recursive_search"]["description"] == BatchOptions.fields["recursive"].description
    bench = schema(tools["execute.benchmark_jax_script"])["properties"]
    assert bench["warmup_runs"]["description"] == RunOptions.fields["warmup_runs"].description


def test_compare_flags_come_from_the_verdict_options() -> None:
    text = " ".join(CliRunner().invoke(app, ["compare", "--help"], terminal_width=200).output.split())
    own = app.get_command(None, "compare").helps()  # what depends on how compare judges: the test --alpha names
    for name, field in VerdictOptions.fields.items():
        help_text = own.get(name, field.description)
        assert "--" + name.replace("_", "-") in text and " ".join(help_text.split()) in text, name
    bad = CliRunner().invoke(app, ["compare", ".", ".", "--min-effect", "50"])
    assert bad.exit_code == 2 and "ambiguous" in bad.output


def test_an_option_declared_twice_is_refused_when_its_set_is_made() -> None:
    """Twice in one set (Python's class body would keep the last silently), or again in a set
    that inherits it: a TypeError naming the option, at import."""
    from jaxrun.config.option_spec import OptionSet, option

    with pytest.raises(TypeError, match="'retries' is declared twice in one option set"):
        class Twice(OptionSet):
            retries: int = option(0, "Attempts after the first.")
            retries: int = option(1, "Attempts after the first, again.")  # noqa: F811

    class Base(OptionSet):
        retries: int = option(0, "Attempts after the first.")

    with pytest.raises(TypeError, match="'retries' of Again is declared already by a set it inherits"):
        class Again(Base):
            retries: int = option(1, "Attempts after the first, again.")

    class Other(Base):  # a set that adds its own options inherits the others untouched
        label: str = option("x", "A label.")

    assert list(Other.fields) == ["retries", "label"] and Other().retries == 0


def test_an_inherited_option_is_placed_among_a_sets_own_and_a_bound_is_checked_and_shown() -> None:
    """``name = inherited()`` places an option declared by a set it inherits (the order of the
    flags), without declaring it again; ``at_least`` / ``above`` bound a number: checked with the
    value, in one line naming its flag, and shown by the flag's help as click shows a range."""
    from jaxrun.config.option_spec import Flag, OptionSet, inherited, option
    from jaxrun.errors import UsageError
    from jaxrun.interfaces.cli.flags import option_params

    class Base(OptionSet):
        warmup: int = option(1, "Uncounted first.", at_least=0)
        quick: bool = option(False, "Quick.")

    class Own(Base):
        pairs: int = option(8, "Counted.", at_least=1)
        warmup = inherited()
        share: Optional[float] = option(None, "A share.", Flag(metavar="FRACTION"), above=0)

    assert list(Own.fields) == ["quick", "pairs", "warmup", "share"] and Own().warmup == 1
    with pytest.raises(TypeError, match="places 'other' with inherited"):
        class Wrong(Base):
            other = inherited()
    for values, said in (({"pairs": 0}, "invalid value for '--pairs': 0 is not in the range x>=1"),
                         ({"share": 0}, "invalid value for '--share': 0.0 is not in the range x>0"),
                         ({"warmup": -1}, "invalid value for '--warmup': -1 is not in the range x>=0")):
        with pytest.raises(UsageError) as raised:
            Own(**values)
        assert str(raised.value) == said
    command = click.Command("c", params=option_params((Own,)))
    text = " ".join(command.get_help(click.Context(command, terminal_width=200)).split())
    assert "--pairs INTEGER RANGE Counted. [default: 8; x>=1]" in text and "--share FRACTION A share. [x>0]" in text
    assert click.Context(command).command.params[1].type.convert("0", None, None) == 0  # the declaration checks it


def test_a_switch_and_its_off_switch_may_exclude_each_other() -> None:
    """`Flag(sets=True, off="--alternate", exclusive=why)`: both given is one line, not the last winning."""
    from click.testing import CliRunner as Runner

    from jaxrun.config.option_spec import Flag, OptionSet, option
    from jaxrun.interfaces.cli.flags import given_options, option_params

    class Pairing(OptionSet):
        duet: Optional[bool] = option(None, "At once.", Flag(sets=True, off="--alternate", exclusive="pass one"))

    @click.command(params=option_params((Pairing,)))
    def command(**_: object) -> None:
        print(given_options(click.get_current_context(), (Pairing,))[0])

    assert Runner().invoke(command, ["--duet"]).output.strip() == "{'duet': True}"
    assert Runner().invoke(command, ["--alternate"]).output.strip() == "{'duet': False}"
    assert Runner().invoke(command, []).output.strip() == "{}"
    both = Runner().invoke(command, ["--alternate", "--duet"])
    assert str(both.exception) == "--duet and --alternate exclude each other: pass one"
