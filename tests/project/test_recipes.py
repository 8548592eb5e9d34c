"""Each recipe of docs/ARCHITECTURE.md ("Recipes"), followed as written in a copy of the checkout:
a throwaway option, sampled figure, per-program figure, output, backend and failure class, each
added by editing only the files its recipe names (the copy's other files stay as they are), then
shown reaching every surface a user meets: flags, config keys, variables, API keywords, result
files, history, compare, terminal and HTML tables, JSON Schemas and the reference pages (made again
by the copy's docs/gen_reference.py). A recipe that needs one more edit somewhere fails here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO_ROOT, SRC, RunResult, write

pytestmark = pytest.mark.slow  # each copies the checkout and runs jaxrun in it

JAX_SCRIPT = "import jax\nimport jax.numpy as jnp\nprint(jax.jit(lambda x: x + 1)(jnp.ones(3)).sum())\n"


def _recipe_files(title: str) -> tuple[int, set[str]]:
    """What a recipe of ARCHITECTURE.md says it edits, on its "Files (N): ..." line: how many files,
    and the paths under src/jaxrun it names there."""
    text = (REPO_ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    start = text.index(title)
    line = re.search(r"^Files \((\d+)\): (.*)$", text[start:], re.M)
    assert line is not None, f"the recipe {title!r} has no 'Files (N):' line"
    return int(line.group(1)), set(re.findall(r"`(\w+(?:/\w+)*\.py)`", line.group(2)))


def _as_the_recipe_says(checkout: "Checkout", title: str) -> None:
    """The files the test edited are as many as the recipe counts, among them each it names."""
    count, named = _recipe_files(title)
    assert len(checkout.edited) == count and named <= checkout.edited, (title, count, named, checkout.edited)


class Checkout:
    """A copy of this checkout's package, docs generator and pyproject, edited as a recipe says."""

    def __init__(self, root: Path, cache: Path) -> None:
        self.root, self.cache = root, cache
        shutil.copytree(SRC, root / "src", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(REPO_ROOT / "docs" / "reference", root / "docs" / "reference")
        shutil.copy(REPO_ROOT / "docs" / "gen_reference.py", root / "docs")
        shutil.copy(REPO_ROOT / "pyproject.toml", root)
        self.edited: set[str] = set()

    def insert(self, rel: str, anchor: str, text: str, *, before: bool = False) -> None:
        """``text`` after (or before) the one line of ``src/jaxrun/rel`` holding ``anchor``."""
        path = self.root / "src" / "jaxrun" / rel
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        found = [i for i, line in enumerate(lines) if anchor in line]
        assert len(found) == 1, f"{rel}: {anchor!r} is on {len(found)} lines (the recipe's place moved?)"
        at = found[0] if before else found[0] + 1
        lines[at:at] = [text]
        path.write_text("".join(lines), encoding="utf-8")
        self.edited.add(rel)

    def add(self, rel: str, text: str) -> None:
        path = self.root / "src" / "jaxrun" / rel
        assert not path.exists()
        path.write_text(text, encoding="utf-8")
        self.edited.add(rel)

    def env(self, **more: str) -> dict[str, str]:
        theirs = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(SRC)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("JAXRUN_") and k != "JAX_PLATFORMS"}
        return {**env, "PYTHONPATH": os.pathsep.join([str(self.root / "src"), *theirs]),
                "JAXRUN_CACHE_DIR": str(self.cache), **more}

    def jaxrun(self, *args: object, cwd: Path | None = None, **env: str) -> RunResult:
        command = [sys.executable, "-m", "jaxrun", *map(str, args)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=cwd or self.root,
                              env=self.env(**env))
        return RunResult(command, done.returncode, done.stdout, done.stderr)

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                              cwd=self.root, env=self.env())

    def reference(self) -> dict[str, str]:
        """The reference pages the copy's code makes (python docs/gen_reference.py, as the recipes say)."""
        done = subprocess.run([sys.executable, "docs/gen_reference.py"], capture_output=True, text=True, timeout=300,
                              cwd=self.root, env=self.env())
        assert done.returncode == 0, done.stderr
        folder = self.root / "docs" / "reference"
        return {path.name: path.read_text(encoding="utf-8") for path in folder.glob("*.md")}


@pytest.fixture
def checkout(tmp_path: Path, jaxrun_cache_dir: Path) -> Checkout:
    return Checkout(tmp_path / "checkout", jaxrun_cache_dir)


def _ok(done: RunResult) -> RunResult:
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_add_an_option_that_reaches_the_child(checkout: Checkout, tmp_path: Path) -> None:
    checkout.insert("config/options.py", "    xla_analysis: bool = option(", before=True, text=(
        '    recipe_word: Optional[str] = option(None, "A word the script finds in RECIPE_WORD (a recipe\'s '
        'throwaway option).", Flag(metavar="WORD"))\n'))
    checkout.insert("run/process/environment.py", 'env["JAX_CHECK_TRACER_LEAKS"] = "True"', text=(
        "    if options.recipe_word is not None:\n        env[\"RECIPE_WORD\"] = options.recipe_word\n"))
    _as_the_recipe_says(checkout, "### Add an option that reaches the child")
    scripts = tmp_path / "s"
    write(scripts, "a.py", "if False:\n    import jax\nimport os\nprint('word=' + os.environ.get('RECIPE_WORD', '-'))\n")

    def said(results: Path) -> str:
        return (results / "logs" / "a.stdout.log").read_text()

    # The flag, the variable, the config file's key: each reaches the script's process.
    _ok(checkout.jaxrun("run", scripts, "--recipe-word", "flag1", "--results-dir", tmp_path / "r1", "--no-history"))
    assert said(tmp_path / "r1") == "word=flag1\n"
    _ok(checkout.jaxrun("run", scripts, "--results-dir", tmp_path / "r2", "--no-history", JAXRUN_RECIPE_WORD="env1"))
    assert said(tmp_path / "r2") == "word=env1\n"
    write(scripts, "jaxrun.toml", 'recipe_word = "cfg1"\n')
    _ok(checkout.jaxrun("run", scripts, "--results-dir", tmp_path / "r3", "--no-history"))
    assert said(tmp_path / "r3") == "word=cfg1\n"
    config = _ok(checkout.jaxrun("config", scripts, "--json")).stdout
    assert '"recipe_word"' in config and "cfg1" in config
    # The API keyword, with its default in the signature.
    done = checkout.python(
        "import inspect, jaxrun\n"
        f"r = jaxrun.execute_jax_script({str(scripts / 'a.py')!r}, recipe_word='api1', results_dir={str(tmp_path / 'r4')!r})\n"
        "print(r.success, inspect.signature(jaxrun.execute_jax_script).parameters['recipe_word'].default)\n")
    assert done.returncode == 0 and done.stdout.split() == ["True", "None"], done.stderr
    assert said(tmp_path / "r4") == "word=api1\n"
    # The help and the reference pages.
    assert "--recipe-word WORD" in _ok(checkout.jaxrun("run", "--help")).stdout
    pages = checkout.reference()
    assert "--recipe-word WORD" in pages["cli.md"]
    assert "`recipe_word`" in pages["configuration.md"] and "JAXRUN_RECIPE_WORD" in pages["configuration.md"]


def test_add_a_sampled_figure(checkout: Checkout, tmp_path: Path) -> None:
    checkout.insert("results/figures.py", 'aggregate="median_low"),', text=(
        '    ScriptFigure("recipe_cpu", "cpu_time", "seconds", "recipe cpu", "Seconds of CPU, again (a recipe\'s '
        'throwaway figure)"),\n'))
    _as_the_recipe_says(checkout, "#### A new per-script sampled figure")
    scripts = tmp_path / "s"
    write(scripts, "a.py", JAX_SCRIPT)
    history = tmp_path / "h.sqlite"
    for results in ("r1", "r2"):
        _ok(checkout.jaxrun("run", scripts, "--benchmark-runs", "2", "--warmup-runs", "0", "--results-dir",
                            tmp_path / results, "--history", history, "--export-json", tmp_path / f"{results}.json"))
    # Every counted run's sample holds it (the result's cpu_time), and the statistics describe it.
    bench = json.loads((tmp_path / "r2" / "jax_benchmark_results.json").read_text())["benchmarks"][0]
    assert all(s["recipe_cpu"] is not None and s["recipe_cpu"] == s["cpu_time"] for s in bench["samples"])
    assert "recipe_cpu" in bench["statistics"]
    assert "recipe_cpu" in (tmp_path / "r2.json").read_text()
    # The history keeps it and judges by it; compare reads it.
    shown = _ok(checkout.jaxrun("history", "--history", history, "--metric", "recipe_cpu")).stdout
    assert "recipe" in shown and "a" in shown
    compared = checkout.jaxrun("compare", tmp_path / "r1", tmp_path / "r2", "--metric", "recipe_cpu")
    assert compared.returncode in (0, 1) and "recipe cpu" in compared.stdout, compared.stdout + compared.stderr
    pages = checkout.reference()
    assert "recipe_cpu" in pages["cli.md"]  # --metric's help lists it
    # The tests that compare every sampled figure pass with it too: no test helper lists the figures.
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", "-m", "not slow",
                           "--basetemp", str(tmp_path / "pytest"), "-o", f"pythonpath={checkout.root / 'src'} tests",
                           "tests/judge/test_compare.py"],
                          capture_output=True, text=True, timeout=600, cwd=REPO_ROOT, env=checkout.env())
    assert done.returncode == 0, done.stdout[-3000:]


def test_add_a_per_program_figure(checkout: Checkout, tmp_path: Path) -> None:
    checkout.insert("results/program_figures.py", 'ProgramFigure("intensity", "FLOP/byte"', text=(
        '    ProgramFigure("recipe_calls", "recipe calls", "count", lambda stats, _: 10.0 * stats.count),\n'))
    _as_the_recipe_says(checkout, "#### A new per-program figure")
    scripts = tmp_path / "s"
    write(scripts, "a.py", JAX_SCRIPT)
    terminal = _ok(checkout.jaxrun("run", scripts, "-v", "--cold-cache", "--results-dir", tmp_path / "r", "--no-history",
                                   COLUMNS="250")).stdout
    header = next(line for line in terminal.splitlines() if "recipe calls" in line)
    row = next(line for line in terminal.splitlines() if "jit(<lambda>)" in line)
    column = header.index("recipe calls")
    assert row[column:column + len("recipe calls")].strip() == "10", (header, row)
    _ok(checkout.jaxrun("report", tmp_path / "r"))
    page = (tmp_path / "r" / "report.html").read_text()
    assert "recipe calls" in page and re.search(r">\s*10\s*<", page)


def test_add_an_output(checkout: Checkout, tmp_path: Path) -> None:
    checkout.add("outputs/recipe_list.py", '''"""--recipe-list FILE: each script's name and status, one a line (a recipe's throwaway output)."""

from jaxrun.plan.sink import BaseSink


class RecipeListSink(BaseSink):
    def __init__(self, path):
        self.path, self.lines = path, []

    def on_result(self, job, result):
        self.lines.append(f"{result.script_name} {'ok' if result.success else result.error_class}")
        return result

    def on_end(self, batch):
        self.path.write_text("\\n".join(self.lines) + "\\n")


def for_batch(context):
    return RecipeListSink(context.options.recipe_list)
''')
    checkout.insert("outputs/declarations.py", 'Output("junit_xml", "jaxrun.outputs.junit:for_batch"', text=(
        '    Output("recipe_list", "jaxrun.outputs.recipe_list:for_batch", asked_by="recipe_list", '
        'files={"recipe_list": "the list"}),\n'))
    checkout.insert("config/options.py", '    report: bool = option(False, "Also write the HTML report', before=True,
                    text='    recipe_list: Optional[Path] = option(None, "Also write each script\'s name and status '
                         '(a recipe\'s throwaway output).", Flag(metavar="FILE"))\n')
    _as_the_recipe_says(checkout, "### Add an output")
    scripts = tmp_path / "s"
    write(scripts, "a.py", "if False:\n    import jax\n")
    write(scripts, "b.py", "if False:\n    import jax\nraise SystemExit(3)\n")
    done = checkout.jaxrun("run", scripts, "--recipe-list", tmp_path / "list.txt", "--results-dir", tmp_path / "r1",
                           "--no-history")
    assert done.returncode == 1 and (tmp_path / "list.txt").read_text() == "a ok\nb script_error\n", done.stderr
    # A config file's path is its folder's; a file that cannot be written is refused before anything runs.
    write(scripts, "jaxrun.toml", 'recipe_list = "from-config.txt"\n')
    checkout.jaxrun("run", scripts, "--results-dir", tmp_path / "r2", "--no-history")
    assert (scripts / "from-config.txt").read_text() == "a ok\nb script_error\n"
    done = checkout.jaxrun("run", scripts, "--recipe-list", tmp_path / "no" / "such" / "list.txt", "--results-dir",
                           tmp_path / "r3", "--no-history")
    assert done.returncode == 2 and "the list (--recipe-list)" in done.stderr, done.stderr
    assert not (tmp_path / "r3").exists()
    pages = checkout.reference()
    assert "--recipe-list FILE" in pages["cli.md"] and "`recipe_list`" in pages["configuration.md"]


def test_add_a_backend(checkout: Checkout, tmp_path: Path) -> None:
    checkout.add("executors/recipe_backend.py", '''"""--backend recipe: the jobs one after another, each said in a file (a recipe's throwaway backend)."""

import os

from jaxrun.executors.sequential import SequentialExecutor


class RecipeExecutor(SequentialExecutor):
    def run(self, jobs, run_job, sink):
        super().run(jobs, run_job, sink)
        with open(os.environ["RECIPE_BACKEND_FILE"], "w") as f:
            f.write(",".join(job.file_name for job in jobs))
''')
    checkout.insert("executors/backends.py", "shares_gpus=False, reattaches=True),", text=(
        '    Backend("recipe", "jaxrun.executors.recipe_backend:RecipeExecutor", "Recipe"),\n'))
    _as_the_recipe_says(checkout, "### Add a backend")
    scripts = tmp_path / "s"
    write(scripts, "a.py", "if False:\n    import jax\n")
    marker = tmp_path / "ran.txt"
    _ok(checkout.jaxrun("run", scripts, "--backend", "recipe", "--results-dir", tmp_path / "r1", "--no-history",
                        RECIPE_BACKEND_FILE=str(marker)))
    assert marker.read_text() == "a"
    assert "on the recipe backend" in (tmp_path / "r1" / "jax_execution_log.txt").read_text()
    write(scripts, "jaxrun.toml", 'backend = "recipe"\n')
    marker.unlink()
    _ok(checkout.jaxrun("run", scripts, "--results-dir", tmp_path / "r2", "--no-history",
                        RECIPE_BACKEND_FILE=str(marker)))
    assert marker.read_text() == "a"
    assert "[local|ray|slurm|recipe]" in _ok(checkout.jaxrun("run", "--help", COLUMNS="200")).stdout
    assert "[local&#124;ray&#124;slurm&#124;recipe]" in checkout.reference()["cli.md"]


def test_add_a_failure_class(checkout: Checkout, tmp_path: Path) -> None:
    checkout.insert("core/failures.py", 'FailureClass("syntax_error", "the script does not parse', text=(
        '        FailureClass("recipe_error", "the script raised RecipeError (a recipe\'s throwaway failure class)"),\n'))
    checkout.insert("run/reading/classify.py", '        return "syntax_error"', text=(
        '    if "RecipeError" in names:\n        return "recipe_error"\n'))
    _as_the_recipe_says(checkout, "### Add a failure class")
    scripts = tmp_path / "s"
    write(scripts, "a.py", "if False:\n    import jax\nclass RecipeError(Exception):\n    pass\nraise RecipeError('x')\n")
    done = checkout.jaxrun("run", scripts, "--results-dir", tmp_path / "r", "--no-history", "--junit-xml",
                           tmp_path / "j.xml")
    assert done.returncode == 1 and "recipe_error" in done.stdout, done.stdout + done.stderr
    result = json.loads((tmp_path / "r" / "script_results" / "a_result.json").read_text())
    assert result["error_class"] == "recipe_error" and "RecipeError" in result["hint"]
    assert len(result["attempts"]) == 1  # not transient: not run again
    assert 'type="recipe_error"' in (tmp_path / "j.xml").read_text()
    assert "recipe_error" in _ok(checkout.jaxrun("schema", "script_result")).stdout
    assert "`recipe_error`" in checkout.reference()["errors.md"]
