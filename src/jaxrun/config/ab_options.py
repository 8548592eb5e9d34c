"""The options of an A/B comparison (``jaxrun ab``) and of a bisection (``jaxrun bisect``),
declared once as every option is (config/option_spec.py): their flags, their help, the keywords of
:class:`ABOptions` and :class:`BisectOptions` in Python and the reference page are made from these
declarations, and each value is checked here, once, whatever gave it.

What both share is declared in :class:`PairedOptions`: how the pairs run (warm-up pairs, the
device, a duet or alternating pairs) and are judged (``verdict``), and the options of every run
(``run_options``: RunOptions' keywords, ``--timeout`` among them). Where each set shows an
inherited option among its own is said with ``inherited()``: the order of its flags.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Mapping, Optional

from jaxrun.config.option_spec import Flag, OptionSet, checks, inherited, option, part
from jaxrun.config.options import RunOptions, VerdictOptions
from jaxrun.core.validate import validate_device
from jaxrun.errors import UsageError

__all__ = ["ABOptions", "BisectOptions", "ConfirmOptions", "PairedOptions", "DEFAULT_PAIRS", "DEFAULT_BISECT_PAIRS",
           "DEFAULT_CONFIRM_PAIRS"]

DEFAULT_PAIRS = 20  # counted pairs per script of `jaxrun ab`
DEFAULT_BISECT_PAIRS = 8  # per step of `jaxrun bisect`
DEFAULT_CONFIRM_PAIRS = 30  # at most, per change point of `jaxrun history --changes --confirm`

DUET_HELP = ("Both runs of each pair at the same time, each pinned to its own half of the CPUs (its own GPU on a GPU: "
             "2 needed), the halves swapped every pair: a change of load hits both at once; each run has half the "
             "machine, only the ratios are meant. The default where the machine splits fairly (given, it is refused "
             "where the machine cannot be split fairly).")
ALTERNATE_HELP = ("The runs of each pair one after the other, each with the whole machine, the order swapped every "
                  "pair. The default where the machine cannot be split fairly.")


class PairedOptions(OptionSet):
    """How the pairs of a comparison run and are judged: what `jaxrun ab` and `jaxrun bisect` share."""

    warmup_pairs: int = option(1, "Uncounted pairs first.", at_least=0)
    device: Optional[str] = option(None, "Device of every run (auto, cpu, gpu, tpu).",
                                   Flag(names=("--device", "-d"), metavar="DEVICE"))
    # BASE and NEW of a pair at the same time, each pinned to its half of the cores (its own GPU on
    # a GPU), the halves swapped every pair: a change of load lands on both runs of a pair at once
    # (benchmarks/README.md: it found a 10% slowdown more often than alternation, in less time).
    # None: a duet where the machine splits fairly, alternating pairs (and why) elsewhere; True:
    # a duet or one line saying why not; False: alternating pairs.
    duet: Optional[bool] = option(
        None, DUET_HELP, Flag(sets=True, off="--alternate", off_help=ALTERNATE_HELP,
                              exclusive="a pair's runs are at the same time (--duet) or one after the other "
                              "(--alternate); pass one, or neither for a duet where the machine splits fairly"))
    verdict: VerdictOptions = part(VerdictOptions, "How NEW is judged against BASE (--metric, --alpha, ...).")
    run_options: dict[str, Any] = part(dict, "Options of every run, as RunOptions' keywords (--timeout: timeout); "
                                       "the config file and JAXRUN_* give the others, as to jaxrun run's.")

    # Declared by ABOptions only: each step of a bisection runs as these say.
    time_budget: ClassVar[Optional[float]] = None
    precision: ClassVar[Optional[float]] = None
    recursive: ClassVar[bool] = True
    config: ClassVar[bool] = True
    fail_on_regression: ClassVar[bool] = False
    randomize_setup: ClassVar[bool] = True

    @checks("device")
    def _device(value: Any, name: str) -> Optional[str]:
        return None if value is None else validate_device(value)

    @checks("verdict")
    def _verdict(value: Any, name: str) -> VerdictOptions:
        if not isinstance(value, VerdictOptions):
            raise UsageError(f"verdict must be VerdictOptions(...), got {value!r}")
        return value

    @checks("run_options")
    def _run_options(value: Any, name: str) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise UsageError(f"run_options must be a mapping of RunOptions' keywords, got {value!r}")
        for key, each in value.items():
            RunOptions.check_value(key, each)  # one line naming it, before the first run
        return dict(value)

    def _consistent(self) -> None:
        if self.device is not None and "device" in self.run_options:
            raise UsageError("device is given twice, as device and in run_options: give one")

    @property
    def run_keywords(self) -> dict[str, Any]:
        """What every run is given (RunOptions' keywords), before the config file and its script's settings."""
        return {**self.run_options, **({"device": self.device} if self.device is not None else {})}

    @classmethod
    def gathered(cls, values: Mapping[str, Any], verdict: VerdictOptions) -> Any:
        """The options of one command line: ``values`` by option name, a run option among them
        (``timeout``) gathered into ``run_options``."""
        own = {k: v for k, v in values.items() if k in cls.fields}
        runs = {k: v for k, v in values.items() if k not in cls.fields}
        return cls(**own, verdict=verdict, run_options=runs)


class ABOptions(PairedOptions):
    """How ``jaxrun ab`` pairs BASE and NEW, runs them and judges them; checked once, when made."""

    base_rev: Optional[str] = option(None, "BASE is the folder at this git revision (a temporary worktree).",
                                     Flag(metavar="REV"))
    new_rev: Optional[str] = option(None, "NEW is the folder at this git revision (default: HEAD).", Flag(metavar="REV"))
    base_python: Optional[str] = option(None, "BASE runs under this Python interpreter (another environment).",
                                        Flag(metavar="PATH"))
    new_python: Optional[str] = option(None, "NEW runs under this Python interpreter.", Flag(metavar="PATH"))
    pairs: int = option(DEFAULT_PAIRS, "Counted pairs per script, each BASE and NEW once (at the same time in a duet; "
                        "one after the other, in alternating order, with --alternate).", at_least=1)
    warmup_pairs = inherited()
    time_budget: Optional[float] = option(None, "Stop a script's pairs once this is spent (after the least pairs a "
                                          "test needs).", Flag(metavar="SECONDS"), at_least=0)
    precision: Optional[float] = option(None, "Stop a script's pairs once every gate ratio's 95% CI is within "
                                        "+-FRACTION (0.02: 2%).", Flag(metavar="FRACTION"), above=0)
    results_dir: Path = option(Path("jaxrun_ab"), "Where each side's runs and ab_comparison.json go.")
    device = inherited()
    recursive: bool = option(True, "Search the folders' subfolders.", show_default="")
    config: bool = option(True, "Read the config file ([tool.jaxrun], jaxrun.toml) for the runs.",
                          Flag(names=("--no-config",), sets=False,
                               help="Read no config file ([tool.jaxrun], jaxrun.toml) for the runs."))
    # Exit 1 on a regression: the report of its folder says so (compare.exit_reasons).
    fail_on_regression: bool = option(False, "Exit 1 when a script is significantly slower.")
    # Each run's environment padded by a random size (RunOptions.randomize_setup): a memory-layout
    # bias of one setup is averaged out over the pairs instead of favouring one side throughout.
    randomize_setup: bool = option(
        True, "Pad each run's environment by a random size (0-4 KiB, recorded in its result), so that a "
        "memory-layout bias of one setup is averaged out over the pairs.",
        Flag(names=("--same-setup",), sets=False,
             help="Give every run the same environment: without it each run's is padded by a random size (0-4 KiB, "
             "recorded in its result), so that a memory-layout bias of one setup is averaged out over the pairs."))
    duet = inherited()

    @checks("base_python", "new_python")
    def _python(value: Any, name: str) -> Optional[str]:
        """The interpreter, checked as ``--python`` is (interpreters.validate_python), named by its flag."""
        from jaxrun.core.interpreters import validate_python

        try:
            return validate_python(value)
        except UsageError as error:
            raise UsageError(f"--{name.replace('_', '-')}: {str(error).removeprefix('python: ')}") from None


class BisectOptions(PairedOptions):
    """How ``jaxrun bisect`` searches: the two revisions, and each step's pairs; checked once, when made."""

    good: str = option(..., "A revision where the script was fast.", Flag(metavar="REV"))
    bad: str = option(..., "A later revision where it is slower.", Flag(metavar="REV"))
    pairs: int = option(DEFAULT_BISECT_PAIRS, "Counted pairs per step.", at_least=1)
    warmup_pairs = inherited()
    results_dir: Path = option(Path("jaxrun_bisect"), "Where each step's runs go.")
    device = inherited()
    duet = inherited()


class ConfirmOptions(PairedOptions):
    """How ``jaxrun history --changes --confirm`` re-runs each change point: the script at the
    commit before it against the commit after, in pairs, stopped once the ratio is known well
    enough to tell the change from none; checked once, when made."""

    confirm: bool = option(False, "With --changes: re-run each change point as pairs of the commit before it against "
                           "the commit after (a duet where the machine splits fairly), and label it confirmed or "
                           "refuted; the label is kept in the history, and a refuted change never alarms again.")
    pairs: int = option(DEFAULT_CONFIRM_PAIRS, "With --confirm: the most counted pairs per change point; fewer once "
                        "the ratio's 95% CI is within half the change's size.", Flag(names=("--confirm-pairs",)),
                        at_least=1)
    bisect: bool = option(False, "With --confirm: narrow each confirmed slowdown whose two commits are not neighbours "
                          "to the first slower commit, as jaxrun bisect does.")
    results_dir: Path = option(Path("jaxrun_confirm"), "With --confirm: where each change point's pairs go (one folder "
                               "each, as jaxrun ab writes).", Flag(names=("--confirm-dir",), metavar="DIR"))
