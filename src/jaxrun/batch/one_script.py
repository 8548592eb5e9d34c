"""One script run alone, outside a batch (``execute_jax_script``, each run of ``jaxrun ab`` and
``jaxrun bisect``): its run options resolved as a batch would (the given ones over ``JAXRUN_*``,
its own settings and the config file's), everything checkable about them checked before it runs
(exit 2, one line, as in a batch), and the outputs a batch would give one script's run."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from jaxrun.config.options import RunOptions
from jaxrun.config.resolve import script_run_options
from jaxrun.config.sweeps import point_changes
from jaxrun.discover.scripts import check_notebook, defines_name
from jaxrun.errors import DeviceProbeError, ScriptNotFoundError, UsageError
from jaxrun.outputs.script_files import ScriptFileSink
from jaxrun.probe import notebook_cells
from jaxrun.plan.sink import Sink, Sinks


def checked_script(script_path: "Path | str", given: Mapping[str, Any], config: Any,
                   no_sweep: Callable[[str], str]) -> tuple[Path, RunOptions]:
    """The script (resolved) and its run options, checked: a missing script, a notebook Jupyter
    could not open, a sweep (``no_sweep(where it was set)`` says why it is refused here), a warm-mode
    entry the script does not define, or one device (``gpu:1``) that is not here is a UsageError."""
    script = Path(script_path).expanduser()
    if not script.is_file():
        raise ScriptNotFoundError(f"no such script: {str(script_path)!r} — pass the path of a .py file or an .ipynb notebook")
    script = script.resolve()
    if script.suffix == notebook_cells.SUFFIX:
        check_notebook(script, str(script_path))
    options = script_run_options(script, given, config)
    if options.sweep is not None:
        raise UsageError(no_sweep(options.origin_of("sweep") or options.source_of("sweep")))
    if options.params:
        # One point, as a sweep's job gets it: what jaxrun applies of it, and {name} in args and env.
        options = options.evolve(**point_changes(options.params, options.args, options.env))
    if options.entry is not None and script.suffix == notebook_cells.SUFFIX:
        raise UsageError(notebook_cells.no_warm_mode(str(script_path), options.entry, options.origin_of("entry")))
    if options.entry is not None and defines_name(script, options.entry) is False:
        from jaxrun.plan.batch_plan import no_entry

        raise UsageError(no_entry(str(script_path), options))
    if ":" in options.device:  # one device (gpu:1): one that is not here is a usage error, as in a batch
        from jaxrun.discover.devices import check_device_id, get_jax_device_info

        try:
            check_device_id(options.device, get_jax_device_info(python=options.python), options.host_devices)
        except DeviceProbeError:
            pass  # no facts: the run says why
    return script, options


def script_outputs(results_dir: Path, options: RunOptions) -> Sink:
    """What a batch writes of one script's run in ``results_dir``: its result file, and as its
    options ask, its profiles and its notebook as it ran."""
    sinks: list[Sink] = [ScriptFileSink()]
    if options.enable_profiling:
        from jaxrun.outputs.profile_files import ProfileSink

        sinks.append(ProfileSink(results_dir))
    if options.save_notebooks:
        from jaxrun.outputs.notebook_outputs import NotebookSink

        sinks.append(NotebookSink())
    return Sinks(sinks)
