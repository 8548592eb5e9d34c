"""``jaxrun ab`` and ``jaxrun bisect``: interleaved A/B comparisons (jaxrun/ab) on the terminal."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import click

from jaxrun.errors import JAXExecutionError
from jaxrun.interfaces.cli.console import EXIT_FAILED, EXIT_OK, err, fail_usage, out
from jaxrun.interfaces.cli.flags import (
    OptionsCommand,
    ab_models,
    judged_by,
    paired_models,
)

_PAIRS = 20  # ab.session.DEFAULT_PAIRS, not imported here: `jaxrun --help` stays fast
_DUET_HELP = ("Both runs of each pair at the same time, each pinned to its own half of the CPUs (its own GPU on a GPU: "
              "2 needed), the halves swapped every pair: a change of load hits both at once; each run has half the "
              "machine, only the ratios are meant. The default where the machine splits fairly (given, it is refused where the machine cannot be split fairly).")
_ALTERNATE_HELP = ("The runs of each pair one after the other, each with the whole machine, the order swapped every "
                   "pair. The default where the machine cannot be split fairly.")


def _pairing_flags(command: Any) -> Any:
    """--duet and --alternate, of `jaxrun ab` and `jaxrun bisect`: two flags, so that both given
    is a mistake said (:func:`_pairing`), not the last one silently winning."""
    command = click.option("--alternate", is_flag=True, help=_ALTERNATE_HELP)(command)
    return click.option("--duet", is_flag=True, help=_DUET_HELP)(command)


def _pairing(duet: bool, alternate: bool) -> Optional[bool]:
    """ABOptions.duet: True (--duet), False (--alternate), None (a duet where the machine splits)."""
    if duet and alternate:
        raise fail_usage("--duet and --alternate exclude each other: a pair's runs are at the same time (--duet) "
                         "or one after the other (--alternate); pass one, or neither for a duet where the machine "
                         "splits fairly")
    return True if duet else False if alternate else None


def _progress(quiet: bool):  # type: ignore[no-untyped-def]
    def on_run(key: str, side: Any, pair: int, warmup: bool, result: Any) -> None:
        if quiet:
            return
        which = "warm-up" if warmup else f"pair {pair + 1}"
        figure = f"{result.execution_time:.3f} s" if result.success and result.execution_time is not None else (
            f"failed ({result.error_class})")
        err.print(f"[ab] {key} {which} {side.label}: {figure}", markup=False, soft_wrap=True)

    return on_run


def _run_options(device: Optional[str], timeout: Optional[str], config: bool = True) -> dict[str, Any]:
    """What every run of the comparison is given, each value checked before the first run."""
    from jaxrun.config.options import RunOptions

    options: dict[str, Any] = {} if config else {"config": False}
    if device is not None:
        options["device"] = device
    if timeout is not None:
        options["timeout"] = timeout  # text: seconds, or none
    for name, value in options.items():
        if name != "config":
            RunOptions.check_value(name, value)
    return options


def program_phase_line(script: str, p: Any) -> str:
    """``a.py: jit(step) compile 0.800 s -> 1.620 s (x2.03), trace 0.010 -> 0.011 s, lower ..., count 1 -> 1: same program``"""
    ratio = f" (x{p.compile_ratio:.2f})" if p.compile_ratio is not None else ""
    parts = [f"compile {p.base_compile_time:.3f} s -> {p.new_compile_time:.3f} s{ratio}"]
    for name, before, after in (("trace", p.base_trace_time, p.new_trace_time),
                                ("lower", p.base_lower_time, p.new_lower_time)):
        if before is not None and after is not None:
            parts.append(f"{name} {before:.3f} -> {after:.3f} s")
    parts.append(f"count {p.base_count} -> {p.new_count}")
    if p.base_cache_loads or p.new_cache_loads:  # loaded, not compiled: not in the compile time
        parts.append(f"loaded from the persistent cache {p.base_cache_loads} -> {p.new_cache_loads}")
    said = p.change or f"unknown whether it is the same program ({p.reason})"
    return f"{script}: {p.program} {', '.join(parts)}: {said}"


@click.command(cls=OptionsCommand, models=ab_models, helps=judged_by("paired", exports=True))
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path), required=False)
@click.option("--base-rev", metavar="REV", help="BASE is the folder at this git revision (a temporary worktree).")
@click.option("--new-rev", metavar="REV", help="NEW is the folder at this git revision (default: HEAD).")
@click.option("--base-python", metavar="PATH", help="BASE runs under this Python interpreter (another environment).")
@click.option("--new-python", metavar="PATH", help="NEW runs under this Python interpreter.")
@click.option("--pairs", type=click.IntRange(min=1), default=_PAIRS, show_default=True,
              help="Counted pairs per script, each BASE and NEW once (at the same time in a duet; one after the "
              "other, in alternating order, with --alternate).")
@click.option("--warmup-pairs", type=click.IntRange(min=0), default=1, show_default=True, help="Uncounted pairs first.")
@click.option("--time-budget", type=click.FloatRange(min=0), metavar="SECONDS",
              help="Stop a script's pairs once this is spent (after the least pairs a test needs).")
@click.option("--precision", type=click.FloatRange(min=0, min_open=True), metavar="FRACTION",
              help="Stop a script's pairs once every gate ratio's 95% CI is within +-FRACTION (0.02: 2%).")
@click.option("--results-dir", type=click.Path(path_type=Path), default=Path("jaxrun_ab"), show_default=True,
              help="Where each side's runs and ab_comparison.json go.")
@click.option("--device", "-d", metavar="DEVICE", help="Device of every run (auto, cpu, gpu, tpu).")
@click.option("--recursive/--no-recursive", default=True, help="Search the folders' subfolders.")
@click.option("--no-config", is_flag=True, help="Read no config file ([tool.jaxrun], jaxrun.toml) for the runs.")
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 when a script is significantly slower.")
@click.option("--same-setup", is_flag=True,
              help="Give every run the same environment: without it each run's is padded by a random size (0-4 KiB, "
              "recorded in its result), so that a memory-layout bias of one setup is averaged out over the pairs.")
@_pairing_flags
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON (progress stays on stderr).")
@click.option("--quiet", "-q", is_flag=True, help="No progress lines.")
def ab(base: Path, new: Optional[Path], base_rev: Optional[str], new_rev: Optional[str], base_python: Optional[str],
       new_python: Optional[str], pairs: int, warmup_pairs: int, time_budget: Optional[float],
       precision: Optional[float], results_dir: Path, device: Optional[str], timeout: Optional[str],
       recursive: bool, no_config: bool, fail_on_regression: bool, same_setup: bool, duet: bool, alternate: bool,
       as_json: bool, quiet: bool, markdown: Optional[Path] = None, export_json: Optional[Path] = None,
       export_csv: Optional[Path] = None, **verdict: Any) -> None:
    """Run each script of BASE and NEW in pairs, both runs of a pair at once on two halves of the
    machine (a duet; alternating pairs, BASE NEW then NEW BASE, where it cannot be split fairly or
    with --alternate) and judge NEW on the per-pair ratios: drift of the machine's load hits both
    runs of a pair alike, so it cannot pass for a change. Per phase: the paired ratio with its 95% CI, the Wilcoxon signed-rank
    p-value and a verdict gated like `jaxrun compare`'s; per program: trace, lower and compile time
    on both sides. Every run compiles (no persistent cache).

    BASE and NEW: two folders; or one folder (or script) with --base-rev/--new-rev (two revisions
    of its git repository) or --base-python/--new-python (two Python environments)."""
    from jaxrun.interfaces.ab import ABOptions, run_ab
    from jaxrun.interfaces.cli.analysis import (
        _export_comparison,
        check_exports,
        print_comparison,
        verdict_options,
    )
    from jaxrun.judge.compare import exit_reasons, program_sections

    pairing = _pairing(duet, alternate)
    try:
        check_exports(export_json, export_csv, markdown)
        options = ABOptions(pairs, warmup_pairs, time_budget, precision, verdict_options(), recursive,
                            _run_options(device, timeout, not no_config), fail_on_regression=fail_on_regression,
                            randomize_setup=not same_setup, duet=pairing)
        report = run_ab(base, new, results_dir, options, base_rev=base_rev, new_rev=new_rev, base_python=base_python,
                        new_python=new_python, on_run=_progress(quiet))
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None
    _export_comparison(report, results_dir / "base", results_dir / "new", export_json, export_csv, markdown)
    if as_json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    else:
        for label, side in report.sides.items():
            versions = f", jax {side.jax_version}" if side.jax_version else ""
            out.print(f"{label}: {side.given}{f' (commit {side.commit[:12]})' if side.commit else ''}{versions}",
                      markup=False, soft_wrap=True)
        if report.duet:
            halves = " and ".join(",".join(map(str, h.cpus)) + (f" (GPU {','.join(map(str, h.gpus))})" if h.gpus else "")
                                  for h in report.duet)
            out.print(f"duet: BASE and NEW at the same time on CPUs {halves}, swapped every pair (times are a half "
                      "machine's: only the ratios are meant)", markup=False, soft_wrap=True)
        elif report.alternating_reason:
            out.print(f"alternating pairs: {report.alternating_reason}", markup=False, soft_wrap=True)
        print_comparison(report, program_sections(report, program_phase_line), options.verdict.allow_mismatch)
        out.print(f"comparison: {results_dir / 'ab_comparison.json'}; each side's runs in {results_dir / 'base'} and "
                  f"{results_dir / 'new'} (jaxrun report {results_dir})", markup=False, soft_wrap=True)
    raise click.exceptions.Exit(EXIT_FAILED if exit_reasons(report) else EXIT_OK)


@click.command(cls=OptionsCommand, models=paired_models, helps=judged_by("paired"))
@click.argument("script", type=click.Path(path_type=Path))
@click.option("--good", required=True, metavar="REV", help="A revision where the script was fast.")
@click.option("--bad", required=True, metavar="REV", help="A later revision where it is slower.")
@click.option("--pairs", type=click.IntRange(min=1), default=8, show_default=True, help="Counted pairs per step.")
@click.option("--warmup-pairs", type=click.IntRange(min=0), default=1, show_default=True, help="Uncounted pairs first.")
@click.option("--results-dir", type=click.Path(path_type=Path), default=Path("jaxrun_bisect"), show_default=True,
              help="Where each step's runs go.")
@click.option("--device", "-d", metavar="DEVICE", help="Device of every run (auto, cpu, gpu, tpu).")
@_pairing_flags
@click.option("--quiet", "-q", is_flag=True, help="No progress lines.")
def bisect(script: Path, good: str, bad: str, pairs: int, warmup_pairs: int, results_dir: Path, device: Optional[str],
           duet: bool, alternate: bool, quiet: bool, timeout: Optional[str] = None, **verdict: Any) -> None:
    """Find the first revision at which SCRIPT got slower, as git bisect would: each step runs the
    script at a revision against GOOD in pairs (a duet where the machine splits fairly, as jaxrun ab
    does) and judges it (--metric, run and compile time by default). Exit 0 when a commit is named,
    1 when BAD is not slower than GOOD."""
    from jaxrun.interfaces.ab import ABOptions
    from jaxrun.interfaces.ab.bisect import bisect as run_bisect
    from jaxrun.interfaces.cli.analysis import verdict_options

    def on_step(step: Any) -> None:
        ratio = f" x{step.ratio:.3f}" if step.ratio is not None else ""
        out.print(f"{step.commit[:12]} {step.subject}: {step.verdict}{ratio}", markup=False, soft_wrap=True)

    pairing = _pairing(duet, alternate)
    try:
        options = ABOptions(pairs, warmup_pairs, verdict=verdict_options(), run_options=_run_options(device, timeout),
                            duet=pairing)
        found = run_bisect(script, good, bad, results_dir, options, on_step=on_step, on_run=_progress(quiet))
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None
    if found.first_slower is None:
        out.print(found.reason or "nothing named", markup=False, soft_wrap=True)
        raise click.exceptions.Exit(EXIT_FAILED)
    out.print(f"first slower revision: {found.first_slower} {found.subject}", markup=False, soft_wrap=True)
    raise click.exceptions.Exit(EXIT_OK)
