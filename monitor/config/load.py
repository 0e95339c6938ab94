"""Loading the configuration: which file, the environment's overrides, one-line errors.

Path resolution (docs/contract.md): --config, else $MONITOR_CONFIG, else
./monitor.yaml, else the built-in demo configuration (the simulated endpoint
and ./monitor.duckdb). Environment variables MONITOR_<SECTION>__<KEY> win
over the file. `masked_dump` is what `monitor config check` prints.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, YamlConfigSettingsSource

from monitor.config.model import Settings
from monitor.config.target import mask_url
from monitor.errors import ConfigError, UsageError
from monitor.yamlfile import YamlError, load_yaml

__all__ = ["demo_config_path", "deprecations", "env_problems", "load_settings", "masked_dump",
           "parse_since", "resolve_config_path"]

_ENV_PREFIX = "MONITOR_"
_ENV_OWN = frozenset({"MONITOR_CONFIG"})  # the config file's path, not a section


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

    # pydantic-settings reads only the variables of known sections: a misspelled
    # section (MONITOR_SAMPLNG__...) would be ignored without a word.
    problems = env_problems(os.environ)
    try:
        settings = _FromFile()
    except ValidationError as exc:
        raise ConfigError(_one_line(path, problems + _problems(exc))) from None
    except Exception as exc:  # YAML syntax errors, unreadable files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"{path}: cannot read config: {first}") from None
    if problems:
        raise ConfigError(_one_line(path, problems))
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


def env_problems(environ: Mapping[str, str]) -> list[str]:
    """Each MONITOR_<SECTION>__<KEY> variable whose section the configuration does not
    have, with the section it is closest to. A MONITOR_<NAME> without `__` is a whole
    section as JSON: one whose name is no section is an error only when its value is
    JSON, so that other programs' variables (Kubernetes sets MONITOR_PORT and
    MONITOR_SERVICE_HOST for a Service named `monitor`) are left alone."""
    sections = list(Settings.model_fields)
    out = []
    for name in sorted(environ):
        if not name.upper().startswith(_ENV_PREFIX) or name.upper() in _ENV_OWN:
            continue
        rest = name[len(_ENV_PREFIX):]
        section = rest.split("__", 1)[0].lower()
        if section in sections:
            continue
        if "__" not in rest and not environ[name].lstrip().startswith(("{", "[")):
            continue
        near = difflib.get_close_matches(section, sections, n=1)
        hint = (f"did you mean {_ENV_PREFIX}{near[0].upper()}{rest[len(section):]}?" if near
                else f"the sections are {', '.join(sections)}")
        out.append(f"environment {name}: no configuration section {section!r}; {hint}")
    return out


def _keys_at(loc: Sequence[Any]) -> list[str]:
    """The keys the configuration has where `loc` points (list indexes skipped)."""
    model: Any = Settings
    for part in loc:
        if isinstance(part, int):
            continue
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return []
        model = _model_in(field.annotation)
        if model is None:
            return []
    return list(getattr(model, "model_fields", {}))


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model inside `X`, `X | None`, `list[X]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        if (found := _model_in(arg)) is not None:
            return found
    return None


def _unknown_key(loc: Sequence[Any], env: str | None) -> str:
    """With the key it is closest to: as a variable when a variable named this very key."""
    near = difflib.get_close_matches(str(loc[-1]), _keys_at(loc[:-1]), n=1)
    if not near:
        return "unknown key; remove it or check its spelling against the contract's keys"
    names = [str(p).upper() for p in loc]
    if env is not None and env == _ENV_PREFIX + "__".join(names):
        var = _ENV_PREFIX + "__".join([*names[:-1], near[0].upper()])
        return f"unknown key; did you mean {var}?"
    return f"unknown key; did you mean {near[0]}?"


def _problems(exc: ValidationError) -> list[str]:
    """One text per problem, `key: what is wrong (source)`. A union (a number or "auto")
    fails once per member, each with the same input and the member's tag
    ("constrained-float", "literal['auto']") as the last part of its path: the user
    wrote the key, not a tag, so the tag is left out and the members' rules are said
    together."""
    errors = exc.errors()
    # A misspelled key (`respones_path`) also leaves the key it meant missing: one
    # mistake, said once, as "did you mean response_path?".
    meant = {(*e["loc"][:-1], near[0]) for e in errors if e["type"] == "extra_forbidden"
             and (near := difflib.get_close_matches(str(e["loc"][-1]),
                                                    _keys_at(e["loc"][:-1]), n=1))}
    errors = [e for e in errors if not (e["type"] == "missing" and tuple(e["loc"]) in meant)]
    out, used = [], set()
    for i, err in enumerate(errors):
        if i in used:
            continue
        loc = tuple(err["loc"])
        same = [j for j, e in enumerate(errors) if j not in used and len(loc) > 1
                and tuple(e["loc"][:-1]) == loc[:-1] and isinstance(e["loc"][-1], str)
                and repr(e.get("input")) == repr(err.get("input"))]
        where = loc[:-1] if len(same) > 1 else loc
        members = [errors[j] for j in same] if len(same) > 1 else [err]
        used.update(same if len(same) > 1 else [i])
        out.append(_problem(where, err, members))
    return out


def _problem(where: tuple[Any, ...], err: Any, same: list[Any]) -> str:
    key = ".".join(str(p) for p in where) or "(top level)"
    # The variable that set this key or one of its parents (MONITOR_ALERTS__SLACK__X,
    # MONITOR_ENDPOINTS as JSON), longest first.
    loc = [str(p).upper() for p in where]
    env = next((name for i in range(len(loc), 0, -1)
                if (name := "MONITOR_" + "__".join(loc[:i])) in os.environ), None)
    source = f" (from environment {env})" if env else ""
    if err["type"] == "extra_forbidden":
        msg = _unknown_key(where, env)
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
    return f"{key}: {msg}{source}"


def _one_line(path: Path, problems: list[str]) -> str:
    """Every problem at once, on one line."""
    if len(problems) == 1:
        return f"{path}: {problems[0]}"
    return f"{path}: {len(problems)} problems: " + " ".join(
        f"({i}) {text}" for i, text in enumerate(problems, start=1))


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
    if settings.schedule.every and settings.schedule.cron:
        data["schedule"]["cron"] = None
        warnings.append(f"{source}: schedule.cron {settings.schedule.cron!r} is ignored: "
                        f"schedule.every ({settings.schedule.every}) applies; remove one")
    warnings += [f"{source}: {line}" for line in alerts.unready()]
    warnings += deprecations(settings, source)
    return data, warnings


def deprecations(settings: Settings, source: Path) -> list[str]:
    """A warning for each key that is accepted but read nowhere, naming what replaced it
    (`config check` prints them, the daemon logs them at start)."""
    if settings.alerts.cooldown_minutes is None:
        return []
    return [f"{source}: alerts.cooldown_minutes is deprecated and has no effect (since "
            "0.3): a page is sent once per change to FIRING and a resolve needs the evidence "
            "for the shift used up again - thresholds.cusum_h and alerts.min_runs_firing "
            "govern it; remove the key"]


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
