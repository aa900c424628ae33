"""`[tool.graphlint]` in pyproject.toml -> a frozen Config. Unknown keys and wrong types raise
ConfigError naming the file and the key; the CLI turns that into exit code 2."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


# Per-file limits of the static check (bytes, seconds); a file beyond one is reported (GL902).
DEFAULT_MAX_FILE_SIZE = 1024 * 1024
DEFAULT_FILE_TIMEOUT = 120.0


class ConfigError(Exception):
    """A broken config: the message names the file and the key."""


@dataclass(frozen=True)
class Config:
    root: Path = Path(".")
    source: str | None = None  # the file the settings came from
    paths: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: dict[str, tuple[str, ...]] = field(default_factory=dict)
    severity: dict[str, str] = field(default_factory=dict)
    host: tuple[str, ...] = ()
    entry_points: tuple[str, ...] = ()
    eager: tuple[str, ...] = ()
    runtime_target: str | None = None
    max_file_size: int = DEFAULT_MAX_FILE_SIZE  # 0: no limit
    file_timeout: float = DEFAULT_FILE_TIMEOUT  # 0: no limit

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "paths": list(self.paths),
            "exclude": list(self.exclude),
            "select": list(self.select),
            "ignore": list(self.ignore),
            "per-file-ignores": {k: list(v) for k, v in self.per_file_ignores.items()},
            "severity": dict(self.severity),
            "host": list(self.host),
            "entry-points": list(self.entry_points),
            "eager": list(self.eager),
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


def _non_negative(value: Any) -> int | float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return value
    return None


_KEYS = {
    "paths": ("paths", "a list of strings", _str_list),
    "exclude": ("exclude", "a list of glob strings", _str_list),
    "select": ("select", "a list of rule codes or prefixes", _str_list),
    "ignore": ("ignore", "a list of rule codes or prefixes", _str_list),
    "per-file-ignores": ("per_file_ignores", "a table of glob = [codes]", _str_map_of_lists),
    "severity": ("severity", 'a table of CODE = "error" | "warning" | "off"', _severity_map),
    "host": ("host", "a list of function names (module:Qualified.name or Qualified.name)", _str_list),
    "entry-points": ("entry_points", "a list of module:Qualified.name", _str_list),
    "eager": ("eager", "a list of module:Qualified.name", _str_list),
    "runtime-target": ("runtime_target", "a string module:callable", _string),
    "max-file-size": ("max_file_size", "a number of bytes (0: no limit)", _non_negative),
    "file-timeout": ("file_timeout", "a number of seconds (0: no limit)", _non_negative),
}


def find_pyproject(start: Path) -> Path | None:
    for folder in [start, *start.parents]:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load(config_file: str | Path | None = None, start: Path | None = None) -> Config:
    """Read `[tool.graphlint]` from the given file or the nearest pyproject.toml upwards."""
    start = (start or Path.cwd()).resolve()
    if config_file is not None:
        path = Path(config_file)
        if not path.is_file():
            raise ConfigError(f"{path}: config file not found")
    else:
        found = find_pyproject(start)
        if found is None:
            return Config(root=start)
        path = found
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    section = data.get("tool", {}).get("graphlint")
    if section is None:
        # A dedicated graphlint.toml may hold the keys at top level.
        section = data if path.name != "pyproject.toml" else {}
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [tool.graphlint] must be a table")
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
