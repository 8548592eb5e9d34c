"""Figures as people read them, with their units: shared by every surface (the CLI's tables, the
progress lines, Markdown, the HTML report, the exports people paste elsewhere; jaxrun/view decides
what is shown, this how each kind of value is written), so that all show a figure the same way.
Pure text, no rich; unknown is "-"."""

from __future__ import annotations

from typing import Iterable, Optional

__all__ = ["fmt", "fmt_seconds", "fmt_p", "fmt_kind", "fmt_ratio", "fmt_ratio_ci", "one_line", "significant",
           "shorten_middle", "plural", "counted", "of_total", "fmt_bytes", "fmt_count", "listed", "left_out"]


def fmt_seconds(value: float | None) -> str:
    """Seconds with a unit that keeps 3 significant figures (µs for sub-millisecond values)."""
    if value is None:
        return "-"
    if abs(value) < 1e-3:
        return f"{value * 1e6:.3g} µs"
    if abs(value) < 1:
        return f"{value * 1e3:.3g} ms"
    return f"{value:.3g} s"


def fmt_p(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2g}" if value >= 1e-4 else f"{value:.1e}"


def fmt_kind(kind: str, value: float | None) -> str:
    """A figure of ``kind`` (jaxrun.results.figures: seconds, mib, bytes, count, ratio, joules,
    watts) with its unit: MiB are 2^20 bytes, as memory_peak holds them."""
    if value is None:
        return "-"
    if kind == "seconds":
        return fmt_seconds(value)
    if kind == "mib":
        return f"{significant(value, 4)} MiB"
    if kind == "bytes":
        return fmt_bytes(value)
    if kind == "ratio":
        return significant(value, 3)
    if kind == "joules":
        return f"{significant(value, 4)} J"
    if kind == "watts":
        return f"{significant(value, 3)} W"
    return fmt_count(value)


def fmt_commit(commit: str | None, dirty: bool | None = None) -> str:
    """A git commit as a table shows it: its first 10 digits, ``+dirty`` with uncommitted changes."""
    return "-" if commit is None else commit[:10] + ("+dirty" if dirty else "")


def fmt_change(value: float | None, low: float | None = None, high: float | None = None) -> str:
    """A relative change (0.152: "+15.2 %"), with its interval when both ends are known."""
    if value is None:
        return "-"
    said = f"{value * 100:+.1f} %"
    return said if low is None or high is None else f"{said} ({low * 100:+.1f} to {high * 100:+.1f} %)"


def fmt_share(value: float | None) -> str:
    """A fraction as a percentage (0.052: "5.2 %": a series' noise, the smallest change a comparison
    could have found); "-" when unknown."""
    return "-" if value is None else f"{value * 100:.1f} %"


def fmt_ratio(value: float | None) -> str:
    """A NEW / BASE ratio, as ``jaxrun compare`` prints it."""
    return "-" if value is None else f"{value:.3f}"


def fmt_ratio_ci(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"{low:.3f} – {high:.3f}"


ELLIPSIS = "…"


def fmt(value: Optional[float], digits: int = 2) -> str:
    """A number with ``digits`` decimals; unknown is "-", never 0."""
    return "-" if value is None else f"{value:.{digits}f}"


def one_line(text: Optional[str]) -> Optional[str]:
    """A message on one line (a multi-line JAX error would break one-line-per-event output): its
    first non-empty line, and how many more the full text has."""
    if text is None:
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    more = len(lines) - 1
    return lines[0] + (f" (+{more} more line{'s' if more > 1 else ''})" if more else "")


def shorten_middle(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut in the middle (the start and the end of a path
    or a name say most: ``gnn_pipeline/…/tiger_pomdp.py``)."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    if width == 1:
        return ELLIPSIS
    keep = width - 1
    head = (keep + 1) // 2
    return text[:head] + ELLIPSIS + text[len(text) - (keep - head):]


def listed(items: Iterable[object], limit: int, sep: str = ", ", *, last: int = 0, what: str = "more") -> str:
    """At most ``limit`` of ``items`` joined by ``sep``, saying how many it left out: a list that
    is cut never looks whole. ``a, b, c and 3 more``; with ``last`` the last ones are kept too and
    the count stands where the cut is (``1 -> 2 -> (5 more) -> 8 -> 9``; a log's tail with
    ``last=limit``: ``(12 more lines)`` first). ``what`` names them, in the plural (``more lines``),
    said in the singular for one (``1 more line``)."""
    shown = [str(item) for item in items]
    left = len(shown) - limit
    if left <= 0:
        return sep.join(shown)
    last = min(max(last, 0), limit)
    if last:
        return sep.join([*shown[:limit - last], f"({counted(left, what)})", *shown[len(shown) - last:]])
    return sep.join(shown[:limit]) + left_out(left, what)


def joined(items: Iterable[object], word: str = "and") -> str:
    """Every one of ``items`` as a sentence lists them: ``a, b and c`` (``word``: "or")."""
    shown = [str(item) for item in items]
    return f"{', '.join(shown[:-1])} {word} {shown[-1]}" if len(shown) > 1 else "".join(shown)


def left_out(count: int, what: str = "more") -> str:
    """`` and 3 more`` after what is shown of a list too long to hold (a report's rows), or "";
    ``what`` as :func:`counted` takes it."""
    return f" and {counted(count, what)}" if count > 0 else ""


def counted(count: int, what: str) -> str:
    """``count`` and ``what`` (named in the plural, ``other reasons``, ``more, not shown here``)
    agreeing in number: ``1 other reason``, ``2 other reasons``. The noun is the last word before
    any comma; a word that is no noun (``more``) stays as it is."""
    head, comma, tail = what.partition(",")
    words = head.split(" ")
    if count == 1:
        words[-1] = _singular(words[-1])
    return f"{count} {' '.join(words)}{comma}{tail}"


def _singular(word: str) -> str:
    if word.endswith(("sses", "shes", "ches", "xes", "zes")):
        return word[:-2]
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def of_total(total: int | None) -> str:
    """The n of ``[k/n]``: ``?`` while it is not known (a large batch's plan still reading its folder)."""
    return "?" if total is None else str(total)


def plural(n: int, word: str, words: Optional[str] = None) -> str:
    """``n`` and ``word`` (named in the singular: ``script``, ``process``, ``earlier run``)
    agreeing in number: ``1 script``, ``2 scripts``, ``0 processes``; ``words``: an irregular
    plural. Every count said with a noun goes through it (or :func:`counted`), never ``script(s)``."""
    if n == 1:
        return f"{n} {word}"
    if words is None:
        words = word + ("es" if word.endswith(("s", "sh", "ch", "x", "z")) else "s")
    return f"{n} {words}"


def fmt_bytes(value: float | None, digits: int = 3) -> str:
    """Bytes in binary units with ``digits`` significant figures (``9.1 GiB``, ``512 MiB``, ``100 B``)."""
    if value is None:
        return "-"
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= scale:
            return f"{significant(value / scale, digits)} {unit}"
    return f"{int(value)} B"


def significant(value: float, digits: int) -> str:
    """``value`` to ``digits`` significant figures, never in exponent form: 1023 MiB is ``1023``
    at 3 figures, not ``1.02e+03``."""
    text = f"{value:.{digits}g}"
    return f"{value:.0f}" if "e" in text else text


def fmt_count(value: float | None, unit: str = "", digits: int = 3) -> str:
    """A count or a rate with an SI prefix and ``digits`` significant figures (``2.15 G``,
    ``388 k``, ``12``; with ``unit``: ``1.2 TFLOP/s``)."""
    if value is None:
        return "-"
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g}" + (f" {unit}" if unit else "")


def readable(text: str) -> str:
    """``text`` on one line as a reader sees it: a character that prints nothing or moves the
    cursor (a newline or tab in a file's name) written as its escape, ``new\\nline.py``, so that a
    name never breaks a table's row, a progress line or a refusal in two."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
