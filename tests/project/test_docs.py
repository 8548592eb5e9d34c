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


# click's help formatter: what it lays out changes between click releases (8.5 lists arguments as
# rows), so the CLI page must be made without any of it.
_CLICK_FORMATTERS = {
    "Command": ("format_help", "format_usage", "format_help_text", "format_options", "format_epilog", "get_help",
                "get_usage", "collect_usage_pieces", "get_short_help_str"),
    "Group": ("format_commands",), "MultiCommand": ("format_commands",),
    "Parameter": ("get_help_record", "make_metavar", "get_usage_pieces"),
    "Option": ("get_help_record", "get_help_extra", "make_metavar", "get_usage_pieces"),
    "Argument": ("get_help_record", "make_metavar", "get_usage_pieces"),
    "ParamType": ("get_metavar",), "Choice": ("get_metavar",), "Path": ("get_metavar",),
    "_NumberRangeBase": ("_describe_range",), "IntRange": ("_describe_range",), "FloatRange": ("_describe_range",),
}


def test_the_cli_page_is_made_without_clicks_help_formatter(monkeypatch: pytest.MonkeyPatch) -> None:
    """With every help-formatting function of click made to fail, the page comes out the same: it
    is made from the commands' declarations alone, so a click release that lays out its help
    differently (8.5 added argument rows) cannot change it."""
    import click.core
    import click.formatting
    import click.types

    def refuse(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("docs/gen_reference.py used click's help formatter")

    patched = 0
    for cls_name, methods in _CLICK_FORMATTERS.items():
        cls = vars(click.core).get(cls_name) or vars(click.types).get(cls_name)  # no deprecated lookups
        for method in methods:
            if cls is not None and method in vars(cls):
                monkeypatch.setattr(cls, method, refuse)
                patched += 1
    for module in (click.formatting, click.core, click.utils):
        for function in ("join_options", "make_default_short_help", "wrap_text", "measure_table", "iter_rows"):
            if function in vars(module):  # not getattr: a deprecated name warns when looked up
                monkeypatch.setitem(vars(module), function, refuse)
                patched += 1
    monkeypatch.setattr(click.formatting.HelpFormatter, "__init__", refuse)
    assert patched >= 25, f"only {patched} of click's formatting functions found: has click renamed them?"
    with pytest.raises(AssertionError):  # the patch holds: click's own help cannot be made now
        from jaxrun.interfaces.cli import app

        app.get_help(click.Context(app, info_name="jaxrun"))
    assert _generator().cli_page() == (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")


def test_the_reference_covers_every_command_flag_key_field_and_failure_class() -> None:
    from jaxrun.config.config_keys import TOP_KEYS, env_name
    from jaxrun.core.failures import TABLE
    from jaxrun.interfaces.cli import COMMANDS, app
    from jaxrun.results.models import ScriptResult

    cli = PAGES["reference/cli.md"]
    ctx = click.Context(app, info_name="jaxrun")
    for name in COMMANDS:
        assert f"## jaxrun {name}\n" in cli, name
        section = cli.split(f"## jaxrun {name}\n")[1].split("\n## ")[0]
        usage = section.strip().splitlines()[0]
        command = app.get_command(ctx, name)
        for param in command.params:
            if isinstance(param, click.Argument):  # in the usage line, by its name
                assert (param.metavar or param.name.upper()).strip("[].") in usage, (name, param.name)
                continue
            row = next((line for line in section.splitlines() if line.startswith("| <code>")
                        and param.opts[0] in line[8:].split("</code>")[0].replace(",", " ").split()), None)
            assert row is not None, (name, param.opts)
            assert all(opt in row for opt in param.opts + param.secondary_opts), (name, row)
            assert " ".join((param.help or "").split()[:6]) in row, (name, row)
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


def test_the_site_build_is_ignored_by_git() -> None:
    """`mkdocs build` writes its site into the checkout (mkdocs.yml's site_dir, `site` by default):
    git must ignore it, or the built pages show up as the user's changes."""
    import yaml

    site_dir = (yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8")) or {}).get("site_dir", "site")
    if subprocess.run(["git", "rev-parse", "--git-dir"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    done = subprocess.run(["git", "check-ignore", "--no-index", "-q", f"{site_dir}/index.html"], cwd=ROOT)
    assert done.returncode == 0, f"{site_dir}/ (mkdocs build's output) is not in .gitignore"


def test_every_install_line_of_the_docs_installs_the_checkout() -> None:
    """jaxrun is installed from its checkout (the README's `pip install ".[extra]"`), not from a
    package index, where no `jaxrun` of this project is: no page may tell a reader otherwise."""
    import re

    from_index = re.compile(r"pip install\s+(-\S+\s+)*['\"]?jaxrun\b")
    quoted = re.compile(r"`jaxrun: error:[^`]*`")  # a message of jaxrun's own, quoted: the code's words
    wrong = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for paragraph in page.read_text(encoding="utf-8").split("\n\n"):
            wrong += [f"{page.relative_to(ROOT)}: {m.group(0)}" for m in from_index.finditer(quoted.sub("", paragraph))]
    assert not wrong, "\n".join(wrong)
