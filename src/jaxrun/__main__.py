"""``python -m jaxrun``: the same CLI, plus the executor API's form.

``python -m jaxrun --output-dir DIR [--device gpu] [--recursive] [--verbose]`` is read as
``jaxrun run DIR [--device gpu] [--recursive] [--verbose]``.
"""

from __future__ import annotations

import sys

from jaxrun.interfaces.entry import command


def translate_output_dir_form(argv: list[str]) -> list[str]:
    if not argv or argv[0] in ("run", "devices", "check", "schema", "compare", "history"):
        return argv
    # `--output-dir=DIR` is the same option as `--output-dir DIR` (as for every click option).
    rest = [part for arg in argv for part in (arg.split("=", 1) if arg.startswith("--output-dir=") else [arg])]
    if "--output-dir" not in rest:
        return argv
    at = rest.index("--output-dir")
    if at + 1 >= len(rest):
        return argv  # let the CLI report the missing value
    folder = rest[at + 1]
    del rest[at : at + 2]
    return ["run", folder, *rest]


if __name__ == "__main__":
    command(translate_output_dir_form(sys.argv[1:]))
