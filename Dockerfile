# syntax=docker/dockerfile:1
# bias-monitor: run it as a sidecar next to your assistant.
#   docker build -t bias-monitor --build-arg REVISION=$(git rev-parse HEAD) .
#   docker run -v bias-data:/data -v ./config:/config:ro \
#     -e MONITOR_CONFIG=/config/monitor.yaml -e OPENAI_API_KEY -e SLACK_WEBHOOK_URL \
#     bias-monitor
# Without MONITOR_CONFIG it runs the built-in demo (the simulated endpoint).
# Layers run from the least to the most often changed: the user, the pinned
# dependencies (constraints.txt, .ci/refresh-constraints makes it), the code,
# and last the labels, so a code-only change rebuilds in seconds.
FROM python:3.11-slim

# No network at import (LiteLLM's price list comes from the package); the
# metrics port listens on the container's own (private) network.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    MONITOR_STORAGE__PATH=/data/monitor.duckdb \
    MONITOR_METRICS__HOST=0.0.0.0

RUN groupadd --system --gid 10001 monitor \
 && useradd --system --uid 10001 --gid 10001 --home-dir /data --shell /usr/sbin/nologin monitor \
 && mkdir -p /data /config \
 && chown monitor:monitor /data

# The dependencies alone, pinned: this layer changes only with constraints.txt.
# Their test suites are never imported by the monitor (~90 MB).
COPY constraints.txt /src/constraints.txt
RUN pip install -r /src/constraints.txt \
 && SITE="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
 && rm -rf "$SITE"/pandas/tests "$SITE"/scipy/*/tests "$SITE"/scipy/*/*/tests \
           "$SITE"/numpy/*/tests "$SITE"/matplotlib/tests "$SITE"/litellm/proxy/_experimental/out

# The same steps as tests/test_packaging.py: a non-editable install of the
# repository, the probe catalog inside the wheel. No dependency is fetched
# here (--no-deps, no build isolation); `pip check` proves they are all in.
COPY pyproject.toml README.md /src/
COPY monitor /src/monitor
COPY probes /src/probes
RUN pip install --no-deps --no-build-isolation /src \
 && pip check \
 && rm -rf /src

USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
EXPOSE 9464
# The port follows MONITOR_METRICS__PORT when it is set (e.g. on a host network).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import os, sys, urllib.request; port = os.environ.get('MONITOR_METRICS__PORT', '9464'); sys.exit(0 if urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=4).status == 200 else 1)"]
CMD ["monitor", "run"]

# Build args used only by labels, declared last: a new revision or date
# rebuilds this metadata, not the layers above.
ARG VERSION=0.4.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="bias-monitor" \
      org.opencontainers.image.description="Continuous monitoring of local-language bias in multilingual LLM endpoints" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.source="https://github.com/bias-monitor/bias-monitor"
