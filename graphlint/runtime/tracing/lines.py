"""Which lines of the user's code a traced step executed: what the cross-check calls "exercised".

`sys.monitoring` where the interpreter has it (3.12+: each line is reported once, then disabled, so
the cost is per distinct line), `sys.settrace` otherwise (traces user frames only). Torch, the
standard library and the harness are not recorded (`user_frames.is_user_file`).
"""
from __future__ import annotations

import sys
from typing import Any

from graphlint.runtime import user_frames

_FREE_TOOL_IDS = (3, 4)  # 0 debugger, 1 coverage, 2 profiler and 5 optimizer are reserved by name


class LineRecorder:
    """Context manager: `lines` maps a code file name to the set of lines executed inside it."""

    def __init__(self) -> None:
        self.lines: dict[str, set[int]] = {}
        self._tool: int | None = None
        self._previous: Any = None
        self._user: dict[object, set[int] | None] = {}

    def _lines_of(self, code) -> set[int] | None:
        if code in self._user:
            return self._user[code]
        found = self.lines.setdefault(code.co_filename, set()) if user_frames.is_user_file(code.co_filename) else None
        self._user[code] = found
        return found

    def __enter__(self) -> "LineRecorder":
        monitoring = getattr(sys, "monitoring", None)
        if monitoring is not None:
            for tool in _FREE_TOOL_IDS:
                if monitoring.get_tool(tool) is None:
                    monitoring.use_tool_id(tool, "graphlint")
                    self._tool = tool
                    monitoring.register_callback(tool, monitoring.events.LINE, self._on_line)
                    monitoring.set_events(tool, monitoring.events.LINE)
                    return self
        self._previous = sys.gettrace()
        sys.settrace(self._on_call)
        return self

    def __exit__(self, *exc) -> None:
        if self._tool is not None:
            monitoring = sys.monitoring
            monitoring.set_events(self._tool, 0)
            monitoring.register_callback(self._tool, monitoring.events.LINE, None)
            monitoring.free_tool_id(self._tool)
            monitoring.restart_events()
            self._tool = None
        else:
            sys.settrace(self._previous)

    # sys.monitoring
    def _on_line(self, code, line: int):
        found = self._lines_of(code)
        if found is not None:
            found.add(line)
        return sys.monitoring.DISABLE  # seen once is enough

    # sys.settrace
    def _on_call(self, frame, event: str, arg):
        found = self._lines_of(frame.f_code)
        if found is None:
            return None

        def on_line(frame, event, arg):
            if event == "line":
                found.add(frame.f_lineno)
            return on_line

        found.add(frame.f_lineno)
        return on_line

    def code_objects(self) -> list:
        """The code objects of user files that ran inside the recorder (graphlint.runtime.tracing.record)."""
        return [code for code, found in self._user.items() if found is not None]

    def as_report(self) -> dict[str, list[int]]:
        """`{relative path: sorted lines}` for the report."""
        merged: dict[str, set[int]] = {}
        for filename, lines in self.lines.items():
            if lines:
                merged.setdefault(user_frames.relative_path(filename), set()).update(lines)
        return {path: sorted(lines) for path, lines in sorted(merged.items())}
