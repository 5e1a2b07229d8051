# The chat service (and the renderer of SearXNG's settings, run once before SearXNG).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /srv
COPY pyproject.toml ./
COPY app ./app
COPY searxng ./searxng
COPY searxng-engines ./searxng-engines
COPY presets ./presets
RUN pip install --no-cache-dir . && useradd --system --home /data chat \
    && mkdir -p /data && chown chat /data
USER chat
ENV DATA_DIR=/data
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --retries=5 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2)"]
CMD ["python", "-m", "app", "serve", "--host", "0.0.0.0", "--port", "8080"]
