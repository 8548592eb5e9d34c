"""The body's phases as one partition of its time: import, compile and run never overlap and add
up to ``body_time``.

- ``import_time``: the time during which at least one import statement ran, in any thread (the
  union of every thread's outermost imports; probe/import_timer.py), JIT work inside it included.
- ``compile_wall_time``: the time during which JAX traced, lowered or compiled (the union of its
  phases, in any thread: nested phases count once) and no import ran.
- ``run_time``: the rest of the body: the script's own work, device work it dispatched included.

Every interval is clipped to the body (``[start, end]`` on the probe's ``perf_counter``), so the
three are non-negative and sum to the body up to float rounding; nothing is clamped. Where a piece
cannot be told apart exactly, ``notes`` says so and the result carries it (``phases_note``).
"""

from __future__ import annotations

from typing import Iterable

from . import intervals

Interval = tuple[float, float]


def clipped(spans: Iterable[Interval], start: float, end: float) -> list[Interval]:
    return [(max(a, start), min(b, end)) for a, b in spans if b > start and a < end]


def split(
    start: float,
    end: float,
    imports: Iterable[Interval],
    compiles: Iterable[Interval],
    *,
    import_still_running: bool = False,
    imports_dropped: bool = False,
    import_seconds: float | None = None,
) -> dict[str, object]:
    """``body_time``, ``import_time``, ``compile_wall_time``, ``run_time`` and ``notes`` of a body
    that ran from ``start`` to ``end``. ``imports`` are the union's intervals; when the oldest were
    dropped (``imports_dropped``), ``import_seconds`` is the exact total and only the overlap with
    compilation is computed from the intervals kept."""
    body = max(0.0, end - start)
    imported = intervals.merged(clipped(imports, start, end))
    compiled = intervals.merged(clipped(compiles, start, end))
    notes: list[str] = []
    import_time = intervals.length(imported)
    if imports_dropped and import_seconds is not None:
        import_time = min(body, max(import_time, import_seconds))
        notes.append(
            "the script ran more than 50,000 separate import statements: compilation inside the "
            "oldest of them may be counted as compile time instead of import time"
        )
    compile_wall = intervals.length(compiled) - intervals.overlap(compiled, imported)
    if import_still_running:
        notes.append("an import was still running in another thread when the body ended: counted up to the end")
    run_time = body - import_time - compile_wall
    if run_time < 0:  # float rounding (every piece lies inside the body), or the approximation noted
        run_time = 0.0
    return {
        "body_time": body,
        "import_time": import_time,
        "compile_wall_time": compile_wall,
        "run_time": run_time,
        "notes": notes,
    }
