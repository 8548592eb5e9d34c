"""jaxrun deletes or overwrites in a results folder only what it wrote (results/ownership.py), never
follows a symlink out of it, and refuses a folder holding files it did not write unless told to:
through the CLI, the API and MCP, and for any folder (hypothesis draws trees of foreign files and
links among jaxrun's own names)."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest
from helpers import jaxrun as jaxrun_cli
from helpers import run_batch, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxrun
from jaxrun.errors import UsageError
from jaxrun.results.ownership import MANIFEST, ResultsFolder

QUICK = "if False:\n    import jax\nprint(1)\n"
# Writes one output file named after its first argument (outputs of two runs can be told apart).
WRITES = ("if False:\n    import jax\nimport os, sys\n"
          "open(os.path.join(os.environ['JAXRUN_OUTPUT_DIR'], sys.argv[1] + '.txt'), 'w').write('x')\n")


def _snapshot(root: Path) -> dict[str, str]:
    """Every file and link under ``root`` (not followed) with its content's hash or target."""
    seen: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                seen[rel] = "-> " + os.readlink(path)
            elif path.is_file():
                seen[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return seen


def _one_error_line(done) -> str:  # type: ignore[no-untyped-def]
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def _user_folder(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """The issue's folder: the user's own files under names jaxrun uses for its own folders."""
    proj, src = tmp_path / "proj", tmp_path / "src"
    write(proj / "logs", "experiment_2019.log", "important\n")
    write(proj / "outputs", "model.ckpt", "important\n")
    write(src, "a.py", QUICK)
    return proj, src, _snapshot(proj)


@pytest.mark.slow
def test_a_folder_holding_the_users_files_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    proj, src, before = _user_folder(tmp_path)
    line = _one_error_line(jaxrun_cli("run", src, "--no-history", "--results-dir", proj))
    assert line == (f"jaxrun: error: the results folder {str(proj)!r} holds files jaxrun did not write "
                    "(logs/experiment_2019.log, outputs/model.ckpt); jaxrun never deletes or overwrites them: pass "
                    "a new or empty --results-dir, or --allow-other-files to write beside them")
    assert _snapshot(proj) == before  # not even a lock file or a manifest


@pytest.mark.slow
def test_with_allow_other_files_the_users_files_are_kept_run_after_run(tmp_path: Path) -> None:
    proj, src, before = _user_folder(tmp_path)
    write(src, "b.py", WRITES)
    for arg in ("first", "second"):
        done = jaxrun_cli("run", src, "--no-history", "--results-dir", proj, "--allow-other-files", "--", arg)
        assert done.returncode == 0, done.stderr
        now = _snapshot(proj)
        assert {k: now.get(k) for k in before} == before
    # The second run replaced the first one's own files: its output is not listed twice.
    assert sorted(os.listdir(proj / "outputs" / "b")) == ["second.txt"]
    assert (proj / "logs" / "a.stdout.log").read_text() == "1\n"


def test_a_users_file_where_a_script_of_the_run_writes_is_refused_even_when_allowed(tmp_path: Path) -> None:
    proj, src, before = _user_folder(tmp_path)
    write(proj / "logs", "a.stdout.log", "the user's own log\n")
    before = _snapshot(proj)
    line = _one_error_line(jaxrun_cli("run", src, "--no-history", "--results-dir", proj, "--allow-other-files"))
    assert "holds files jaxrun did not write where this run writes its own (logs/a.stdout.log)" in line
    assert _snapshot(proj) == before


def test_the_api_refuses_the_same_folder_and_keeps_the_files_when_allowed(tmp_path: Path) -> None:
    proj, src, before = _user_folder(tmp_path)
    with pytest.raises(UsageError, match="holds files jaxrun did not write"):
        run_batch(src, proj)
    with pytest.raises(UsageError, match="holds files jaxrun did not write"):
        jaxrun.execute_jax_script(src / "a.py", device="cpu", results_dir=proj)
    assert _snapshot(proj) == before
    assert run_batch(src, proj, allow_other_files=True).success
    result = jaxrun.execute_jax_script(src / "a.py", device="cpu", results_dir=proj, allow_other_files=True)
    assert result.success
    now = _snapshot(proj)
    assert {k: now.get(k) for k in before} == before


def test_execute_jax_script_replaces_only_its_own_earlier_files(tmp_path: Path) -> None:
    """Two calls into one folder: the second's outputs are its own (the first's went), and another
    script's files stay."""
    src, out = tmp_path / "src", tmp_path / "out"
    write(src, "b.py", WRITES)
    write(src, "a.py", QUICK)
    assert jaxrun.execute_jax_script(src / "a.py", device="cpu", results_dir=out)
    first = jaxrun.execute_jax_script(src / "b.py", device="cpu", results_dir=out, args=["first"])
    second = jaxrun.execute_jax_script(src / "b.py", device="cpu", results_dir=out, args=["second"])
    assert first.output_files == ["first.txt"] and second.output_files == ["second.txt"]
    assert (out / "script_results" / "a_result.json").is_file() and (out / "logs" / "a.stdout.log").is_file()


@pytest.mark.slow
def test_mcp_run_into_a_folder_of_the_users_files_is_a_tool_error_that_deletes_nothing(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    root = tmp_path / "root"
    proj, src, before = _user_folder(root)

    async def body() -> None:
        server = StdioServerParameters(command=sys.executable, args=["-m", "jaxrun", "mcp", "--root", str(root)],
                                       env=dict(os.environ), cwd=str(root))
        async with stdio_client(server) as (read, write_stream):
            async with ClientSession(read, write_stream) as session:
                await session.initialize()
                tools = {t.name: t for t in (await session.list_tools()).tools}
                annotations = tools["execute.run_jax_scripts"].annotations.model_dump(by_alias=True)
                assert annotations["destructiveHint"] is False
                done = (await session.call_tool("execute.run_jax_scripts", {
                    "pipeline_output_dir": "src", "device": "cpu", "results_dir": "proj"})).model_dump(by_alias=True)
                assert done["isError"]
                assert "holds files jaxrun did not write (logs/experiment_2019.log, outputs/model.ckpt)" in \
                    done["content"][0]["text"]
                allowed = (await session.call_tool("execute.run_jax_scripts", {
                    "pipeline_output_dir": "src", "device": "cpu", "results_dir": "proj",
                    "allow_other_files": True})).model_dump(by_alias=True)
                assert not allowed["isError"] and allowed["structuredContent"]["scripts_successful"] == 1, allowed

    anyio.run(body)
    now = _snapshot(proj)
    assert {k: now.get(k) for k in before} == before


@pytest.mark.slow
@pytest.mark.parametrize("link", ["outputs", "outputs/a", "script_results", "logs/a.stdout.log",
                                  "jax_execution_results.json", "jax_profiling"])
@pytest.mark.parametrize("resume", [False, True])
def test_a_symlink_at_one_of_jaxruns_names_is_refused_and_never_followed(tmp_path: Path, link: str,
                                                                         resume: bool) -> None:
    src, out, elsewhere = tmp_path / "src", tmp_path / "U4", tmp_path / "elsewhere"
    write(src, "a.py", QUICK)
    write(elsewhere, "precious.txt", "precious\n")
    write(elsewhere / "a", "precious.txt", "precious\n")
    assert jaxrun_cli("run", src, "--no-history", "--results-dir", out).returncode == 0
    target = out / link
    if target.is_dir():
        import shutil

        shutil.rmtree(target)
    else:
        target.unlink(missing_ok=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(elsewhere / "precious.txt" if "." in link.rsplit("/", 1)[-1] else elsewhere)
    before = _snapshot(elsewhere)
    line = _one_error_line(jaxrun_cli("run", src, "--no-history", "--results-dir", out,
                                      *(["--resume"] if resume else [])))
    assert f"holds a symbolic link at {link!r}" in line and "never writes or deletes through one" in line
    assert _snapshot(elsewhere) == before and target.is_symlink()


@pytest.mark.slow
def test_links_a_script_left_in_its_outputs_are_removed_not_followed(tmp_path: Path) -> None:
    src, out, elsewhere = tmp_path / "src", tmp_path / "r", tmp_path / "elsewhere"
    write(elsewhere, "precious.txt", "precious\n")
    write(src, "a.py", "if False:\n    import jax\nimport os\n"
          f"os.symlink({str(elsewhere)!r}, os.path.join(os.environ['JAXRUN_OUTPUT_DIR'], 'link'))\n")
    for _ in range(2):
        assert jaxrun_cli("run", src, "--no-history", "--results-dir", out).returncode == 0
    assert (elsewhere / "precious.txt").read_text() == "precious\n"


@pytest.mark.slow
def test_an_option_file_inside_the_results_folder_is_jaxruns_on_the_next_run(tmp_path: Path) -> None:
    src, out = tmp_path / "src", tmp_path / "r"
    write(src, "a.py", QUICK)
    for _ in range(2):
        done = jaxrun_cli("run", src, "--no-history", "--results-dir", out, "--markdown", out / "summary.md")
        assert done.returncode == 0, done.stderr
    assert "a.py" in (out / "summary.md").read_text()


@pytest.mark.slow
def test_a_folder_without_its_manifest_loses_nothing_whatever_its_result_files_name(tmp_path: Path) -> None:
    """No manifest: a result file naming a script is no proof that jaxrun wrote the files at that
    script's names now; the folder is refused in one line that says the manifest is missing, and
    with --allow-other-files nothing of it is deleted either."""
    src, out = tmp_path / "src", tmp_path / "r"
    write(src, "a.py", QUICK)
    assert jaxrun_cli("run", src, "--no-history", "--results-dir", out).returncode == 0
    (out / MANIFEST).unlink()
    (out / "script_results" / "zzz_result.json").write_bytes((out / "script_results" / "a_result.json").read_bytes())
    write(out / "logs", "zzz.stdout.log", "the user's own log\n")
    write(out / "outputs" / "zzz", "weights.bin", "the user's weights\n")
    before = _snapshot(out)
    line = _one_error_line(jaxrun_cli("run", src, "--no-history", "--results-dir", out))
    assert line.startswith(f"jaxrun: error: the results folder {str(out)!r} holds files jaxrun cannot prove it wrote (")
    assert f"it has no manifest ({MANIFEST}, jaxrun's record of what it wrote there)" in line
    assert _snapshot(out) == before
    # Beside them, jaxrun's batch files would be overwritten: refused too.
    line = _one_error_line(jaxrun_cli("run", src, "--no-history", "--results-dir", out, "--allow-other-files"))
    assert "holds files jaxrun did not write where this run writes its own (jax_device_info.json" in line
    assert f"(it has no manifest ({MANIFEST}, jaxrun's record of what it wrote there))" in line
    assert _snapshot(out) == before


@pytest.mark.slow
def test_a_users_file_in_a_scripts_outputs_or_in_place_of_its_log_is_never_deleted(tmp_path: Path) -> None:
    """jaxrun deletes only the very files a script's last run wrote (each by its size and
    modification time): a file the user put in ``outputs/<name>/``, or wrote over one of jaxrun's files, is
    refused in one line before anything runs (the script's process starts in an emptied
    ``outputs/<name>/``), and kept by a run of other scripts with --allow-other-files."""
    src, out = tmp_path / "src", tmp_path / "r"
    write(src, "b.py", WRITES)
    assert jaxrun_cli("run", src, "--no-history", "--results-dir", out, "--", "first").returncode == 0
    write(out / "outputs" / "b", "weights.bin", "the user's weights\n")
    with open(out / "logs" / "b.stdout.log", "r+") as log:  # written over in place: the same inode
        log.write("the user's notes\n")
    before = _snapshot(out)
    line = _one_error_line(jaxrun_cli("run", src, "--no-history", "--results-dir", out, "--", "second"))
    assert "holds files jaxrun did not write (logs/b.stdout.log, outputs/b/weights.bin)" in line
    line = _one_error_line(jaxrun_cli("run", src, "--no-history", "--results-dir", out, "--allow-other-files"))
    assert "where this run writes its own (logs/b.stdout.log, outputs/b/weights.bin)" in line
    assert _snapshot(out) == before
    write(tmp_path / "other", "c.py", QUICK)
    done = jaxrun_cli("run", tmp_path / "other", "--no-history", "--results-dir", out, "--allow-other-files")
    assert done.returncode == 0, done.stderr
    assert (out / "outputs" / "b" / "weights.bin").read_text() == "the user's weights\n"
    assert (out / "logs" / "b.stdout.log").read_text() == "the user's notes\n"
    assert not (out / "outputs" / "b" / "first.txt").exists()  # b's own output went with b's other files
    (out / "outputs" / "b" / "weights.bin").unlink()
    (out / "logs" / "b.stdout.log").unlink()
    done = jaxrun_cli("run", src, "--no-history", "--results-dir", out, "--", "second")
    assert done.returncode == 0, done.stderr
    assert os.listdir(out / "outputs" / "b") == ["second.txt"]


@pytest.mark.parametrize("damage", ["noise", "binary", "cut"])
def test_a_damaged_manifest_is_named_in_one_line_and_recovered_when_it_safely_can(tmp_path: Path,
                                                                                damage: str) -> None:
    """A manifest garbled, binary or cut short: the refusal says which file is damaged and what to
    do; when its readable lines still prove every file in the folder the run goes on, says so,
    and writes it anew."""
    src, out = tmp_path / "src", tmp_path / "r"
    write(src, "a.py", QUICK)
    write(src, "b.py", QUICK)
    assert run_batch(src, out).success
    manifest = (out / MANIFEST).read_bytes()
    lines = manifest.splitlines(keepends=True)
    b_claims = [n for n, line in enumerate(lines) if b'"b"' in line]
    damaged = {"noise": b"".join(lines[:b_claims[0]]) + b"}{ not a claim\n" + b"".join(lines[b_claims[-1] + 1:]),
               "binary": bytes(range(256)) * 4,
               "cut": manifest[:manifest.index(lines[b_claims[0]]) + 7]}[damage]
    (out / MANIFEST).write_bytes(damaged)
    before = _snapshot(out)
    with pytest.raises(UsageError) as refused:
        run_batch(src, out)
    said = str(refused.value)
    assert "\n" not in said and "logs/b.stdout.log" in said and "move out what you want to keep" in said
    if damage == "cut":
        assert f"its manifest {str(out / MANIFEST)!r} does not claim them (it ends in a cut line: cut short?)" in said
    else:
        assert f"its manifest {str(out / MANIFEST)!r} is damaged (" in said
    assert _snapshot(out) == before
    if damage == "binary":
        return
    # The files whose claims were lost moved out by the user: the rest is proven, the run goes on.
    for path in [*out.glob("*/b*"), *out.glob("*/.b*")]:
        if path.is_dir():
            import shutil

            shutil.rmtree(path)
        else:
            path.unlink()
    assert run_batch(src, out).success
    assert ResultsFolder(out).damage is None and ResultsFolder(out).cut is False


_NAMES = ["logs", "outputs", "script_results", "notebooks", "jax_profiling", "jax_profiling/traces",
          "logs/a.stdout.log", "logs/b.p1.attempt2.stderr.log", "logs/z.log", "outputs/a",
          "outputs/model.ckpt", "script_results/a_result.json", "script_results/zz_result.json",
          "notebooks/b.ipynb", "jax_profiling/traces/b",
          "jax_execution_results.json", "jax_execution_log.txt", "README.md", "src/train.py", "report.html"]


@st.composite
def _foreign_trees(draw):  # type: ignore[no-untyped-def]
    """A results folder of an earlier run of script ``a`` with foreign files and links added."""
    extra = draw(st.lists(st.tuples(st.sampled_from(_NAMES), st.sampled_from(["file", "link", "dirlink"])),
                          max_size=4, unique_by=lambda t: t[0]))
    return extra


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(extra=_foreign_trees())
def test_no_folder_of_foreign_files_and_links_loses_a_byte(tmp_path_factory: pytest.TempPathFactory,
                                                          extra: list[tuple[str, str]]) -> None:
    """Whatever foreign files and links are added to a results folder, the check and the clear a
    batch does before it runs (with or without --allow-other-files) delete none of them, change
    nothing outside the folder, and remove what the earlier run wrote only when nothing is refused."""
    root = tmp_path_factory.mktemp("tree")
    out, elsewhere = root / "r", root / "elsewhere"
    write(elsewhere, "precious.txt", "precious\n")
    folder = ResultsFolder(out)
    folder.compact([])
    folder.claim_scripts(["a"])
    ours = ["logs/a.stdout.log", "script_results/a_result.json", "outputs/a/out.txt", "jax_execution_log.txt"]
    for rel in ours:
        write(out, rel, "jaxrun's\n")
    added: list[str] = []
    for rel, kind in extra:
        path = out / rel
        if path.exists() or path.is_symlink() or any(p.is_symlink() or p.is_file() for p in path.parents):
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "file":
            path.write_text("user's\n")
        else:
            path.symlink_to(elsewhere if kind == "dirlink" else elsewhere / "precious.txt")
        added.append(rel)
    foreign_before = {k: v for k, v in _snapshot(out).items() if any(k == a or k.startswith(a + "/") for a in added)}
    outside = _snapshot(elsewhere)
    for allow in (False, True):
        folder = ResultsFolder(out)
        try:
            folder.check(allow_other_files=allow, names=lambda: ["a"])
        except UsageError as exc:
            assert "\n" not in str(exc)
            continue
        folder.clear()
        folder.compact([])
        assert not any((out / rel).exists() for rel in ours if rel not in added)
    now = _snapshot(out)
    assert {k: now.get(k) for k in foreign_before} == foreign_before
    assert _snapshot(elsewhere) == outside


# A script's file name may hold anything but "/" and NUL: each class of character a name may hold.
_ODD_NAMES = ["new\nline", "tab\there", "quote'single", 'quote"double', "back\\slash", "ünïcødé", "-leading",
              "semi;colon", "with space", "trailing\n", "dots.p1.attempt2"]


@pytest.mark.slow
def test_scripts_of_any_file_name_run_rerun_and_resume_in_one_folder(tmp_path: Path) -> None:
    """Every name class in one folder: the first run's files are jaxrun's on the rerun (replaced,
    not refused) and on --resume (kept); a killed writer's temporary file of such a name is too."""
    src, out = tmp_path / "src", tmp_path / "r"
    for name in _ODD_NAMES:
        (src / f"{name}.py").parent.mkdir(parents=True, exist_ok=True)
        (src / f"{name}.py").write_text(QUICK)
    first = jaxrun_cli("run", src, "--no-history", "--results-dir", out)
    assert first.returncode == 0, first.stderr
    produced = sorted(os.listdir(out / "logs"))
    assert produced == sorted(f"{n}.{s}.log" for n in _ODD_NAMES for s in ("stdout", "stderr"))
    for name in _ODD_NAMES:  # a temporary file an atomic write killed midway left
        (out / "script_results" / f".{name}_result.json.1.2.tmp").write_text("{")
    again = jaxrun_cli("run", src, "--no-history", "--results-dir", out)
    assert again.returncode == 0, again.stderr
    assert sorted(os.listdir(out / "logs")) == produced
    assert sorted(os.listdir(out / "script_results")) == sorted(f"{n}_result.json" for n in _ODD_NAMES)
    resumed = jaxrun_cli("run", src, "--no-history", "--results-dir", out, "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr
    import json

    kept = {r["script_name"]: r["kept"] for r in json.loads(resumed.stdout)["script_results"]}
    assert kept == {n: True for n in _ODD_NAMES}
    assert sorted(os.listdir(out / "logs")) == produced


def test_a_refusal_names_a_file_of_any_name_on_one_line(tmp_path: Path) -> None:
    write(tmp_path / "r" / "logs", "mine\nand\tyours.txt", "the user's\n")
    with pytest.raises(UsageError) as refused:
        ResultsFolder(tmp_path / "r").check()
    assert "(logs/mine\\nand\\tyours.txt)" in str(refused.value) and "\n" not in str(refused.value)


def test_a_damaged_manifest_whose_other_lines_prove_every_file_is_written_anew(tmp_path: Path, caplog) -> None:
    src, out = tmp_path / "src", tmp_path / "r"
    write(src, "a.py", QUICK)
    assert run_batch(src, out).success
    with open(out / MANIFEST, "ab") as manifest:
        manifest.write(b"\x00\xff garbage\n{\"script\": 7}\n")
    caplog.set_level("WARNING", logger="jaxrun")
    assert run_batch(src, out).success
    said = [r.getMessage() for r in caplog.records if "manifest" in r.getMessage()]
    assert len(said) == 1 and f"{str(out / MANIFEST)!r}, the results folder's manifest, was damaged (lines " in said[0]
    assert "it is written anew" in said[0]
    assert ResultsFolder(out).damage is None and b"garbage" not in (out / MANIFEST).read_bytes()
