"""What to do after a failed attempt: retry on the same device, fall back to CPU, or stop.

A pure decision, kept apart from process handling so it can be tested exhaustively.
"""

from __future__ import annotations

from typing import Literal

from .classify import is_transient
from .config import RETRY_BACKOFF_BASE, RETRY_BACKOFF_MAX

Action = Literal["retry", "fallback", "stop"]


def backoff_seconds(retry_number: int, base: float = RETRY_BACKOFF_BASE, cap: float = RETRY_BACKOFF_MAX) -> float:
    """Exponential backoff: base, 2*base, 4*base, ... capped (retry_number starts at 1)."""
    return min(cap, base * 2 ** max(0, retry_number - 1))


def next_action(
    error_class: str | None,
    platform: str,
    *,
    retries_left: int,
    fallback: bool,
    launched: bool,
) -> Action:
    """Decide after a failure on ``platform``.

    Only transient classes are acted on. A platform the device facts call absent (``launched``
    False) is not retried, as waiting will not install a driver; it falls straight back to CPU.
    """
    if error_class is None or error_class == "interrupted" or not is_transient(error_class, platform):
        return "stop"
    if launched and retries_left > 0:
        return "retry"
    if fallback and platform != "cpu":
        return "fallback"
    return "stop"
