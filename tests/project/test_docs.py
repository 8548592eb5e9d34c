"""The docs site: its reference pages are what docs/gen_reference.py makes of the code (a page
that differs fails here: run `python docs/gen_reference.py`), they cover every command, flag,
config key, result field and failure class, and the site builds with `mkdocs build --strict`,
its pages saying what the CLI says."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "docs" / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()
PAGES = GEN.pages()


@pytest.mark.parametrize("rel", sorted(PAGES))
def test_each_reference_page_is_what_the_code_makes(rel: str) -> None:
    committed = (ROOT / "docs" / rel).read_text(encoding="utf-8")
    assert committed == PAGES[rel], f"docs/{rel} differs from the code: run `python docs/gen_reference.py`"


def test_the_reference_covers_every_command_flag_key_field_and_failure_class() -> None:
    from jaxrun.config.config_keys import TOP_KEYS, env_name
    from jaxrun.core.failures import TABLE
    from jaxrun.interfaces.cli import COMMANDS, app
    from jaxrun.results.models import ScriptResult

    cli = PAGES["reference/cli.md"]
    ctx = click.Context(app, info_name="jaxrun")
    for name in COMMANDS:
        assert f"## jaxrun {name}\n" in cli, name
        command = app.get_command(ctx, name)
        sub = click.Context(command, info_name=name, parent=ctx)
        for param in command.get_params(sub):
            record = param.get_help_record(sub)
            if record is not None:
                assert f"| {GEN._code(record[0])} |" in cli, (name, record[0])
    config = PAGES["reference/configuration.md"]
    for key in TOP_KEYS:
        assert f"| `{key}` | `{env_name(key)}` |" in config, key
    results = PAGES["reference/results.md"]
    for field, info in ScriptResult.model_fields.items():
        assert (f"| `{field}` |" in results) is not bool(info.exclude), field  # what the file holds
        assert info.exclude or info.description, f"ScriptResult.{field} has no description"
    errors = PAGES["reference/errors.md"]
    for name, row in TABLE.items():
        assert f"| `{name}` |" in errors and row.hint.split()[0] in errors, name


@pytest.mark.slow
def test_the_site_builds_strict_and_its_pages_say_what_the_cli_says(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    page = _text(site / "reference" / "cli" / "index.html")
    # What a reader of the site sees of `jaxrun run`: each flag --help shows, with its help text.
    from jaxrun.interfaces.cli import app

    ctx = click.Context(app, info_name="jaxrun")
    run = app.get_command(ctx, "run")
    sub = click.Context(run, info_name="run", parent=ctx)
    for param in run.get_params(sub):
        record = param.get_help_record(sub)
        if record is None:
            continue
        flags, text = record
        assert flags in page, flags
        assert " ".join(text.split()[:6]) in page, (flags, text)


def _text(page: Path) -> str:
    """What a reader of the HTML page reads: its text, entities decoded, spaces made single."""
    from html.parser import HTMLParser

    parts: list[str] = []

    class Text(HTMLParser):
        def handle_data(self, data: str) -> None:
            parts.append(data)

    Text(convert_charrefs=True).feed(page.read_text(encoding="utf-8"))
    return " ".join(" ".join(parts).split())
