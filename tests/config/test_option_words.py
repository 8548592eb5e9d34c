"""The words an option's help promises (`--compile-cache false`, `--timeout none`,
`--matmul-precision none`, ...) mean the same from every source: a flag, a config file, a
JAXRUN_* variable, an API keyword, a script's '# jaxrun:' comment. `--compile-cache false` once
made a cache folder named `false` in the working folder. And `jaxrun config` shows each value as a
config file writes it: `history = false` was shown as null, `slurm_setup = []` too."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import jaxrun, write

from jaxrun.config.config_keys import TOP_KEYS, env_name
from jaxrun.config.options import BatchOptions, RunOptions
from jaxrun.config.settings import resolve_batch_options
from jaxrun.errors import UsageError
from jaxrun.interfaces.cli.config_command import _settings
from jaxrun.plan.batch_plan import discover, make_jobs, plan_devices, plan_scripts

SCRIPT = "if False:\n    import jax\nprint('ran')\n"
FIELDS = {**RunOptions.fields, **BatchOptions.fields}
# (option, word) for every word an option declares, as typed and capitalised.
WORDS = [(name, spelled) for name, field in FIELDS.items() for word in field.words
         for spelled in (word, word.capitalize())]


def _owner(name: str) -> type:
    return BatchOptions if name in BatchOptions.fields else RunOptions


def _meant(name: str, word: str) -> Any:
    """What the option holds for ``word``: the value its declaration says the word stands for,
    given through the API in the API's own spelling (False, None)."""
    return _api(name, FIELDS[name].words[word.lower()])


def _api(name: str, value: Any) -> Any:
    owner = _owner(name)
    paths = {"paths": ["."]} if owner is BatchOptions else {}
    return owner.build("api", **paths, **{name: value}).__dict__[name]


def _held(folder: Path, name: str, given: dict | None = None, environ: dict | None = None) -> Any:
    """What the option holds in the run of ``folder``'s one script, every layer applied."""
    options = resolve_batch_options([folder], given or {}, environ=environ or {}).options
    if name in BatchOptions.fields:
        return getattr(options, name)
    found, _ = discover(options.paths, options.recursive, options.include, options.exclude)
    planned, _ = plan_scripts(options, found)
    (job,) = make_jobs(options, planned, plan_devices(options, None))
    return getattr(options.options_for(job), name)


def test_every_word_a_help_promises_is_declared_and_every_declared_word_is_in_the_help() -> None:
    assert {name for name, _ in WORDS} >= {"timeout", "compile_cache", "compile_cache_max_size", "matmul_precision",
                                           "history"}
    for name, field in FIELDS.items():
        helps = " ".join(t for t in (field.description, field.flag.help if field.flag else None) if t)
        # "(false: none)", "(none: no limit)": a word and what it means; "(repeatable: ...)" is the
        # flag's own note, not a value.
        promised = {w.lower() for w in re.findall(r"\(([A-Za-z]+): ", helps)} - {"repeatable"}
        assert promised <= set(field.words), (name, helps)
        assert all(re.search(rf"\b{word}\b", helps) for word in field.words), (name, helps)


@pytest.mark.parametrize(("name", "word"), WORDS)
def test_a_word_means_the_same_from_every_source(tmp_path: Path, name: str, word: str) -> None:
    meant = _meant(name, word)
    assert meant is None or isinstance(meant, (int, float)), meant  # never a path named after the word
    assert _api(name, word) == meant  # the API's keyword, as text
    layers = {
        "the command line": ({}, {name: word}, {}),
        "a variable": ({}, {}, {env_name(name): word}),
        "jaxrun.toml": ({"jaxrun.toml": f"{name} = {json.dumps(word)}\n"}, {}, {}),
        "pyproject.toml": ({"pyproject.toml": f"[tool.jaxrun]\n{name} = {json.dumps(word)}\n"}, {}, {}),
    }
    if name in RunOptions.fields:
        layers["a script's comment"] = ({"s.py": f"# jaxrun: {name}={word}\n{SCRIPT}"}, {}, {})
        layers["a per-script table"] = ({"jaxrun.toml": f'[scripts."s.py"]\n{name} = {json.dumps(word)}\n'}, {}, {})
    for layer, (files, given, environ) in layers.items():
        folder = tmp_path / layer.replace(" ", "_").replace("'", "")
        write(folder, "s.py", SCRIPT)
        for file, text in files.items():
            write(folder, file, text)
        assert _held(folder, name, given, environ) == meant, layer
        assert not (folder / word).exists() and not (tmp_path / word).exists(), layer


@pytest.mark.slow
def test_the_flags_take_the_words_and_compile_cache_false_makes_no_folder(tmp_path: Path) -> None:
    write(tmp_path / "scripts", "s.py", SCRIPT)
    first = dict(reversed([(name, word) for name, word in WORDS if word.islower()]))  # one word of each option
    flags = [a for name, word in first.items() for a in (FIELDS[name].flag.names or
                                                          ("--" + name.replace("_", "-"),))[:1] + (word,)]
    by_flags = jaxrun("config", "scripts", *flags, "--json", cwd=tmp_path)
    assert by_flags.returncode == 0, by_flags.stderr
    write(tmp_path / "scripts", "jaxrun.toml", "".join(f"{name} = {json.dumps(word)}\n" for name, word in first.items()))
    by_file = jaxrun("config", "scripts", "--json", cwd=tmp_path)
    assert by_file.returncode == 0, by_file.stderr
    shown, in_file = (json.loads(done.stdout)["settings"] for done in (by_flags, by_file))
    for name, word in first.items():
        assert shown[name]["value"] == in_file[name]["value"] == {"false": False}.get(word, word), name
    done = jaxrun("run", "scripts", "--compile-cache", "false", "--history", "false", "--device", "cpu",
                  "--results-dir", "r", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r", "scripts"]  # no folder named false
    assert not (tmp_path / ".jaxrun").exists()


# --- jaxrun config shows each value as it is --------------------------------------------------------

FALSY = {"false": False, "0": 0, "[]": [], '""': "", "{}": {}}


def _shown(folder: Path) -> dict[str, dict[str, Any]]:
    return _settings(resolve_batch_options([folder], {}, environ={}))


@pytest.mark.parametrize("literal", FALSY)
def test_a_false_zero_or_empty_value_a_config_file_sets_is_shown_as_it_is(tmp_path: Path, literal: str) -> None:
    """Every key the file may set to it: shown as written (or as the word that stands for it),
    never as null, which reads as "not set"; a value a key cannot hold is refused in one line."""
    accepted = 0
    for key in TOP_KEYS:
        folder = tmp_path / key
        needs = {"slurm": 'backend = "slurm"\n', "nodes": 'backend = "slurm"\n', "warmup": "benchmark_runs = 1\n"}
        extra = next((text for prefix, text in needs.items() if key.startswith(prefix)), "")
        write(folder, "s.py", SCRIPT)
        write(folder, "jaxrun.toml", f"{key} = {literal}\n{extra}")
        try:
            shown = _shown(folder)[key]
        except UsageError as exc:
            assert "\n" not in str(exc) and "jaxrun.toml:1" in str(exc), (key, exc)
            continue
        accepted += 1
        value = shown["value"]
        assert value is not None and shown["source"] == "config", (key, shown)
        if key not in ("include", "exclude", "args", "slurm_setup", "slurm_options") or literal != '""':
            assert value == FALSY[literal] or isinstance(value, str) and value.lower() in FIELDS[key].words, (key, shown)
    assert accepted >= {"false": 20, "0": 5, "[]": 5, '""': 1, "{}": 1}[literal]


def test_an_empty_path_is_refused_not_read_as_the_working_folder(tmp_path: Path) -> None:
    paths = [n for n, f in FIELDS.items() if "Path" in str(f.annotation) and n not in ("paths", "config_file")]
    assert {"results_dir", "history", "compile_cache", "markdown"} <= set(paths)
    for name in paths:
        with pytest.raises(UsageError, match=rf"^{name} must be a path, got ''$"):
            _owner(name).build("api", **({"paths": [tmp_path]} if _owner(name) is BatchOptions else {}), **{name: ""})
        write(tmp_path / name, "jaxrun.toml", f'{name} = ""\n')
        with pytest.raises(UsageError, match="jaxrun.toml:1"):
            resolve_batch_options([tmp_path / name], {}, environ={})


def test_a_list_option_given_a_table_or_a_bool_is_refused_in_one_line(tmp_path: Path) -> None:
    for key in ("include", "exclude", "device", "args", "slurm_setup", "slurm_options"):
        for literal in ("false", "true", "{a = 1}", "0"):
            write(tmp_path / key, "jaxrun.toml", f"{key} = {literal}\n")
            with pytest.raises(UsageError) as caught:
                resolve_batch_options([tmp_path / key], {}, environ={})
            assert "\n" not in str(caught.value) and key in str(caught.value), (key, literal, caught.value)


@pytest.mark.slow
def test_jaxrun_config_prints_history_false_as_false(tmp_path: Path) -> None:
    write(tmp_path, "s.py", SCRIPT)
    write(tmp_path, "jaxrun.toml", 'history = false\ncompile_cache = false\nslurm_setup = []\nretries = 0\n'
                                   'timeout = "none"\n')
    table = jaxrun("config", ".", cwd=tmp_path, env={"COLUMNS": "200"})
    assert table.returncode == 0, table.stderr
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in table.lines if line.count("│") > 3}
    assert rows["history"] == rows["compile_cache"] == "false"
    assert rows["slurm_setup"] == "[]" and rows["retries"] == "0" and rows["timeout"] == '"none"'
