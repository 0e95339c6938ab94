# syntax=docker/dockerfile:1
# bias-monitor: run it as a sidecar next to your assistant.
#   docker build -t bias-monitor --build-arg REVISION=$(git rev-parse HEAD) .
#   docker run -v bias-data:/data -v ./config:/config:ro \
#     -e MONITOR_CONFIG=/config/monitor.yaml -e OPENAI_API_KEY -e SLACK_WEBHOOK_URL \
#     bias-monitor
# Without MONITOR_CONFIG it runs the built-in demo (the simulated endpoint).
FROM python:3.11-slim

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

# No network at import (LiteLLM's price list comes from the package); the
# metrics port listens on the container's own (private) network.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    MONITOR_STORAGE__PATH=/data/monitor.duckdb \
    MONITOR_METRICS__HOST=0.0.0.0

# The same steps as tests/test_packaging.py: a non-editable install of the
# repository, the probe catalog inside the wheel.
COPY pyproject.toml README.md /src/
COPY monitor /src/monitor
COPY probes /src/probes
RUN pip install /src \
 && rm -rf /src \
 && groupadd --system --gid 10001 monitor \
 && useradd --system --uid 10001 --gid 10001 --home-dir /data --shell /usr/sbin/nologin monitor \
 && mkdir -p /data /config \
 && chown monitor:monitor /data

USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
EXPOSE 9464
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:9464/healthz', timeout=4).status == 200 else 1)"]
CMD ["monitor", "run"]
