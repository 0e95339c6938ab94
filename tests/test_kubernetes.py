"""The Kubernetes manifests against the API schemas of the oldest and newest Kubernetes
versions supported (kubernetes-validate ships them offline; strict: unknown fields fail).

The mutation test breaks a manifest one way at a time and asserts the check fails, so a
check that stopped looking fails here too; it also records what the schemas cannot see.
kubernetes-validate is a test extra (pyproject.toml); without it these tests skip, except
under CI (env CI set), where they fail.
"""

from __future__ import annotations

import copy
import importlib
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
# The versions README.md ("Deploy") promises; NEWEST is the newest the pinned
# kubernetes-validate ships.
OLDEST, NEWEST = "1.27.0", "1.37.0"
SIDECAR = ROOT / "deploy" / "kubernetes" / "sidecar.yaml"
Docs = list[dict[str, Any]]


@pytest.fixture(scope="module")
def kv() -> ModuleType:
    try:
        return importlib.import_module("kubernetes_validate")  # untyped: used as a module
    except ImportError:
        msg = "kubernetes-validate is not installed (pip install -e '.[test]')"
        if os.environ.get("CI"):
            pytest.fail(f"{msg}; CI installs the test extras in .ci/run")
        pytest.skip(msg)


def _docs(path: Path) -> Docs:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def _errors(kv: ModuleType, docs: Docs, version: str) -> list[str]:
    """One line per resource that does not validate (kubernetes-validate stops at the
    first error of a resource); a kind or apiVersion without a schema is an error too."""
    out = []
    for doc in docs:
        name = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        try:
            kv.validate(doc, version, strict=True)
        except (kv.ValidationError, kv.SchemaNotFoundError) as exc:
            out.append(f"{name} on {version}: {exc}")
    return out


def test_there_are_manifests() -> None:
    assert SIDECAR in MANIFESTS


@pytest.mark.parametrize("version", [OLDEST, NEWEST])
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifest_validates_strictly(kv: ModuleType, path: Path, version: str) -> None:
    docs = _docs(path)
    assert docs
    errors = _errors(kv, docs, version)
    assert not errors, f"{path.relative_to(ROOT)}:\n" + "\n".join(errors)


def test_newest_version_is_the_newest_the_package_ships(kv: ModuleType) -> None:
    # A newer kubernetes-validate brings a newer Kubernetes: move NEWEST and the README.
    assert kv.latest_version() == NEWEST


def _deployment(docs: Docs) -> dict[str, Any]:
    return _kind(docs, "Deployment")


def _pod(docs: Docs) -> dict[str, Any]:
    pod: dict[str, Any] = _deployment(docs)["spec"]["template"]["spec"]
    return pod


def _monitor(docs: Docs) -> dict[str, Any]:
    (c,) = [c for c in _pod(docs)["containers"] if c["name"] == "bias-monitor"]
    found: dict[str, Any] = c
    return found


def _rename(node: dict[str, Any], old: str, new: str) -> None:
    node[new] = node.pop(old)


def _kind(docs: Docs, kind: str) -> dict[str, Any]:
    (doc,) = [d for d in docs if d["kind"] == kind]
    return doc


# name -> (mutation of the sidecar manifest, the versions on which the check must fail)
CAUGHT: dict[str, tuple[Callable[[Docs], None], tuple[str, ...]]] = {
    "unknown container field": (
        lambda d: _rename(_monitor(d), "securityContext", "securityContxt"), (OLDEST, NEWEST)),
    "unknown ConfigMap field": (lambda d: _rename(_kind(d, "ConfigMap"), "data", "dat"),
                                (OLDEST, NEWEST)),
    "wrong type: replicas": (lambda d: _deployment(d)["spec"].update(replicas="one"),
                             (OLDEST, NEWEST)),
    "wrong type: containerPort": (
        lambda d: _monitor(d)["ports"][0].update(containerPort="metrics"), (OLDEST, NEWEST)),
    "missing required: container name": (lambda d: _monitor(d).pop("name"), (OLDEST, NEWEST)),
    "removed apiVersion apps/v1beta1": (
        lambda d: _deployment(d).update(apiVersion="apps/v1beta1"), (OLDEST, NEWEST)),
    # a native sidecar (init container that keeps running) exists from 1.28 on
    "field newer than the oldest version": (
        lambda d: _pod(d).update(initContainers=[{"name": "wait", "image": "busybox",
                                                  "restartPolicy": "Always"}]), (OLDEST,)),
}
# What the schemas do not check (they carry no enum and no quantity format): the
# mutation test asserts they still pass, so the day the tool starts catching them the
# list (and what we tell the reader) gets updated.
MISSED: dict[str, Callable[[Docs], None]] = {
    "wrong enum: imagePullPolicy": lambda d: _monitor(d).update(imagePullPolicy="Sometimes"),
    "wrong enum: port protocol": lambda d: _monitor(d)["ports"][0].update(protocol="HTTP"),
    "wrong enum: restartPolicy": lambda d: _pod(d).update(restartPolicy="Sometimes"),
    "bad quantity: memory limit": lambda d: _monitor(d)["resources"]["limits"].update(
        memory="lots"),
}


def _mutated(mutate: Callable[[Docs], None]) -> Docs:
    docs = copy.deepcopy(_docs(SIDECAR))
    mutate(docs)
    assert docs != _docs(SIDECAR)
    return docs


@pytest.mark.parametrize("name", list(CAUGHT))
def test_the_check_catches_the_mutation(kv: ModuleType, name: str) -> None:
    mutate, failing = CAUGHT[name]
    docs = _mutated(mutate)
    for version in (OLDEST, NEWEST):
        errors = _errors(kv, docs, version)
        if version in failing:
            assert errors, f"mutation {name!r} passed on {version}"
        else:
            assert not errors, f"mutation {name!r} is valid on {version}: {errors}"


@pytest.mark.parametrize("name", list(MISSED))
def test_what_the_schemas_do_not_check(kv: ModuleType, name: str) -> None:
    docs = _mutated(MISSED[name])
    assert not _errors(kv, docs, OLDEST) and not _errors(kv, docs, NEWEST), \
        f"kubernetes-validate now catches {name!r}: move it to CAUGHT and update the README"


@pytest.mark.parametrize("name", ["replicas.yaml", "sidecar.yaml"])
def test_each_form_shares_a_database_and_no_volume(name: str) -> None:
    """The monitor's own Deployment and the sidecar form, at 2 replicas or more (any count
    is safe): the store is PostgreSQL from a Secret, never a volume that two pods would
    contend for, and /data is scratch."""
    docs = _docs(ROOT / "deploy" / "kubernetes" / name)
    assert _deployment(docs)["spec"]["replicas"] >= 2
    config = yaml.safe_load(_kind(docs, "ConfigMap")["data"]["monitor.yaml"])
    var = config["storage"]["url_env"]
    (env,) = [e for e in _monitor(docs)["env"] if e["name"] == var]
    assert "secretKeyRef" in env["valueFrom"]
    assert not any("persistentVolumeClaim" in v for v in _pod(docs)["volumes"])
    assert not any(d["kind"] == "PersistentVolumeClaim" for d in docs)
    (data,) = [m for m in _monitor(docs)["volumeMounts"] if m["mountPath"] == "/data"]
    (scratch,) = [v for v in _pod(docs)["volumes"] if v["name"] == data["name"]]
    assert "emptyDir" in scratch


def test_the_sidecar_does_not_gate_the_assistants_readiness() -> None:
    """A failing readiness probe of the monitor would take the assistant's pod out of its
    Service: the sidecar has none (liveness restarts the monitor's container only)."""
    monitor = _monitor(_docs(SIDECAR))
    assert "readinessProbe" not in monitor
    assert monitor["livenessProbe"]["httpGet"]["path"] == "/healthz"
