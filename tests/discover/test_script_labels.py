"""A script's label is one line on every surface, whatever its file is named: a newline, a tab or an
escape sequence in a name is shown as its escape, never as a break in a table's row or a progress
line, nor as a colour code the terminal obeys. Real runs of the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import write

from jaxrun.core.formatting import readable
from jaxrun.discover.script_labels import relative_path

NAMES = {"new\nline.py": "new\\nline.py", "tab\tname.py": "tab\\tname.py", "esc\x1b[31mred.py": "esc\\x1b[31mred.py",
         "ünï çødé.py": "ünï çødé.py", "-dash; 'q' \"d\" back\\slash.py": "-dash; 'q' \"d\" back\\slash.py"}


@pytest.mark.parametrize("name, shown", NAMES.items())
def test_the_label_of_any_name_is_one_printable_line(name: str, shown: str) -> None:
    assert relative_path(f"/root/sub/{name}", ["/root"]) == f"sub/{shown}"
    assert readable(shown) == shown  # a printable name is left as it is


def test_every_line_the_terminal_prints_names_the_script_whole(tmp_path: Path, jaxrun_cli) -> None:  # type: ignore[no-untyped-def]
    for name in NAMES:
        write(tmp_path / "s", name, "if False:\n    import jax\nprint('ran')\n")
    proc = jaxrun_cli.run("run", tmp_path / "s", "--device", "cpu", "--no-history", "--results-dir", tmp_path / "r",
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout + proc.stderr
    assert "\x1b[31m" not in out  # the name's escape sequence reached the terminal as text
    for shown in NAMES.values():
        rows = [line for line in out.splitlines() if line.startswith(shown + " ")]
        assert rows and all(" ok " in row for row in rows), (shown, out)
    # No line is the tail of a name cut by its newline.
    assert not [line for line in out.splitlines() if line.startswith("line.py")], out
