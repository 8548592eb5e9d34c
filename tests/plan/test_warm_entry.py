"""Warm mode (`--warm`, `entry = "step"`) calls a function of the script: a script that defines
none is a usage error before anything runs (exit 2, one line naming the script and what warm mode
needs), read from the script's syntax tree by the plan. It was a `script_error`, "the script
raised an exception", after every script before it had run."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import jaxrun, write

from jaxrun.discover.scripts import PARSE_LIMIT, defines_name

DEFINED = {
    "def": "def main():\n    pass\n",
    "async def": "async def main():\n    pass\n",
    "a class": "class main:\n    pass\n",
    "an assignment": "main = lambda: None\n",
    "an annotated assignment": "main: object = print\n",
    "a tuple assignment": "main, other = print, print\n",
    "an import": "from os import getcwd as main\n",
    "a plain import": "import main\n",
    "a for loop": "for main in [print]:\n    pass\n",
    "a with block": "with open(__file__) as main:\n    pass\n",
    "a walrus": "(main := print)\n",
    "an if block": "if True:\n    def main():\n        pass\n",
    "a try block": "try:\n    import numpy\nexcept ImportError:\n    pass\nelse:\n    main = print\n",
    "an except handler": "try:\n    pass\nexcept Exception:\n    main = print\n",
    "the else of a main guard": "if __name__ == '__main__':\n    pass\nelse:\n    main = print\n",
}
MISSING = {
    "nothing": "x = 1\n",
    "another name": "def step():\n    pass\n",
    "inside a function": "def outer():\n    def main():\n        pass\n",
    "inside a class": "class C:\n    def main(self):\n        pass\n",
    "inside the main guard": "if __name__ == '__main__':\n    def main():\n        pass\n",
    "inside the main guard, written the other way": "if '__main__' == __name__:\n    main = print\n",
}
UNKNOWN = {
    "a star import": "from os.path import *\n",
    "globals()": "globals()['main'] = print\n",
    "exec": "exec('def main(): pass')\n",
    "a syntax error": "def main(:\n",
}


@pytest.mark.parametrize(("cases", "expected"), [(DEFINED, True), (MISSING, False), (UNKNOWN, None)],
                         ids=["defined", "missing", "unknown"])
def test_the_syntax_tree_says_whether_the_script_defines_its_entry(tmp_path: Path, cases: dict, expected) -> None:
    for name, code in cases.items():
        script = write(tmp_path, f"{name.replace(' ', '_')}.py", "import jax\n" + code)
        assert defines_name(script, "main") is expected, name
    assert defines_name(tmp_path / "absent.py", "main") is None
    big = tmp_path / "big.py"
    big.write_text("import jax\n" + "# padding\n" * (PARSE_LIMIT // 10 + 1))
    assert defines_name(big, "main") is None  # too large to parse: the run decides


@pytest.mark.slow
def test_warm_mode_on_a_script_without_its_entry_is_one_usage_error_before_anything_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    write(tmp_path / "s", "a_first.py", f"import jax\nopen({str(marker)!r}, 'w').close()\ndef main():\n    pass\n")
    write(tmp_path / "s", "b_no_main.py", "import jax\nif __name__ == '__main__':\n    def main():\n        pass\n")
    done = jaxrun("run", tmp_path / "s", "--warm", "--device", "cpu", "--no-history", "--results-dir", tmp_path / "r")
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("jaxrun: error: b_no_main.py: --warm calls the script's main() ") and "defines no main()" in line
    assert not marker.exists() and not (tmp_path / "r").exists()  # nothing ran, nothing was written
    # Set in a config file: named by its key and line.
    write(tmp_path / "s", "jaxrun.toml", 'entry = "step"\n')
    done = jaxrun("run", tmp_path / "s", "--device", "cpu", "--no-history", "--results-dir", tmp_path / "r")
    assert done.returncode == 2 and "a_first.py: entry (" in done.stderr and "jaxrun.toml:1) calls" in done.stderr
    assert "defines no step()" in done.stderr and not marker.exists()


def test_the_api_refuses_it_before_the_script_runs_too(tmp_path: Path) -> None:
    import jaxrun as jaxrun_api
    from jaxrun.errors import UsageError

    marker = tmp_path / "ran"
    script = write(tmp_path, "s.py", f"import jax\nopen({str(marker)!r}, 'w').close()\n")
    with pytest.raises(UsageError, match=r"s\.py: entry calls the script's main\(\) .* defines no main\(\)"):
        jaxrun_api.execute_jax_script(script, device="cpu", entry="main")
    with pytest.raises(UsageError, match="defines no step"):
        jaxrun_api.run_jax_scripts(tmp_path, device="cpu", entry="step", history=False, results_dir=tmp_path / "r")
    assert not marker.exists() and not (tmp_path / "r").exists()
