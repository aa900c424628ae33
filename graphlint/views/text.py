"""The text view: findings grouped by file (`path:line:col CODE message`, paths relative to the
current folder as ruff prints them), the source line with a marker under the flagged range, the
fix, then counts. Rich colours on a terminal (rich's own NO_COLOR / FORCE_COLOR handling),
plain text otherwise. Control characters in source lines and messages are shown escaped, never
sent to the terminal; tabs and wide characters keep the marker under the flagged range."""
from __future__ import annotations

import os
import unicodedata
from collections import Counter
from pathlib import Path
from typing import TextIO

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape

from graphlint.analysis.text.source import SourceError, decode, read_source, split_lines
from graphlint.report import Finding, Report
from graphlint.crosscheck import confirmation, describe, marks

TAB_SIZE = 4  # tabs in shown source lines expand to this many columns (ruff's default indent width)
# A longer source line is shown as a window around the flagged range.
MAX_SHOWN = 160
# Source lines are shown from at most this much of a file (a GL903 file may be gigabytes).
MAX_SOURCE_BYTES = 4 * 1024 * 1024


def _escaped(char: str) -> str | None:
    """The visible form of a character a terminal would act on (ESC, BEL, CR, bidi controls,
    line separators); None for an ordinary one."""
    if char == "\t":
        return None
    if unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp"):
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return None


def printable(text: str) -> str:
    """`text` with control characters escaped (tabs as spaces)."""
    if text.isprintable():
        return text
    return "".join(_escaped(char) or (" " * TAB_SIZE if char == "\t" else char) for char in text)


def shown_line(line: str, start: int, end: int) -> tuple[str, int, int]:
    """The source line as shown (tabs expanded, control characters escaped) and the terminal
    cells before and under the 0-based character range [start, end), for the marker."""
    out: list[str] = []
    cells = before = under = 0
    for index, char in enumerate(line):
        if char == "\t":
            piece = " " * (TAB_SIZE - cells % TAB_SIZE)
        else:
            piece = _escaped(char) or char
        width = cell_len(piece)
        if index < start:
            before += width
        elif index < end:
            under += width
        cells += width
        out.append(piece)
    if start >= len(line):
        before = cells + (start - len(line))
    return "".join(out), before, max(1, under)


def _source_line(root: Path, finding: Finding, cache: dict[str, list[str]],
                 sources: dict[str, str] | None = None) -> str | None:
    if finding.path not in cache:
        if sources is not None and finding.path in sources:
            cache[finding.path] = split_lines(sources[finding.path])
        else:
            try:
                # Decoded and numbered as Python does, so the caret is under the flagged line.
                cache[finding.path] = split_lines(decode(_leading_lines(root / finding.path)))
            except (OSError, SourceError):  # a FIFO, a device, /proc: never shown as source
                cache[finding.path] = []
    lines = cache[finding.path]
    return lines[finding.line - 1] if 0 < finding.line <= len(lines) else None


def _leading_lines(path: Path) -> bytes:
    """The whole lines within the first MAX_SOURCE_BYTES of a regular file."""
    data = read_source(path, MAX_SOURCE_BYTES, prefix=True)
    if len(data) == MAX_SOURCE_BYTES:
        data = data[:max(data.rfind(b"\n"), 0)]  # a line cut in the middle is not shown
    return data


def display_path(root: Path, path: str) -> str:
    """A report path (relative to the project root) as seen from the current folder. A file
    outside the root (linted with a --config from elsewhere) is in the report as it was named."""
    if path == "-" or not (root / path).exists():
        return printable(path)
    try:
        return printable(os.path.relpath(root / path, Path.cwd()))
    except ValueError:  # another drive on Windows
        return printable(path)


def _window(line: str, col: int, width: int) -> tuple[str, int, int]:
    """(shown text, caret column, caret width): a long line cut to MAX_SHOWN characters around
    the flagged range, so 20,000 findings on one long line do not print it 20,000 times."""
    if len(line) <= MAX_SHOWN:
        return line, col, width
    width = min(width, MAX_SHOWN - 8)
    start = max(0, min(col - 1 - (MAX_SHOWN - width) // 2, len(line) - MAX_SHOWN))
    shown = line[start:start + MAX_SHOWN]
    prefix = "..." if start else ""
    suffix = "..." if start + MAX_SHOWN < len(line) else ""
    return prefix + shown + suffix, col - start + len(prefix), width


class _Marked:
    """Text with rich markup where colour is on, plain otherwise: the findings block is built as
    one string and written once (a rich print per line cost 2.5 s on 5,000 findings)."""

    def __init__(self, plain: bool):
        self.plain = plain

    def __call__(self, style: str, text: str) -> str:
        return text if self.plain else f"[{style}]{escape(text)}[/]"

    def text(self, text: str) -> str:
        return text if self.plain else escape(text)


def _write_findings(console: Console, stream: TextIO, shown: list[Finding], root: Path, marked: dict,
                    sources: dict[str, str] | None) -> None:
    mark = _Marked(plain=console.color_system is None)
    out: list[str] = []
    lines_by_path: dict[str, list[str]] = {}
    current = None
    path = ""
    for finding in shown:
        if finding.path != current:
            path = display_path(root, finding.path)
            if current is not None:
                out.append("")
            out.append(mark("bold underline", path))
            current = finding.path
        style = "red" if finding.severity == "error" else "yellow"
        tag = " " + mark("dim", "(suppressed)") if finding.suppressed else ""
        seen = confirmation(marked, finding)
        if seen:
            tag += " " + mark("bold magenta", f"(confirmed at runtime: {printable(describe(seen))})")
        out.append(f"{mark.text(path)}:{finding.line}:{finding.col} {mark(f'bold {style}', printable(finding.rule))} "
                   f"{mark.text(printable(finding.message))} {mark('dim', f'[{printable(finding.name)}]')}{tag}")
        line = _source_line(root, finding, lines_by_path, sources)
        if line is not None:
            end = finding.end_col - 1 if finding.end_line == finding.line else len(line)
            end = max(end, finding.col)
            line, col, width = _window(line, finding.col, end - (finding.col - 1))
            text, before, under = shown_line(line, col - 1, col - 1 + width)
            out.append(f"  {mark('dim', f'{finding.line:>5} |')} {mark.text(text)}")
            out.append(f"  {mark('dim', '      |')} {' ' * before}{mark(style, '^' * under)}")
        if finding.reached_via:
            out.append(f"  {mark('dim', 'reached via:')} {mark.text(printable(' -> '.join(finding.reached_via)))}")
        out.append(f"  {mark('green', 'fix:')} {mark.text(printable(finding.fix))}")
    _emit(console, stream, mark, out + [""])


def _emit(console: Console, stream: TextIO, mark: _Marked, lines: list[str]) -> None:
    """Write a block of lines at once: plain to the stream, or as one rich print."""
    if mark.plain:
        stream.write("\n".join(lines) + "\n")
    else:
        console.print("\n".join(lines))


def render(report: Report, stream: TextIO, root: Path, quiet: bool = False, statistics: bool = False,
           show_suppressed: bool = False, color: bool | None = None, sources: dict[str, str] | None = None) -> None:
    """`color` None: rich decides (a terminal, NO_COLOR, FORCE_COLOR, TERM); True or False: forced.
    `sources` holds texts that are not on disk (stdin), by report path."""
    # no_color=None, not False: False would override rich's reading of NO_COLOR.
    console = Console(file=stream, highlight=False, soft_wrap=True, force_terminal=color,
                      no_color=True if color is False else None, width=200 if not stream.isatty() else None)
    static = report.static
    if static is not None:
        shown = [f for f in static.findings if show_suppressed or not f.suppressed]
        marked = marks(report.crosscheck)
        if not quiet and shown:
            _write_findings(console, stream, shown, root, marked, sources)
        if isinstance(static.extra.get("third_party"), dict) and not quiet:  # runtime --lint, check --runtime
            from graphlint.views.sections.crosscheck_text import render_third_party

            render_third_party(static.extra["third_party"], console)
        unresolved = getattr(static, "unresolved_calls", None) or []
        if unresolved and not quiet:
            # Reachable calls the call graph could not follow: the code behind them is not checked.
            mark = _Marked(plain=console.color_system is None)
            out = [f"{mark('bold', f'unresolved reachable calls ({len(unresolved)}):')} not followed, the code they "
                   "reach is not checked"]
            out.extend(f"  {mark.text(item['path'])}: {mark.text(item['caller'])}: {mark('bold', item['call'])}"
                       f" - {mark.text(item['reason'])}" for item in unresolved)
            _emit(console, stream, mark, out + [""])
        if statistics:
            counts = Counter((f.rule, f.name) for f in static.findings if not f.suppressed)
            for (code, name), count in sorted(counts.items()):
                console.print(f"{count:>6}  {code}  {name}")
    if report.runtime is not None and not quiet:  # -q: the summary line only, as for the static half
        from graphlint.views.sections.runtime_text import render_runtime

        render_runtime(report.runtime, console)
    if report.crosscheck is not None:
        from graphlint.views.sections.crosscheck_text import render_crosscheck

        render_crosscheck(report.crosscheck, console)
    for error in report.errors:
        console.print(f"[bold red]error:[/] {escape(printable(error))}")
    summary = report.summary()
    files = len(static.files) if static is not None else 0
    verdict_style = "green" if summary["verdict"] == "pass" else "red"
    parts = []
    if static is not None:
        skipped = static.extra.get("skipped_unparsed")
        unparsed = ""
        if isinstance(skipped, dict) and isinstance(skipped.get("files"), int) and skipped["files"]:
            unparsed = f" ({skipped['files']} skipped unparsed: {escape(str(skipped.get('reason', '')))})"
        parts.append(f"{files} file{'s' if files != 1 else ''} checked{unparsed}")
        parts.append(f"{summary['errors']} error{'s' if summary['errors'] != 1 else ''}")
        parts.append(f"{summary['warnings']} warning{'s' if summary['warnings'] != 1 else ''}")
        parts.append(f"{summary['suppressed']} suppressed")
    if summary.get("runtime_verdict"):
        parts.append(f"runtime {summary['runtime_verdict']}")
    console.print(f"[bold {verdict_style}]{summary['verdict'].upper()}[/]: " + ", ".join(parts))
