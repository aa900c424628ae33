"""`[tool.graphlint]` in pyproject.toml (or a graphlint.toml) -> a frozen Config. Found as ruff
finds its own: the nearest folder, from the current one upwards, holding a graphlint.toml or a
pyproject.toml *with* a [tool.graphlint] table. Unknown keys, wrong types and unreadable files
raise ConfigError naming the file and the key; the CLI turns that into exit code 2."""
from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


# Per-file limits of the static check (bytes, seconds); a file beyond one is reported (GL903).
DEFAULT_MAX_FILE_SIZE = 1024 * 1024
DEFAULT_FILE_TIMEOUT = 120.0
# The address space of each worker process (MiB). A worker uses about 700 MiB of it before any
# file (most of it the reserved analysis stack); the largest files within max-file-size take
# under 2 GiB more. Two workers at the limit fit in a 24 GB machine with room to spare.
DEFAULT_WORKER_MEMORY = 4096
# A config file is a few KB; one past this is not read.
MAX_CONFIG_BYTES = 16 * 1024 * 1024


class ConfigError(Exception):
    """A broken config: the message names the file and the key."""


@dataclass(frozen=True)
class Config:
    root: Path = Path(".")
    source: str | None = None  # the file the settings came from
    paths: tuple[str, ...] = ()
    exclude: tuple[str, ...] | None = None  # None: the default excludes (discovery.DEFAULT_EXCLUDES)
    extend_exclude: tuple[str, ...] = ()
    force_exclude: bool = False
    respect_gitignore: bool = True
    select: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: dict[str, tuple[str, ...]] = field(default_factory=dict)
    severity: dict[str, str] = field(default_factory=dict)
    host: tuple[str, ...] = ()
    entry_points: tuple[str, ...] = ()
    eager: tuple[str, ...] = ()
    runtime_target: str | None = None
    # "discover": regions from capture sites / nn.Module forwards; "sweep": every function per-step.
    regions: str = "discover"
    max_file_size: int = DEFAULT_MAX_FILE_SIZE  # 0: no limit
    file_timeout: float = DEFAULT_FILE_TIMEOUT  # 0: no limit
    worker_memory: int = DEFAULT_WORKER_MEMORY  # MiB per worker process; 0: no limit
    # Functions a real run executed (graphlint.callgraph.recorded); None: .graphlint/regions.json if present.
    region_file: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "paths": list(self.paths),
            "exclude": list(self.exclude) if self.exclude is not None else None,
            "extend-exclude": list(self.extend_exclude),
            "force-exclude": self.force_exclude,
            "respect-gitignore": self.respect_gitignore,
            "select": list(self.select),
            "extend-select": list(self.extend_select),
            "ignore": list(self.ignore),
            "per-file-ignores": {k: list(v) for k, v in self.per_file_ignores.items()},
            "severity": dict(self.severity),
            "host": list(self.host),
            "entry-points": list(self.entry_points),
            "eager": list(self.eager),
            "regions": self.regions,
        }


# key -> (Config field, expected type description, converter)
def _str_list(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def _str_map_of_lists(value: Any) -> dict[str, tuple[str, ...]] | None:
    if not isinstance(value, dict):
        return None
    out = {}
    for key, item in value.items():
        converted = _str_list(item)
        if converted is None:
            return None
        out[key] = converted
    return out


def _severity_map(value: Any) -> dict[str, str] | None:
    if not isinstance(value, dict):
        return None
    if not all(isinstance(v, str) and v in ("error", "warning", "off") for v in value.values()):
        return None
    return {k.upper(): v for k, v in value.items()}


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _regions_mode(value: Any) -> str | None:
    return value if value in ("discover", "sweep") else None


def _in_range(low: float, high: float, integer: bool = False, off: bool = True) -> Any:
    """A converter for a number from `low` to `high` (and 0 for "no limit" when `off`);
    booleans, NaN and anything outside are refused (None)."""
    def convert(value: Any) -> int | float | None:
        if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
            return None
        if (off and value == 0) or low <= value <= high:  # NaN compares false: refused
            return value
        return None
    return convert


def _range_text(what: str, low: float, high: float, off: bool = True) -> str:
    return f"{what} from {low:,} to {high:,}" + (" (0: no limit)" if off else "")


_KEYS = {
    "paths": ("paths", "a list of strings", _str_list),
    "exclude": ("exclude", "a list of glob strings", _str_list),
    "extend-exclude": ("extend_exclude", "a list of glob strings", _str_list),
    "force-exclude": ("force_exclude", "true or false", _flag),
    "respect-gitignore": ("respect_gitignore", "true or false", _flag),
    "select": ("select", "a list of rule codes or prefixes", _str_list),
    "extend-select": ("extend_select", "a list of rule codes or prefixes", _str_list),
    "ignore": ("ignore", "a list of rule codes or prefixes", _str_list),
    "per-file-ignores": ("per_file_ignores", "a table of glob = [codes]", _str_map_of_lists),
    "severity": ("severity", 'a table of CODE = "error" | "warning" | "off"', _severity_map),
    "host": ("host", "a list of function names (module:Qualified.name or Qualified.name)", _str_list),
    "entry-points": ("entry_points", "a list of module:Qualified.name", _str_list),
    "eager": ("eager", "a list of module:Qualified.name", _str_list),
    "runtime-target": ("runtime_target", "a string module:callable", _string),
    "regions": ("regions", '"discover" or "sweep"', _regions_mode),
    "max-file-size": ("max_file_size", _range_text("a number of bytes (an integer)", 1, 1 << 30),
                      _in_range(1, 1 << 30, integer=True)),
    "file-timeout": ("file_timeout", _range_text("a number of seconds", 0.001, 86_400), _in_range(0.001, 86_400)),
    "worker-memory": ("worker_memory", _range_text("a number of MiB (an integer)", 256, 1 << 20),
                      _in_range(256, 1 << 20, integer=True)),
    "region-file": ("region_file", "a path to a region file (graphlint runtime --record-regions)", _string),
}


CONFIG_NAMES = ("graphlint.toml", "pyproject.toml")  # in one folder, graphlint.toml wins


def _read_toml(path: Path) -> dict[str, Any]:
    from graphlint.io.reading import read_source

    try:
        text = read_source(path, MAX_CONFIG_BYTES).decode("utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read config file: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 text: {error}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    except RecursionError:  # tomllib parses nested arrays and tables recursively
        raise ConfigError(f"{path}: not valid TOML for graphlint: nested too deeply") from None
    except Exception as error:  # noqa: BLE001 - any failure of the parser names the file
        raise ConfigError(f"{path}: cannot parse config file: {type(error).__name__}: {error}") from None


def _section(data: dict[str, Any], path: Path) -> dict[str, Any] | None:
    """The graphlint table of a parsed file; None for a pyproject.toml that has none."""
    tool = data.get("tool")
    if tool is not None and not isinstance(tool, dict):
        raise ConfigError(f"{path}: key 'tool' must be a table, got {type(tool).__name__} {tool!r}")
    section = (tool or {}).get("graphlint")
    if section is None and path.name != "pyproject.toml":
        section = {k: v for k, v in data.items() if k != "tool"}  # graphlint.toml: keys at top level
    if section is not None and not isinstance(section, dict):
        raise ConfigError(f"{path}: key 'tool.graphlint' must be a table, got {type(section).__name__} {section!r}")
    return section


def find_config(start: Path) -> tuple[Path, dict[str, Any]] | None:
    """The nearest graphlint.toml, or pyproject.toml with [tool.graphlint], from `start` up."""
    for folder in [start, *start.parents]:
        for name in CONFIG_NAMES:
            candidate = folder / name
            try:
                if not candidate.is_file():
                    continue
            except OSError:
                continue  # a folder we may not look into is not a config
            # A pyproject.toml without [tool.graphlint] is another tool's: keep looking upwards,
            # as ruff does. One that is not valid TOML (or has `tool = 5`) is an error, as in ruff.
            section = _section(_read_toml(candidate), candidate)
            if section is not None:
                return candidate, section
    return None


def find_pyproject(start: Path) -> Path | None:
    """The config file `load` would read from `start` (kept for callers of the old name)."""
    found = find_config(start)
    return found[0] if found else None


def load(config_file: str | Path | None = None, start: Path | None = None) -> Config:
    """Read the given file, or the config discovered from `start` (default: the current folder)."""
    start = (start or Path.cwd()).resolve()
    if config_file is not None:
        path = Path(config_file)
        if not path.is_file():  # a FIFO or a device is never opened: it could block or never end
            what = "not a regular file" if path.exists() else "config file not found"
            raise ConfigError(f"{path}: {what}")
        section = _section(_read_toml(path), path) or {}
    else:
        found = find_config(start)
        if found is None:
            return Config(root=start)
        path, section = found
    return from_mapping(section, path)


def from_mapping(section: dict[str, Any], path: Path) -> Config:
    values: dict[str, Any] = {}
    for key, raw in section.items():
        if key not in _KEYS:
            known = ", ".join(sorted(_KEYS))
            raise ConfigError(f"{path}: unknown key '{key}' in [tool.graphlint] (known keys: {known})")
        attr, expected, convert = _KEYS[key]
        converted = convert(raw)
        if converted is None:
            raise ConfigError(f"{path}: key '{key}' must be {expected}, got {type(raw).__name__} {raw!r}")
        values[attr] = converted
    return Config(root=path.parent.resolve(), source=str(path), **values)
