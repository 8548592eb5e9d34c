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

from jaxrun.probe import intervals

TYPE_CHECKING = False  # typing is not imported at run time (probe/events.py says why)
if TYPE_CHECKING:
    from typing import Iterable

Interval = tuple[float, float]
# The split of compilation inside imports is said to be approximate only past both of these: below,
# it cannot show in the figures (shown to 3-4 digits).
APPROXIMATE_SECONDS = 0.005
APPROXIMATE_SHARE = 0.01


def clipped(spans: Iterable[Interval], start: float, end: float) -> list[Interval]:
    return [(max(a, start), min(b, end)) for a, b in spans if b > start and a < end]


def split(
    start: float,
    end: float,
    imports: Iterable[tuple[float, float, float]],
    compiles: Iterable[Interval],
    *,
    import_still_running: bool = False,
) -> dict[str, object]:
    """``body_time``, ``import_time``, ``compile_wall_time``, ``run_time`` and ``notes`` of a body
    that ran from ``start`` to ``end``. ``imports`` are the union's blocks ``(start, end,
    seconds)`` (probe/import_timer.py: consecutive short import statements kept as one)."""
    body = max(0.0, end - start)
    blocks = list(imports)
    import_time, _ = intervals.weighted_overlap(blocks, [(start, end)])
    compiled = intervals.merged(clipped(compiles, start, end))
    inside, uncertain = intervals.weighted_overlap(blocks, compiled)
    notes: list[str] = []
    if uncertain > max(APPROXIMATE_SECONDS, APPROXIMATE_SHARE * body):
        notes.append(
            f"how much compilation ran inside short import statements is known within {uncertain * 1e3:.3g} ms: "
            "the statements of modules already loaded are timed as blocks, and compilation began or ended inside some"
        )
    compile_wall = intervals.length(compiled) - inside
    if import_still_running:
        notes.append("an import was still running in another thread when the body ended: counted up to the end")
    run_time = body - import_time - compile_wall
    if run_time < 0:  # float rounding (every piece lies inside the body), or the proportional share
        run_time = 0.0
    return {
        "body_time": body,
        "import_time": import_time,
        "compile_wall_time": compile_wall,
        "run_time": run_time,
        "notes": notes,
    }
