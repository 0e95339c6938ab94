"""Loading the configuration: which file, the environment's overrides, one-line errors.

Path resolution (docs/contract.md): --config, else $MONITOR_CONFIG, else
./monitor.yaml, else the built-in demo configuration (the simulated endpoint
and ./monitor.duckdb). Environment variables MONITOR_<SECTION>__<KEY> win
over the file. `masked_dump` is what `monitor config check` prints.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from difflib import get_close_matches
from importlib import resources
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, YamlConfigSettingsSource

from monitor.config.model import Settings
from monitor.config.sinks import unset_variables
from monitor.config.target import mask_url
from monitor.errors import ConfigError, UsageError
from monitor.yamlfile import YamlError, load_yaml

__all__ = ["demo_config_path", "load_settings", "masked_dump", "parse_since",
           "resolve_config_path"]


def demo_config_path() -> Path:
    return Path(str(resources.files("monitor").joinpath("data/demo.yaml")))


def resolve_config_path(explicit: Path | None) -> Path:
    if explicit is not None:
        return explicit
    if env := os.environ.get("MONITOR_CONFIG"):
        return Path(env)
    if Path("monitor.yaml").is_file():
        return Path("monitor.yaml")
    return demo_config_path()


def load_settings(path: Path | None = None) -> tuple[Settings, Path]:
    """The settings and the file they came from; ConfigError on any problem."""
    path = resolve_config_path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found; pass --config PATH or unset "
                          "MONITOR_CONFIG to use the built-in demo configuration")
    try:  # our own read first: pydantic-settings would drop PyYAML's line and column
        load_yaml(path)
    except YamlError as exc:
        raise ConfigError(str(exc)) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror}") from None

    class _FromFile(Settings):
        @classmethod
        def settings_customise_sources(
            cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return init_settings, env_settings, YamlConfigSettingsSource(settings_cls, path)

    try:
        settings = _FromFile()
    except ValidationError as exc:
        raise ConfigError(_one_line(exc, path)) from None
    except Exception as exc:  # YAML syntax errors, unreadable files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"{path}: cannot read config: {first}") from None
    data = settings.model_dump()
    # A system prompt file or a catalog overlay is found next to the config that names it
    # (a mounted config directory in a container), not where the daemon starts.
    here = path.parent.resolve()
    for ep in data["endpoints"]:
        if ep.get("system_prompt_file") and not Path(ep["system_prompt_file"]).is_absolute():
            ep["system_prompt_file"] = str(here / ep["system_prompt_file"])
    data["catalog"]["extra_paths"] = [p if Path(p).is_absolute() else here / p
                                      for p in data["catalog"]["extra_paths"]]
    return Settings.model_validate(data), path


def _union_members(errors: list[Any]) -> tuple[tuple[Any, ...], list[Any]]:
    """(the key, its errors) of the first error. A union (a number or "auto") fails once
    per member, each with the same input and the member's tag ("constrained-float",
    "literal['auto']") as the last part of its path: the user wrote the key, not a
    tag, so the tag is left out and the members' rules are said together."""
    err = errors[0]
    loc = tuple(err["loc"])
    members = [e for e in errors if len(loc) > 1 and tuple(e["loc"][:-1]) == loc[:-1]
               and isinstance(e["loc"][-1], str) and repr(e.get("input")) == repr(err.get("input"))]
    return (loc[:-1], members) if len(members) > 1 else (loc, [err])


def _fields_at(loc: tuple[Any, ...]) -> list[str]:
    """The keys the configuration accepts beside the last part of `loc` (for "did you
    mean"): the schema walked by key, list index and mapping value."""
    current: Any = Settings
    for part in loc[:-1]:
        current = _model_of(current)
        if isinstance(part, int) or not (isinstance(current, type)
                                          and issubclass(current, BaseModel)):
            args = [a for a in get_args(current) if a is not type(None)]
            current = args[-1] if args else None  # list[X] -> X, dict[str, X] -> X
        elif part in current.model_fields:
            current = current.model_fields[part].annotation
        else:
            return []
    current = _model_of(current)
    return list(current.model_fields) if isinstance(current, type) and issubclass(
        current, BaseModel) else []


def _model_of(annotation: Any) -> Any:
    """X of `X | None` where X is a model; the annotation itself otherwise."""
    if get_origin(annotation) in (Union, UnionType):
        models = [a for a in get_args(annotation)
                  if isinstance(a, type) and issubclass(a, BaseModel)]
        return models[0] if models else annotation
    return annotation


def _misspelled(errors: list[Any]) -> tuple[Any, str] | None:
    """The first unknown key that is close to a key of its place, with that key: a typo
    (`respones_path`) reads better as "did you mean response_path" than as the
    "required key is missing" it also causes."""
    for err in errors:
        if err["type"] == "extra_forbidden" and err["loc"]:
            close = get_close_matches(str(err["loc"][-1]), _fields_at(tuple(err["loc"])), n=1,
                                      cutoff=0.6)
            if close:
                return err, close[0]
    return None


def _one_line(exc: ValidationError, path: Path) -> str:
    errors = exc.errors()
    typo = _misspelled(errors)
    if typo is not None:
        err, meant = typo
        parent = tuple(err["loc"][:-1])
        # The missing key it meant is the same mistake, not one more.
        errors = [err, *(e for e in errors if e is not err and not (
            e["type"] == "missing" and tuple(e["loc"]) == (*parent, meant)))]
    err = errors[0]
    where, same = _union_members(errors)
    key = ".".join(str(p) for p in where) or "(top level)"
    # The variable that set this key or one of its parents (MONITOR_ALERTS__SLACK__X,
    # MONITOR_ENDPOINTS as JSON), longest first.
    loc = [str(p).upper() for p in where]
    env = next((name for i in range(len(loc), 0, -1)
                if (name := "MONITOR_" + "__".join(loc[:i])) in os.environ), None)
    source = f" (from environment {env})" if env else ""
    if typo is not None:
        msg = f"unknown key; did you mean {typo[1]}?"
    elif err["type"] == "extra_forbidden":
        msg = "unknown key; remove it or check its spelling against the contract's keys"
    elif err["type"] == "missing":
        msg = "required key is missing"
    else:
        value = err.get("input")
        secretish = any(w in key.lower() for w in ("key", "token", "url", "secret"))
        # A key pasted where its variable's NAME belongs must not be echoed back.
        shown = "" if isinstance(value, dict | list) or secretish else f" (got {value!r})"
        # pydantic opens our validators' messages with "Value error, ": not the user's words.
        msg = "; or ".join(dict.fromkeys(e["msg"].removeprefix("Value error, ")
                                         for e in same)) + shown
    rest = len(errors) - len(same)
    more = f" [+{rest} more]" if rest else ""
    return f"{path}: {key}: {msg}{source}{more}"


# Parameter names whose values are secrets, matched as whole words of the name
# (api_key, access_token, x-api-key), so that max_tokens is not one.
_SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "pwd",
                           "auth", "authorization", "credential", "credentials", "cookie",
                           "signature", "bearer"})


def _is_secret(name: str) -> bool:
    return any(w in _SECRET_WORDS for w in re.split(r"[^a-z0-9]+", name.lower()))


def masked_dump(settings: Settings, source: Path) -> tuple[dict[str, Any], list[str]]:
    """The effective configuration as JSON data with every secret masked, and a
    warning for each secret found in the file itself (it belongs in the environment)."""
    data = settings.model_dump(mode="json")
    warnings: list[str] = []
    for ep, raw in zip(settings.endpoints, data["endpoints"], strict=True):
        if ep.api_key_env:
            state = "set" if ep.api_key() else "NOT SET"
            raw["api_key_env"] = f"{ep.api_key_env} ({state}; value never shown)"
        if raw.get("api_base"):
            masked = mask_url(raw["api_base"])
            if masked != raw["api_base"]:
                warnings.append(f"{source}: endpoints[{ep.name}].api_base carries credentials "
                                "or query values (masked here); keep secrets in environment "
                                "variables")
            raw["api_base"] = masked
        if raw.get("http") and mask_url(raw["http"]["url"]) != raw["http"]["url"]:
            raw["http"]["url"] = mask_url(raw["http"]["url"])
            warnings.append(f"{source}: endpoints[{ep.name}].http.url carries credentials or "
                            "query values (masked here); send them as headers_env instead")
        for header, var in ep.headers_env.items():
            state = "set" if os.environ.get(var) else "NOT SET"
            raw["headers_env"][header] = f"{var} ({state}; value never shown)"
        for key in list(raw.get("params", {})):
            if _is_secret(key):
                raw["params"][key] = "***"
                warnings.append(f"{source}: endpoints[{ep.name}].params.{key} holds a secret in "
                                "the config file (masked here); name an environment variable "
                                "in api_key_env instead")
    slack = settings.alerts.slack
    for field in ("webhook_url_env", "bot_token_env"):
        name = getattr(slack, field)
        if name:
            state = "set" if os.environ.get(name) else "not set"
            data["alerts"]["slack"][field] = f"{name} ({state}; value never shown)"
    alerts = settings.alerts
    if alerts.webhook is not None:
        hook = data["alerts"]["webhook"]
        hook["url_env"] = _shown_var(alerts.webhook.url_env)
        for header, var in alerts.webhook.headers_env.items():
            hook["headers_env"][header] = _shown_var(var)
    if alerts.pagerduty is not None:
        pd = data["alerts"]["pagerduty"]
        pd["routing_key_env"] = _shown_var(alerts.pagerduty.routing_key_env)
        if mask_url(pd["url"]) != pd["url"]:
            pd["url"] = mask_url(pd["url"])
            warnings.append(f"{source}: alerts.pagerduty.url carries credentials or query "
                            "values (masked here); the routing key belongs in routing_key_env")
    warnings += [f"{source}: {line}" for line in unset_variables(alerts.webhook,
                                                                 alerts.pagerduty)]
    return data, warnings


def _shown_var(name: str) -> str:
    state = "set" if os.environ.get(name) else "NOT SET"
    return f"{name} ({state}; value never shown)"


def parse_since(text: str) -> datetime:
    """A `--since` value (report, export): a date or ISO time, UTC when no zone is given."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--since {text!r}: not a date; use YYYY-MM-DD or an ISO time, "
                         f"e.g. --since 2026-11-01") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)
