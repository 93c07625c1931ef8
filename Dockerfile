# The worker (and, with another command, the console, the codec server or agentctl) as one
# image, with the extras they need: [console] (the console and the codec server), [mcp]
# (agents' MCP tools) and [postgres] (our stores on AGENT_DATABASE_URL). Not [local] or
# [testing]: the dev server and the test server are for a laptop and a test run.
# Build: docker build -t durable-agents:0.1.0 .
FROM python:3.11.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
# Dependencies first, pinned by constraints.txt, so code changes reuse this layer.
COPY pyproject.toml constraints.txt README.md ./
COPY durable_agents ./durable_agents
COPY examples ./examples
COPY activities ./activities
COPY console ./console
COPY control ./control
COPY infra ./infra
COPY runtime ./runtime
COPY starters ./starters
COPY worker ./worker
COPY workflows ./workflows
RUN pip install -c constraints.txt ".[console,mcp,postgres]" \
    && useradd --uid 10001 --create-home agent \
    && mkdir /data /keys && chown agent /data /keys

USER 10001
ENV AGENT_DATA_DIR=/data \
    AGENT_METRICS_HOST=0.0.0.0
EXPOSE 9464
# The worker stops polling on SIGTERM and lets activities in flight finish.
STOPSIGNAL SIGTERM
CMD ["python", "-m", "durable_agents.worker"]
