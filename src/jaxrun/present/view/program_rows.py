"""One row per program of a run: what XLA knows about it, as every surface that lists
programs shows it (the HTML report's Programs section, ``jaxrun run -v``); and one row per script
of what JAX copied for it implicitly and left alive (``transfer_views``).

Made on demand from the results (a large batch's view does not hold them): a program is what
JAX compiled for the script (``jit(loss)``, ``jit(grad(loss))``), its figures those of the last
executable built or loaded for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Optional

import msgspec

from jaxrun.core.formatting import fmt_bytes, plural
from jaxrun.results.program_figures import PROGRAM_FIGURES, jit_seconds

if TYPE_CHECKING:
    from jaxrun.present.view.batch_view import BatchView
    from jaxrun.results.models import BatchResult, CompileStats, ScriptResult, Transfers

FINGERPRINT_SHOWN = 12  # characters of a fingerprint a table shows (the result file has 32)


class ProgramView(msgspec.Struct, frozen=True):
    script: str  # the script's label
    program: str  # jit(loss)
    source: Optional[str]  # path:line of the function; None for JAX's own
    builds: str  # "1 compiled", "2 compiled, 1 loaded", "traced only"
    # (value, text) of each of results/program_figures.py's PROGRAM_FIGURES, in their order: "2.15 G", "-"
    figures: tuple[tuple[Optional[float], str], ...]
    fingerprint: Optional[str]
    fingerprint_text: str  # its first characters, "-"
    device_text: str  # "cpu", "NVIDIA H100 x8", "-"
    note: Optional[str]  # why a figure is missing, how the cost was counted, why the cache missed


def _builds(stats: "CompileStats") -> str:
    parts = [f"{stats.count} compiled"] if stats.count else []
    if stats.cache_hits:
        parts.append(f"{stats.cache_hits} loaded")
    if stats.variants > 1:
        parts.append(plural(stats.variants, "variant"))
    return ", ".join(parts) or "traced only"


def _note(stats: "CompileStats") -> Optional[str]:
    notes = [stats.cache_miss_reason, stats.analysis_reason,
             stats.cost.reason if stats.cost is not None and stats.cost.source is None else None]
    if not stats.count and not stats.cache_hits:
        notes.append("no executable: JAX traced it inside another program, or never ran it")
    return "; ".join(n for n in notes if n) or None


def program_view(script: str, program: str, stats: "CompileStats", result: "ScriptResult | None" = None) -> ProgramView:
    """One program's row; ``result``: its script's (for the figures that are a share of it)."""
    device = "-"
    if stats.device_kind is not None:
        device = stats.device_kind + (f" x{stats.device_count}" if (stats.device_count or 1) > 1 else "")
    return ProgramView(
        script=script, program=program, source=stats.source, builds=_builds(stats),
        figures=tuple(figure.cell(stats, result) for figure in PROGRAM_FIGURES),
        fingerprint=stats.fingerprint,
        fingerprint_text=stats.fingerprint[:FINGERPRINT_SHOWN] if stats.fingerprint else "-",
        device_text=device, note=_note(stats),
    )


def program_views(batch: "BatchResult", view: "BatchView") -> Iterator[ProgramView]:
    """Each program of each script, the scripts in the view's order, a script's programs by JIT
    time (the costliest first)."""
    for result, shown in zip(batch.script_results, view.scripts):
        for program, stats in sorted(result.compiles.items(), key=lambda item: -jit_seconds(item[1])):
            yield program_view(shown.label, program, stats, result)



class TransferView(msgspec.Struct, frozen=True):
    script: str
    host_to_device: str  # "3 (3.5 KiB)", "3 (bytes unknown)", "-" (unknown)
    device_to_host: str
    device_to_device: str
    live_arrays: str  # bytes of the arrays alive at the end of the body
    note: Optional[str]  # why a direction is unknown


def _direction(transfers: "Transfers | None") -> str:
    if transfers is None:
        return "-"
    size = "bytes unknown" if transfers.bytes is None else fmt_bytes(transfers.bytes)
    return f"{transfers.count} ({size})" if transfers.count else "0"


def transfer_views(batch: "BatchResult", view: "BatchView") -> Iterator[TransferView]:
    """Each script that used JAX: its implicit transfers by direction and its live array bytes."""
    for result, shown in zip(batch.script_results, view.scripts):
        stats = result.transfers
        if stats is None and result.live_array_bytes is None:
            continue
        yield TransferView(
            script=shown.label,
            host_to_device=_direction(stats.host_to_device if stats else None),
            device_to_host=_direction(stats.device_to_host if stats else None),
            device_to_device=_direction(stats.device_to_device if stats else None),
            live_arrays=fmt_bytes(result.live_array_bytes),
            note=stats.reason if stats else None,
        )
