"""``--junit-xml FILE``: the batch as JUnit XML, in the shape pytest writes it (one ``testsuite``
named ``jaxrun``, a ``testcase`` per script), which CI systems (GitHub Actions reporters, GitLab,
Jenkins, Azure) render as a test report.

A failed script is a ``failure`` (its error class as ``type``, the message as ``message``, the
traceback or hint as text); a script expected to fail that failed, and a script a skip setting left
out, are ``skipped``; an unexpected pass under ``--strict-xfail`` is a ``failure``; a script jaxrun
could not run at all (a batch cut off by Ctrl-C) is an ``error``. Each testcase carries the run's
figures as properties. Written once at the end, atomically.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

from jaxrun.results import result_files
from jaxrun.plan.sink import BaseSink

if TYPE_CHECKING:
    from jaxrun.outputs.declarations import OutputContext
    from jaxrun.results.models import BatchResult, ScriptResult

# Figures each testcase carries as a property, when known.
_PROPERTIES = ("device_used", "error_class", "body_time", "import_time", "jit_compile_time", "run_time", "cpu_time",
               "memory_peak", "device_memory_peak", "compile_count")
_TEXT_TAIL = 20_000  # characters of a traceback kept in the report
# Characters XML 1.0 cannot hold (a script's ANSI colours, a NUL in its message): a parser would
# reject the whole report.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text: object) -> str:
    return _NOT_XML.sub("\ufffd", str(text))


class JUnitSink(BaseSink):
    def __init__(self, path: Path) -> None:
        self.path = path

    def on_end(self, batch: "BatchResult") -> None:
        result_files.atomic_write_text(self.path, render_junit(batch))


def _classname(label: str) -> str:
    """The script's folder, dotted, as pytest names a test's module (``sims.jax``); ``jaxrun`` at the top."""
    folder = label.split(" @")[0].split("/")[:-1]
    return ".".join(["jaxrun", *folder])


def _testcase(result: "ScriptResult", label: str, strict_xfail: bool) -> ET.Element:
    # Named as every surface names the script (the view's label: sims/jax/model.py, train.ipynb).
    case = ET.Element("testcase", classname=_clean(_classname(label)), name=_clean(label),
                      time=f"{result.execution_time or 0.0:.3f}", file=_clean(result.script_path))
    properties = ET.SubElement(case, "properties")
    for name in _PROPERTIES:
        value = result.get(name)
        if value is not None:
            ET.SubElement(properties, "property", name=name, value=_clean(value))
    if result.outcome == "xfailed":
        ET.SubElement(case, "skipped", type="xfail",
                      message=_clean(f"expected to fail ({result.xfail}): {result.error_class}: {result.error_message}"))
    elif result.outcome == "xpassed" and strict_xfail:
        ET.SubElement(case, "failure", type="xpass", message=_clean(f"[XPASS(strict)] {result.xfail}"))
    elif not result.success:
        kind = "error" if result.error_class == "interrupted" else "failure"  # jaxrun stopped it, not the script
        failure = ET.SubElement(case, kind, type=str(result.error_class), message=_clean(result.error_message or ""))
        failure.text = _clean((result.traceback or result.hint or "")[-_TEXT_TAIL:])
    if result.stdout_log or result.stderr_log:
        ET.SubElement(case, "system-out").text = _clean(f"stdout: {result.stdout_log}\nstderr: {result.stderr_log}")
    return case


def render_junit(batch: "BatchResult") -> str:
    """The batch as a JUnit XML document."""
    from jaxrun.present.view import view_batch

    meta = batch.metadata
    view = view_batch(batch)
    cases, times = [], []
    for r, shown in zip(batch.script_results, view.scripts):  # one result at a time (results/held_results.py)
        cases.append(_testcase(r, shown.label, meta.strict_xfail))
        times.append(r.execution_time or 0.0)
    for skipped, said in zip(meta.skipped, view.skipped):
        case = ET.Element("testcase", classname=_clean(_classname(said.label)), name=_clean(said.label),
                          time="0.000", file=_clean(skipped.script_path))
        ET.SubElement(case, "skipped", type="skip",
                      message=_clean(skipped.reason + (f" ({skipped.origin})" if skipped.origin else "")))
        cases.append(case)
    counts = {kind: sum(1 for c in cases if c.find(kind) is not None) for kind in ("failure", "error", "skipped")}
    total_time = sum(times)
    attributes = {"name": "jaxrun", "tests": str(len(cases)), "failures": str(counts["failure"]),
                  "errors": str(counts["error"]), "skipped": str(counts["skipped"]), "time": f"{total_time:.3f}"}
    root = ET.Element("testsuites", **attributes)
    suite = ET.SubElement(root, "testsuite", **attributes, timestamp=meta.execution_timestamp, hostname=meta.host)
    properties = ET.SubElement(suite, "properties")
    for name, value in (("device_requested", meta.device_requested), ("device_used", meta.device_used),
                        ("jax_version", meta.jax_version), ("jaxrun_version", meta.jaxrun_version),
                        ("complete", meta.complete)):
        if value is not None:
            ET.SubElement(properties, "property", name=name, value=_clean(value))
    suite.extend(cases)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def for_batch(context: "OutputContext") -> JUnitSink:
    assert context.options.junit_xml is not None
    return JUnitSink(context.options.junit_xml)
