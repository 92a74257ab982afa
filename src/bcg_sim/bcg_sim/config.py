"""YAML files in config/ mapped onto typed dataclasses.

Every tunable number of bcg lives in a YAML file under config/ and is read into a dataclass here, so a
typo in a key is an error (not a silently ignored setting) and every value has a type.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from pathlib import Path
from typing import Any, Callable, TypeVar

import yaml

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration file or value is wrong; the message names the file and the key."""


def checker(where: str = "") -> Callable[[bool, str, str], None]:
    """`need(ok, key, msg)`, the one form of a config value check: a ConfigError "where: key: msg" (one line)
    unless `ok`. Without `where` (a dataclass' __post_init__) `from_dict` adds the file or node to the message."""
    prefix = f"{where}: " if where else ""

    def need(ok: bool, key: str, msg: str) -> None:
        if not ok:
            raise ConfigError(f"{prefix}{key}: {msg}")

    return need


def config_dir() -> Path:
    """The config/ folder: $BCG_CONFIG_DIR, else the repository's config/, else the installed share."""
    env = os.environ.get("BCG_CONFIG_DIR")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "config").is_dir() and (parent / "src" / "bcg_sim").is_dir():
            return parent / "config"
    try:  # installed with colcon: config/ is part of g1_bringup's share directory
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory("g1_bringup")) / "config"
    except Exception as exc:  # noqa: BLE001 - ament_index raises several types
        raise ConfigError("cannot find bcg's config/ folder; set BCG_CONFIG_DIR") from exc


def resolve_config_path(name_or_path: str | os.PathLike) -> Path:
    """A path as given if it exists, else a file of that name in config_dir() (".yaml" optional)."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    for cand in (config_dir() / p, config_dir() / f"{p}.yaml"):
        if cand.is_file():
            return cand
    raise ConfigError(f"config file {str(name_or_path)!r} not found (looked in {config_dir()})")


def load_yaml(name_or_path: str | os.PathLike) -> dict[str, Any]:
    path = resolve_config_path(name_or_path)
    with open(path) as f:
        data = yaml.safe_load(f) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(data).__name__}")
    return data


def from_dict(cls: type[T], data: dict[str, Any] | None, where: str = "") -> T:
    """Build dataclass `cls` from a mapping; unknown keys and wrong types raise ConfigError."""
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"{where or cls.__name__}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ConfigError(f"{where or cls.__name__}: unknown key(s) {sorted(unknown)}; known: {sorted(names)}")
    kwargs = {k: _convert(hints[k], v, f"{where}.{k}" if where else k) for k, v in data.items()}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where or cls.__name__}: {exc}") from exc


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, where)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _convert(a, value, where)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(f"{where}: {value!r} matches none of {args}")
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        item = args[0] if args else Any
        out = [_convert(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(out) if origin is tuple else out
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        vt = args[1] if len(args) == 2 else Any
        return {k: _convert(vt, v, f"{where}.{k}") for k, v in value.items()}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true/false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    return value


def load_config(cls: type[T], name_or_path: str | os.PathLike, section: str | None = None) -> T:
    """Load config/<name>.yaml (or a path), optionally one top-level section, into dataclass `cls`."""
    path = resolve_config_path(name_or_path)
    data = load_yaml(path)
    if section is not None:
        if section not in data:
            raise ConfigError(f"{path}: missing section {section!r}")
        data = data[section]
    return from_dict(cls, data, where=f"{path.name}" + (f":{section}" if section else ""))
