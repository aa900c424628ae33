"""The one report model that every view (text, JSON, SARIF, GitHub annotations) renders.

Data flows one way: the static engine and the runtime harness fill a `Report`; writers only
read it. `Report.to_dict()` is the JSON contract in DESIGN.md (`schema: graphlint-report/1`).
"""
from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

SCHEMA = "graphlint-report/1"


@dataclass(frozen=True)
class Finding:
    """One hazard at one source range; `suppressed` findings stay in the report."""

    rule: str
    family: str
    severity: str  # "error" | "warning"
    path: str  # relative to the project root, '/'-separated
    line: int
    col: int  # 1-based, as editors count
    end_line: int
    end_col: int
    function: str | None
    region: str
    message: str
    fix: str
    name: str = ""
    suppressed: bool = False
    suppression_reason: str | None = None
    reached_via: tuple[str, ...] = ()
    fingerprint: str | None = None
    region_reason: str = ""  # why the function is in its region (capture site, nn.Module forward, config)

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.col, self.rule, self.message)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["reached_via"] = list(self.reached_via)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Finding":
        known = {f for f in cls.__dataclass_fields__}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["reached_via"] = tuple(kwargs.get("reached_via") or ())
        return cls(**kwargs)


@dataclass
class StaticResult:
    """What `graphlint check` found: the files it read and every finding, in a stable order."""

    files: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    unresolved_calls: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    # How the run went (files analysed, cache hits, seconds): differs between runs of the same
    # tree, so it is never written into the report; the report depends only on code and config.
    stats: dict[str, Any] = field(default_factory=dict, compare=False)
    # (path, qualname) -> the Placement each function got (not written; the cross-check reads it).
    regions: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for finding in self.findings:
            if not finding.suppressed:
                counts[finding.rule] = counts.get(finding.rule, 0) + 1
        return dict(sorted(counts.items()))

    def third_party(self) -> list[Finding]:
        """Findings in the third-party code a runtime step ran (`extra["third_party"]`, written by
        `runtime --lint`): reported apart, gating only when its `gates` says so."""
        section = self.extra.get("third_party")
        if not isinstance(section, dict):
            return []
        return [Finding.from_dict(f) for f in section.get("findings") or [] if isinstance(f, dict)]

    def gated_findings(self) -> list[Finding]:
        """What the verdict counts: the project's findings, and the third-party ones when asked."""
        section = self.extra.get("third_party")
        gates = isinstance(section, dict) and bool(section.get("gates"))
        return self.findings + self.third_party() if gates else self.findings

    def to_dict(self) -> dict[str, Any]:
        data = {
            "files": self.files,
            "findings": [f.to_dict() for f in self.findings],
            "counts": self.counts(),
        }
        if self.unresolved_calls:
            data["unresolved_calls"] = self.unresolved_calls
        data.update(self.extra)
        return data


@dataclass
class Report:
    """The whole report; `static` and `runtime` are None when that half did not run."""

    tool_version: str
    config: dict[str, Any] = field(default_factory=dict)
    static: StaticResult | None = None
    # The runtime harness owns this dict's shape: {torch, devices, sync_events, allocations,
    # captures, replay, bench, phases, verdict}; a phase verdict of "fail" fails the report.
    runtime: dict[str, Any] | None = None
    errors: list[str] = field(default_factory=list)
    # The join of both halves (graphlint.crosscheck): present only when both ran.
    crosscheck: dict[str, Any] | None = None

    def summary(self) -> dict[str, Any]:
        errors = warnings = suppressed = 0
        if self.static is not None:
            for finding in self.static.gated_findings():
                if finding.suppressed:
                    suppressed += 1
                elif finding.severity == "error":
                    errors += 1
                else:
                    warnings += 1
        runtime_failed = bool(self.runtime) and self.runtime.get("verdict") == "fail"
        failed = errors > 0 or runtime_failed or bool(self.errors)
        return {
            "errors": errors,
            "warnings": warnings,
            "suppressed": suppressed,
            "runtime_verdict": None if self.runtime is None else self.runtime.get("verdict"),
            "verdict": "fail" if failed else "pass",
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "tool": {"name": "graphlint", "version": self.tool_version},
            "config": self.config,
            "static": None if self.static is None else self.static.to_dict(),
            "runtime": self.runtime,
            "crosscheck": self.crosscheck,
            "errors": self.errors,
            "summary": self.summary(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Report":
        if data.get("schema") != SCHEMA:
            raise ValueError(f"not a graphlint report (schema {data.get('schema')!r}, expected {SCHEMA!r})")
        static = None
        if data.get("static") is not None:
            raw = data["static"]
            static = StaticResult(
                files=list(raw.get("files", [])),
                findings=[Finding.from_dict(f) for f in raw.get("findings", [])],
                unresolved_calls=list(raw.get("unresolved_calls", [])),
                # baseline / diff outcomes and the like survive a round trip through the file
                extra={k: v for k, v in raw.items() if k not in ("files", "findings", "counts", "unresolved_calls")},
            )
        return cls(
            tool_version=data.get("tool", {}).get("version", "?"),
            config=data.get("config", {}),
            static=static,
            runtime=data.get("runtime"),
            errors=list(data.get("errors", [])),
            crosscheck=data.get("crosscheck") if isinstance(data.get("crosscheck"), dict) else None,
        )


class OutputError(OSError):
    """An output path graphlint will not write: one of the linted files, a block device, a
    socket, a folder, or a FIFO nobody reads."""


def _same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def write_atomic(path: str | os.PathLike[str], text: str, protect: Iterable[str | os.PathLike[str]] = ()) -> None:
    """Write `text` to `path` so that a gate never reads half a report: via a temporary file in
    the same folder, renamed over the target. A symbolic link is written through (the file it
    names is replaced, the link stays); a character device or a FIFO with a reader is written as
    a stream (/dev/null, /dev/stdout); a new file gets the umask's mode and a replaced one keeps
    its mode. Refused with OutputError: any file in `protect` (the linted inputs), block devices,
    sockets, folders, a FIFO without a reader. Other failures raise OSError (unwritable, full)."""
    target = Path(os.path.realpath(path))
    for linted in protect:
        if _same_file(target, linted):
            raise OutputError(f"{path}: refusing to overwrite a linted file with the report")
    try:
        info = os.stat(target)
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        if stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode):
            _write_stream(path, target, text)
            return
        raise OutputError(f"{path}: {file_kind(info.st_mode)}: not a file graphlint writes a report into")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fchmod(handle.fileno(), stat.S_IMODE(info.st_mode) if info is not None else 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _write_stream(path: str | os.PathLike[str], target: Path, text: str) -> None:
    try:
        # Non-blocking open: a FIFO without a reader fails at once (ENXIO) instead of hanging.
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as error:
        if error.errno == errno.ENXIO:
            raise OutputError(f"{path}: a FIFO that nobody reads") from None
        raise
    os.set_blocking(fd, True)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


class NotRegularFile(OSError):
    """A path that names a FIFO, a device, a socket or a folder where a file was expected."""


def file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return kind
    return "not a regular file"


def read_regular(path: str | os.PathLike[str], max_bytes: int | None = None, follow: bool = True) -> bytes:
    """The bytes of a regular file. A FIFO, device or socket is refused by type (NotRegularFile)
    before anything is read from it, so it can neither block nor stream forever; with `max_bytes`,
    a longer file raises NotRegularFile too; with `follow=False`, so does a symbolic link."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(f"{path}: {file_kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
        data = handle.read(-1 if max_bytes is None else max_bytes + 1)
    if max_bytes is not None and len(data) > max_bytes:
        raise NotRegularFile(f"{path}: larger than {max_bytes} bytes")
    return data


def read_json(path: str | os.PathLike[str], error: type[Exception], what: str, missing_hint: str = "") -> Any:
    """Parse a JSON file that graphlint wrote earlier (a report, a baseline); anything wrong
    raises `error` with a message that names the file. Only regular files are read."""
    try:
        return json.loads(read_regular(path).decode("utf-8"))
    except FileNotFoundError:
        raise error(f"{path}: {what} not found{missing_hint}") from None
    except NotRegularFile as problem:
        raise error(f"cannot read {what}: {problem}") from None
    except (OSError, UnicodeDecodeError) as problem:
        raise error(f"{path}: cannot read {what}: {problem}") from None
    except json.JSONDecodeError as problem:
        raise error(f"{path}: not valid JSON (a truncated {what}?): {problem}") from None
    except RecursionError:
        raise error(f"{path}: {what} nested too deeply to read") from None


def dumps(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, sort_keys=False) + "\n"
