"""The configuration's schema: one pydantic model per section, every key with its default.

Unknown keys are errors. Secrets never live in the file: an endpoint names
the environment variable that holds its key (docs/contract.md lists the keys).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from monitor.config.detector import Thresholds, Topup
from monitor.config.sinks import Alerts, check_headers_env
from monitor.config.target import HttpTarget
from monitor.errors import ConfigError
from monitor.vocab import AnswerFormat, Persona, Variant, base_language

__all__ = ["AUTO_BASELINE_RUNS", "Endpoint", "Report", "Settings", "Thresholds", "Topup",
           "parse_every"]

_Strict = ConfigDict(extra="forbid", frozen=True)
_EVERY = re.compile(r"^(\d+)(s|m|h|d)$")
_CRON = re.compile(r"^([0-9A-Za-z*/,?-]+\s+){4}[0-9A-Za-z*/,?-]+$")
_UNSAFE_URL = frozenset('<>|"\'\\ \t\r\n')  # would break a Slack <url|text> link or HTML
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class Cost(BaseModel):
    model_config = _Strict
    input: float | None = Field(None, ge=0, description="USD per 1000 input tokens.")
    output: float | None = Field(None, ge=0, description="USD per 1000 output tokens.")




class Endpoint(BaseModel):
    """A model endpoint to monitor."""

    model_config = _Strict
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
                      description="Label used in metrics, storage and alerts.")
    model: str = Field(min_length=1, description="Any LiteLLM model string.")
    api_base: str | None = Field(None, description="Base URL of the endpoint, if not default.")
    api_key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
                                    description="Environment variable holding the API key.")
    max_concurrency: int = Field(8, ge=1, le=1024, description="Calls in flight at most.")
    rpm: int = Field(300, ge=1, le=100_000, description="Requests per minute ceiling.")
    timeout_s: float = Field(60, gt=0, le=3600, description="Timeout of one call.")
    max_retries: int = Field(3, ge=0, le=20, description="Retries after a failed call.")
    reask_failed: float = Field(
        0.25, ge=0, le=1, description="Share of a run's calls asked once more at its end when "
                                      "they failed in transit (0: never).")
    params: dict[str, Any] = Field(default_factory=lambda: {"temperature": 0.7,
                                                            "max_tokens": 900},
                                   description="Extra completion parameters.")
    cost_per_1k_tokens: Cost = Field(default_factory=Cost,
                                     description="Prices, where LiteLLM has none.")
    system_prompt: str | None = Field(None, min_length=1,
                                      description="The assistant's own system prompt.")
    system_prompt_file: str | None = Field(
        None, min_length=1, description="File of the system prompt; {language} in the path "
                                        "picks one per language (relative to the config).")
    persona: Persona | None = Field(
        None, description="Where the probe's consultant persona goes: system, user or off; "
                          "null = system without a system prompt, user with one.")
    headers_env: dict[str, str] = Field(
        default_factory=dict, description="Extra request headers: name -> the environment "
                                          "variable holding its value.")
    answer_format: AnswerFormat = Field(
        AnswerFormat.TEXT, description="text, json_schema (a response schema; an http/ "
                                       "target needs {response_schema} in its body) or auto "
                                       "(json_schema where it is known to be supported).")
    http: HttpTarget | None = Field(None, description="The request of an http/<name> model.")

    @field_validator("headers_env")
    @classmethod
    def _headers(cls, v: dict[str, str]) -> dict[str, str]:
        return check_headers_env(v)

    @model_validator(mode="after")
    def _target(self) -> Endpoint:
        if self.model.startswith("http/") and self.http is None:
            raise ValueError(f"model {self.model}: an http/ model needs an `http:` section "
                             "(url, body, response_path)")
        if self.http is not None and not self.model.startswith("http/"):
            raise ValueError(f"`http:` is only for http/<name> models, not {self.model}")
        if (self.http is not None and self.answer_format == AnswerFormat.JSON_SCHEMA
                and not self.http.takes_schema):
            # Stored, it would change the setup (no comparison with the baseline) and
            # nothing in the request: an http/ target takes a schema only where told.
            raise ValueError("answer_format json_schema on an http/ target needs a "
                             "\"{response_schema}\" placeholder in http.body where the API "
                             "takes a JSON schema; or set answer_format: text")
        if self.system_prompt and self.system_prompt_file:
            raise ValueError("set system_prompt or system_prompt_file, not both")
        return self

    @property
    def simulated(self) -> bool:
        return self.model.startswith("simulated/")

    @property
    def has_system_prompt(self) -> bool:
        return bool(self.system_prompt or self.system_prompt_file)

    def system_prompt_for(self, language: str) -> str | None:
        """The assistant's system prompt in `language`; ConfigError naming an unreadable file."""
        if self.system_prompt:
            return self.system_prompt.strip()
        if not self.system_prompt_file:
            return None
        path = Path(self.system_prompt_file.replace("{language}", language))
        base = base_language(language)
        if base is not None and not path.exists():
            # A locale (pt-PT) without a file of its own is asked with its language's, as
            # an assistant with one Portuguese prompt serves Portugal.
            path = Path(self.system_prompt_file.replace("{language}", base))
        key = f"endpoints[{self.name}].system_prompt_file"
        try:
            text = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            raise ConfigError(f"{path}: {key}: no system prompt file for language {language}; "
                              "write it or drop the language from sampling.languages") from None
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise ConfigError(f"{path}: {key}: cannot read the system prompt: {why}") from None
        if not text:
            raise ConfigError(f"{path}: {key}: the system prompt file is empty; write the "
                              "prompt or remove system_prompt_file")
        return text

    def header_values(self) -> dict[str, str]:
        """The extra headers with their values from the environment (unset ones left out)."""
        return {name: os.environ[var] for name, var in self.headers_env.items()
                if os.environ.get(var)}

    def secrets(self) -> list[str]:
        """Every secret value this endpoint sends, to be masked wherever text is shown."""
        values = [v for v in (self.api_key(), *self.header_values().values()) if v]
        return sorted(set(values), key=len, reverse=True)

    def api_key(self) -> str | None:
        """The key from the environment; None when unset or not configured."""
        return os.environ.get(self.api_key_env) if self.api_key_env else None


class Storage(BaseModel):
    model_config = _Strict
    path: Path = Field(Path("monitor.duckdb"), description="The DuckDB file.")
    url_env: str | None = Field(None, description="Variable holding a postgresql:// URL.")
    lease_seconds: float = Field(60.0, gt=1, le=3600, description="An endpoint's lease.")


class CatalogCfg(BaseModel):
    model_config = _Strict
    path: Path | None = Field(None, description="Catalog folder; null = the shipped probes/.")
    extra_paths: list[Path] = Field(
        default_factory=list, description="Overlay folders with the team's own scenarios "
                                          "(relative to the config file).")


class Sampling(BaseModel):
    model_config = _Strict
    triplets_per_run: int = Field(40, ge=1, le=100_000)
    scenarios: list[str] = Field(default_factory=lambda: ["university", "relocation", "travel"],
                                 min_length=1)
    languages: list[str] = Field(default_factory=lambda: ["en", "ja", "zh", "fr", "de", "ko"],
                                 min_length=2)
    variants: list[Variant] = Field(default_factory=lambda: list(Variant), min_length=1)
    seed: int = Field(0, ge=0, le=2**31 - 1)  # stored in an INTEGER column of runs


class Schedule(BaseModel):
    model_config = _Strict
    cron: str | None = Field("0 */6 * * *", description="Cron expression (UTC).")
    every: str | None = Field(None, description="Interval such as 30s, 15m, 6h, 1d.")
    # Each run process peaks at ~420 MB (docs/benchmarks.md section 11): 2 and the idle
    # daemon (~110 MB) fit the 1 GiB limit of deploy/kubernetes.
    max_concurrent_runs: int = Field(2, ge=1, le=1000, description="Run processes a replica "
                                     "runs at once; more slots wait (at most half a period).")

    @model_validator(mode="before")
    @classmethod
    def _one_schedule(cls, data: Any) -> Any:
        """`every` wins over `cron` (the scheduler's rule): given alone it leaves no
        default cron beside it, so the effective configuration shows the schedule that
        applies. Both given: kept, and `config check` warns that cron is ignored."""
        if isinstance(data, dict) and data.get("every") is not None and "cron" not in data:
            return {**data, "cron": None}
        return data

    @field_validator("every")
    @classmethod
    def _every(cls, v: str | None) -> str | None:
        if v is not None:
            parse_every(v)
        return v

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str | None) -> str | None:
        # Syntax only (the scheduler checks ranges): 5 fields of digits, names,
        # * / , - so that `monitor config check` catches a typo before `run`.
        if v is not None and not _CRON.match(v.strip()):
            raise ValueError(f"{v!r} is not a 5-field cron expression; e.g. '0 */6 * * *'")
        return v


#: Runs' worth of triplets the automatic baseline waits for when
#: baseline.auto_min_triplets is null: with 10, the baseline's own estimation
#: error made the CUSUM page on noise about once per 100 runs at 40 triplets per
#: run; with 20, about 0.3 (bench/stat_validation.py, docs/benchmarks.md).
AUTO_BASELINE_RUNS = 20


class BaselineCfg(BaseModel):
    model_config = _Strict
    auto_min_triplets: int | None = Field(
        None, ge=1, description="Triplets the automatic baseline needs; null = 20 runs' worth.")
    jsd_window_runs: int = Field(10, ge=1, le=1000,
                                 description="Recent runs pooled for the JSD shape monitor.")
    covariate: bool = Field(True, description="Use the baseline's answers to the same "
                                              "triplets as a covariate of a run's MD (CUPED) "
                                              "in the detector, where it pays.")


class Metrics(BaseModel):
    model_config = _Strict
    host: str = Field("127.0.0.1", description="Bind address; loopback by default.")
    port: int = Field(9464, ge=0, le=65535)


class Report(BaseModel):
    """The report the daemon writes after each run and serves at /report (monitor.serve.site)."""

    model_config = _Strict
    enabled: bool = Field(True, description="Write each run's report and serve it at /report.")
    dir: Path | None = Field(None, description="Folder of the served reports; null = "
                                               "`reports/` beside storage.path.")
    keep_runs: int = Field(50, ge=1, le=10_000, description="Reports of the latest N runs kept.")
    base_url: str | None = Field(
        None, description="The address people open the daemon's HTTP port at (e.g. "
                          "https://bias-monitor.internal:9464); alerts then link to the run's "
                          "report under <base_url>/report/.")

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        url = urlsplit(v.strip())
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError("not an http(s) URL; write e.g. https://bias-monitor.internal:9464")
        if "@" in url.netloc:  # the link goes to chat and pagers: no credentials in it
            raise ValueError("carries credentials (user:password@); a link sent to Slack and "
                             "PagerDuty must not, put the report behind your proxy's login")
        if url.query or url.fragment or any(c in _UNSAFE_URL for c in v.strip()):
            raise ValueError("must be a plain base address: no query, fragment, spaces, "
                             "quotes, backslashes or <>| characters")
        return v.strip().rstrip("/")

    def folder(self, storage_path: Path) -> Path:
        """Where the reports are: `dir`, else `reports/` beside the DuckDB file."""
        return self.dir if self.dir is not None else storage_path.parent / "reports"

    def link(self, run_id: str | None) -> str | None:
        """The run's report as people open it; None without a base_url or a run."""
        if self.base_url is None or not run_id:
            return None
        return f"{self.base_url}/report/{quote(run_id, safe='')}/"


class Budget(BaseModel):
    model_config = _Strict
    max_usd_per_day: float | None = Field(None, ge=0)
    max_probes_per_day: int | None = Field(None, ge=0)


class Settings(BaseSettings):
    """The effective configuration."""

    model_config = SettingsConfigDict(env_prefix="MONITOR_", env_nested_delimiter="__",
                                      extra="forbid", frozen=True)
    storage: Storage = Field(default_factory=Storage)
    catalog: CatalogCfg = Field(default_factory=CatalogCfg)
    endpoints: list[Endpoint] = Field(min_length=1)
    sampling: Sampling = Field(default_factory=Sampling)
    schedule: Schedule = Field(default_factory=Schedule)
    thresholds: Thresholds = Field(default_factory=Thresholds)
    topup: Topup = Field(default_factory=Topup)
    alerts: Alerts = Field(default_factory=Alerts)
    baseline: BaselineCfg = Field(default_factory=BaselineCfg)
    metrics: Metrics = Field(default_factory=Metrics)
    budget: Budget = Field(default_factory=Budget)
    report: Report = Field(default_factory=Report)

    @field_validator("endpoints")
    @classmethod
    def _unique_names(cls, v: list[Endpoint]) -> list[Endpoint]:
        names = [e.name for e in v]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"endpoint names must be unique, repeated: {dup}")
        return v

    def require_keys(self, endpoints: list[Endpoint], source: Path) -> None:
        """Fail before any call when a configured key or header variable is not set."""
        for ep in endpoints:
            if ep.api_key_env and not ep.api_key():
                raise ConfigError(f"{source}: endpoints[{ep.name}].api_key_env: environment "
                                  f"variable {ep.api_key_env} is not set; export it or set "
                                  "api_key_env: null for a keyless endpoint")
            for name, var in ep.headers_env.items():
                if not os.environ.get(var):
                    raise ConfigError(f"{source}: endpoints[{ep.name}].headers_env.{name}: "
                                      f"environment variable {var} is not set; export it or "
                                      "remove the header")

    def endpoint(self, name: str) -> Endpoint:
        for e in self.endpoints:
            if e.name == name:
                return e
        raise ConfigError(f"no endpoint named {name!r}; configured: "
                          f"{[e.name for e in self.endpoints]} (see `monitor config check`)")


def parse_every(text: str) -> int:
    """'30s' / '15m' / '6h' / '1d' -> seconds."""
    m = _EVERY.match(text.strip())
    if not m or int(m.group(1)) == 0:
        raise ValueError(f"{text!r} is not an interval; write e.g. 30s, 15m, 6h or 1d")
    return int(m.group(1)) * _UNIT_S[m.group(2)]
