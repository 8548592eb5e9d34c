"""A notebook's JSON, read for what jaxrun uses of it, in bounded memory.

jaxrun needs of a notebook only its cells' types, its code cells' source, ``metadata.jaxrun``
and ``nbformat``. The bulk of a large notebook is elsewhere: outputs (images in base64, long
printed text), attachments, widget state. ``json.loads`` builds all of it (a 200 MB notebook of
plots: 1 s and 630 MB), so this reader walks the file forward, :data:`CHUNK` bytes at a time,
and decodes with ``json`` only the values it keeps. Every other value is skipped by its
structure: a string to its closing quote (``bytes.find``), brackets matched, and between them
only what JSON allows there (numbers, ``true``, ``false``, ``null``, ``,``, ``:``, white
space); so a cut file, or one holding a merge's ``<<<<<<<``, is an error at its offset.
Memory is a chunk and what is kept; the caller bounds the bytes read (``size_limit``) and the
code kept (``code_limit``: past it no further source is kept, and the result says so).

Standard library only: the probe reads notebooks with it, also under ``--python`` (3.10 up).
"""

from __future__ import annotations

import codecs
import json
import re
import sys
from typing import Any, Callable, NamedTuple

#: Bytes read at once.
CHUNK = 1 << 20
# A skipped string's escapes are judged on the bytes kept before its closing quote: a run of
# more backslashes than this before a quote cannot be told escaped or not (an error).
_TAIL = 1 << 16
# A literal (a number, true, false, null) is matched whole once this many bytes are at hand.
_LITERAL_BYTES = 64

_WS = re.compile(rb"[ \t\r\n]*")
# Between structural characters: white space, separators, numbers, true/false/null.
_FILLER = rb"[ \t\r\n,:0-9.eE+\-a-z]"
# Filler and short strings in one match, so that an output of a million short lines is not a
# Python loop a line. A longer string, or one cut by the chunk's end, stops the match at its
# quote, and string_end finds its end. Possessive (3.11 up): no backtracking state kept per
# token; before 3.11, at most 4096 tokens a match (the state grows with each).
_RUN_BOUNDED = re.compile(rb"(?:" + _FILLER + rb"+|\"[^\"\\]{0,4096}(?:\\.[^\"\\]{0,4096}){0,64}\"){0,4096}", re.S)
_RUN = (re.compile(rb"(?:" + _FILLER + rb"++|\"[^\"\\]{0,4096}+(?:\\.[^\"\\]{0,4096}+)*+\")*+", re.S)
        if sys.version_info >= (3, 11) else _RUN_BOUNDED)
_FILLER_BYTES = frozenset(b" \t\r\n,:0123456789.eE+-abcdefghijklmnopqrstuvwxyz")
_LITERAL = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|true|false|null")
_CLOSING = {ord("["): ord("]"), ord("{"): ord("}")}
_QUOTE, _BACKSLASH, _OPEN_OBJECT = ord('"'), ord("\\"), ord("{")
_BOM = b"\xef\xbb\xbf"
_NOT_PLAIN = re.compile(rb"[\x00-\x1f\\]")


class JsonError(ValueError):
    """Not JSON at byte ``offset`` of the file (:func:`position` gives its line and column),
    ``what`` saying more when it can ("the file ends inside a string")."""

    def __init__(self, what: str | None, offset: int) -> None:
        super().__init__(f"not JSON at byte {offset}" + (f": {what}" if what else ""))
        self.what, self.offset = what, offset


class TooLarge(ValueError):
    """The file holds more than ``size_limit`` bytes."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit} bytes")
        self.limit = limit


class Notebook(NamedTuple):
    data: dict[str, Any]  # {"cells": [{"cell_type", "source"} | None, ...], "metadata": {"jaxrun"?}, "nbformat"?}
    code_cut: bool  # code_limit reached: the code cells past it are kept without their source


class _Reader:
    """The file read forward; positions are offsets in the file. The bytes before the lowest
    position still needed (the value being walked, or a kept one: ``pins``) are dropped."""

    def __init__(self, read: Callable[[int], bytes], size_limit: int | None) -> None:
        self._read, self._size_limit = read, size_limit
        self.buf = bytearray()
        self.base = 0  # the file offset of buf[0]
        self.eof = False
        self.pins: list[int] = []  # kept from the first one on (values being decoded)
        self.pin_cap: int | None = None  # the most the first pin may hold; past it, pins are let go
        self.overflowed = False

    @property
    def end(self) -> int:
        return self.base + len(self.buf)

    def more(self, keep_from: int) -> bool:
        """Read the next chunk, dropping what comes before ``keep_from`` (and the first pin)."""
        if self.eof:
            return False
        chunk = self._read(CHUNK)
        if not chunk:
            self.eof = True
            return False
        if self._size_limit is not None and self.end + len(chunk) > self._size_limit:
            raise TooLarge(self._size_limit)
        if self.pins and self.pin_cap is not None and self.end + len(chunk) - self.pins[0] > self.pin_cap:
            self.pins.clear()
            self.overflowed = True
        drop = (min(keep_from, self.pins[0]) if self.pins else keep_from) - self.base
        if drop > 0:
            del self.buf[:drop]
            self.base += drop
        self.buf += chunk
        return True

    def byte(self, pos: int) -> int | None:
        """The byte at ``pos``; None past the file's end."""
        while pos >= self.end:
            if not self.more(pos):
                return None
        return self.buf[pos - self.base]

    def run(self, pattern: re.Pattern[bytes], pos: int) -> int:
        """The end of ``pattern``'s run of tokens at ``pos``, across chunks (a run that reaches a
        chunk's end goes on in the next: its tokens are single bytes or whole strings)."""
        while True:
            end = pattern.match(self.buf, pos - self.base).end() + self.base  # type: ignore[union-attr]
            if end < self.end or not self.more(end):
                return end
            pos = end

    def ws(self, pos: int) -> int:
        return self.run(_WS, pos)

    def string_end(self, pos: int) -> int:
        """The offset past the string whose quote is at ``pos``."""
        at = pos + 1
        while True:
            found = self.buf.find(b'"', at - self.base)
            if found < 0:
                at = self.end
                if not self.more(max(pos, self.end - _TAIL)):
                    raise JsonError("the file ends inside a string", self.end)
                continue
            floor = max(pos + 1, self.base) - self.base  # no byte before the string's own
            k = found
            while k > floor and self.buf[k - 1] == _BACKSLASH:
                k -= 1
            if k == floor and self.base + floor > pos + 1:
                raise JsonError(f"more than {_TAIL} backslashes in a row", self.base + found)
            if (found - k) % 2 == 0:
                return self.base + found + 1
            at = self.base + found + 1

    def value_end(self, pos: int) -> int:
        """The offset past the value at ``pos``, its structure checked, nothing decoded."""
        first = self.byte(pos)
        if first == _QUOTE:
            return self.string_end(pos)
        if first in _CLOSING:
            return self._container_end(pos)
        while self.end - pos < _LITERAL_BYTES and self.more(pos):
            pass
        match = _LITERAL.match(self.buf, pos - self.base)
        if match is None:
            raise JsonError("the file ends too soon" if first is None else None, pos)
        return match.end() + self.base

    def _container_end(self, pos: int) -> int:
        expected = [_CLOSING[self.buf[pos - self.base]]]
        pos += 1
        while True:
            pos = self.run(_RUN, pos)
            char = self.byte(pos)
            if char == _QUOTE:
                pos = self.string_end(pos)
            elif char in _CLOSING:
                expected.append(_CLOSING[char])
                pos += 1
            elif char is not None and char == expected[-1]:
                expected.pop()
                pos += 1
                if not expected:
                    return pos
            elif char not in _FILLER_BYTES:  # filler: a run that stopped at its most tokens goes on
                raise JsonError("the file ends too soon" if char is None else None, pos)

    def load(self, pos: int) -> tuple[Any, int]:
        """The value at ``pos``, decoded by ``json``, and the offset past it."""
        self.pins.append(pos)
        try:
            end = self.value_end(pos)
            return decode(bytes(self.buf[pos - self.base:end - self.base]), pos), end
        finally:
            self.pins.pop()

    def _key(self, pos: int) -> tuple[Any, int]:
        """The key (a string) at ``pos`` and the offset past it; most hold no escape (read as is)."""
        self.pins.append(pos)
        try:
            end = self.string_end(pos)
            raw = bytes(self.buf[pos + 1 - self.base:end - 1 - self.base])
        finally:
            self.pins.pop()
        if _NOT_PLAIN.search(raw):  # an escape, or a control character json refuses
            return decode(b'"' + raw + b'"', pos), end
        try:
            return raw.decode("utf-8"), end
        except UnicodeDecodeError:
            raise JsonError("not UTF-8", pos) from None

    def members(self, pos: int, on: Callable[[str, int], int]) -> int:
        """Walk the object at ``pos``: ``on(key, offset of its value)`` gives the offset past the
        value (``value_end`` skips it); returns the offset past the object."""
        pos = self.ws(pos + 1)
        if self.byte(pos) == ord("}"):
            return pos + 1
        while True:
            if self.byte(pos) != _QUOTE:
                raise JsonError("the file ends too soon" if self.byte(pos) is None else None, pos)
            key, pos = self._key(pos)
            pos = self.ws(pos)
            if self.byte(pos) != ord(":"):
                raise JsonError(None, pos)
            pos = self.ws(on(key, self.ws(pos + 1)))
            char = self.byte(pos)
            if char == ord("}"):
                return pos + 1
            if char != ord(","):
                raise JsonError("the file ends too soon" if char is None else None, pos)
            pos = self.ws(pos + 1)

    def items(self, pos: int, on: Callable[[int], int]) -> int:
        """Walk the array at ``pos``: ``on(offset of an item)`` gives the offset past it."""
        pos = self.ws(pos + 1)
        if self.byte(pos) == ord("]"):
            return pos + 1
        while True:
            pos = self.ws(on(pos))
            char = self.byte(pos)
            if char == ord("]"):
                return pos + 1
            if char != ord(","):
                raise JsonError("the file ends too soon" if char is None else None, pos)
            pos = self.ws(pos + 1)


def decode(data: bytes, offset: int = 0) -> Any:
    """``json.loads(data)``; a :class:`JsonError` at its offset (``data`` starts at ``offset``)."""
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        raise JsonError(None, offset + len(exc.doc[:exc.pos].encode("utf-8", "surrogatepass"))
                        if isinstance(exc.doc, str) else offset + exc.pos) from None
    except (UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise JsonError(type(exc).__name__, offset) from None


def read_notebook(read: Callable[[int], bytes], *, size_limit: int | None = None,
                  code_limit: int | None = None) -> Notebook:
    """What jaxrun uses of the notebook that ``read(n)`` gives (a binary file's ``read``).
    Raises :class:`JsonError` and :class:`TooLarge` (past ``size_limit`` bytes)."""
    reader = _Reader(read, size_limit)
    data: dict[str, Any] = {}
    kept = 0  # bytes of code source kept
    cut = False

    def cell(pos: int) -> int:
        nonlocal kept, cut
        if reader.byte(pos) != _OPEN_OBJECT:
            data["cells"].append(None)
            return reader.value_end(pos)
        fields: dict[str, Any] = {}
        source: list[Any] = []  # [its bytes, its offset], or [None] when past code_limit

        def member(key: str, at: int) -> int:
            if key == "cell_type":
                fields["cell_type"], end = reader.load(at)
                return end
            if key != "source" or fields.get("cell_type", "code") != "code" or cut:
                return reader.value_end(at)
            # Kept while the cell may be code (its type may come after it), up to code_limit.
            reader.pins.append(at)
            reader.pin_cap = None if code_limit is None else code_limit - kept
            try:
                end = reader.value_end(at)
            finally:
                reader.pin_cap = None
            if reader.overflowed:
                reader.overflowed = False
                source[:] = [None]
            else:
                source[:] = [bytes(reader.buf[at - reader.base:end - reader.base]), at]
                reader.pins.pop()
            return end

        end = reader.members(pos, member)
        if fields.get("cell_type") == "code" and source:
            if source[0] is None or (code_limit is not None and kept + len(source[0]) > code_limit):
                cut = True
            else:
                fields["source"] = decode(source[0], source[1])
                kept += len(source[0])
        data["cells"].append(fields)
        return end

    def metadata(key: str, at: int) -> int:
        if key != "jaxrun":
            return reader.value_end(at)
        data["metadata"]["jaxrun"], end = reader.load(at)
        return end

    def top(key: str, at: int) -> int:
        if key == "cells" and reader.byte(at) == ord("["):
            data["cells"] = []
            return reader.items(at, cell)
        if key == "metadata" and reader.byte(at) == _OPEN_OBJECT:
            data["metadata"] = {}
            return reader.members(at, metadata)
        if key == "nbformat":
            data["nbformat"], end = reader.load(at)
            return end
        return reader.value_end(at)

    start = 3 if reader.byte(0) == _BOM[0] and bytes(reader.buf[:3]) == _BOM else 0
    pos = reader.ws(start)
    if reader.byte(pos) == _OPEN_OBJECT:
        end = reader.members(pos, top)
    else:
        end = reader.value_end(pos)  # JSON, but not a notebook: data has no cells
    end = reader.ws(end)
    if reader.byte(end) is not None:
        raise JsonError("more after the notebook's end", end)
    return Notebook(data, cut)


def position(offset: int, read: Callable[[int], bytes]) -> tuple[int, int]:
    """(line, column) of byte ``offset`` of what ``read`` gives, from 1, the column in characters
    as ``json`` counts them (the file read again: an error is rare, the reader counts no lines)."""
    line, column, seen = 1, 0, 0
    characters = codecs.getincrementaldecoder("utf-8")("replace")
    while seen < offset:
        chunk = read(min(CHUNK, offset - seen))
        if not chunk:
            break
        seen += len(chunk)
        newlines = chunk.count(b"\n")
        if newlines:
            line += newlines
            characters.reset()
            chunk, column = chunk[chunk.rfind(b"\n") + 1:], 0
        column += len(characters.decode(chunk))
    return line, column + len(characters.decode(b"", final=True)) + 1
