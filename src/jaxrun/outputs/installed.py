"""The outputs other packages install: an entry point in the ``jaxrun.outputs`` group names an
:class:`~jaxrun.outputs.declarations.Output` (``toy = "toy_output:OUTPUT"``), made with the
reports, after jaxrun's own, in every batch whose options ask for it (one with no ``asked_by`` is
made in every batch, as an installed pytest plugin is active). An output declares no extra of
jaxrun's (its package's own dependencies are its package's) and is made in the ``reports`` stage."""

from __future__ import annotations

from jaxrun.config.options import BatchOptions, RunOptions
from jaxrun.core.entry_points import installed
from jaxrun.outputs.declarations import OUTPUTS, Output

GROUP = "jaxrun.outputs"


def installed_outputs() -> tuple[list[Output], dict[str, str]]:
    """The installed outputs, and why each one that is not used is not (by entry point name)."""
    found, problems = installed(GROUP, Output)
    taken = {output.name for output in OUTPUTS}
    usable = []
    for name, output in found.items():
        if name in taken:
            problems[name] = "its name is one of jaxrun's own outputs"
        elif any(n not in BatchOptions.fields and n not in RunOptions.fields for n in (output.asked_by or "").split()):
            problems[name] = f"asked_by={output.asked_by!r} names no option of jaxrun"
        elif output.stage != "reports" or output.extra is not None or output.files:
            problems[name] = "an installed output is made with the reports, and declares no extra and no files"
        else:
            usable.append(output)
    return usable, problems
