# The chat service (and the renderer of SearXNG's settings, run once before SearXNG).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PYTHONPATH=/srv
WORKDIR /srv
# The whole dependency tree from the lock, each file checked against its hash; no cache,
# no compiler (every package of the lock has a wheel for Linux on x86-64 and arm64).
# A build behind a TLS-intercepting proxy can pass the proxy's CA bundle as the build
# secret "ca-bundle" (`docker compose build` with `secrets:`, as the tests do): it is
# mounted for this step only and never stored in the image. /rendered is where
# compose.yaml's searxng-settings writes as SearXNG's user (977): a new volume takes the
# owner of the directory it is mounted on; /search-plan likewise, where SearXNG's engine
# writes the Brave plan for the chat service.
COPY requirements.lock ./
RUN --mount=type=secret,id=ca-bundle \
    if [ -f /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
    && pip install --no-cache-dir --no-compile --only-binary=:all: --require-hashes --no-deps \
        -r requirements.lock \
    && useradd --system --home /data chat && mkdir -p /data /rendered /search-plan \
    && chown chat /data && chown 977:977 /rendered /search-plan
# The code runs from /srv as is (no install step, so no build backend in the image).
COPY app ./app
COPY searxng ./searxng
COPY searxng-engines ./searxng-engines
COPY presets ./presets
# Bytecode for what the service imports, not for every module of every package (that
# made the image 18 MB larger): written once here, since the running service cannot. The
# extractor and the export are named: the service imports them only when first used.
RUN PYTHONDONTWRITEBYTECODE= python -c "import app.cli, app.api.factory, app.pages.extract, app.store.export, app.doctor.access, app.search.embedded, app.search.language"
USER chat
ENV DATA_DIR=/data
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --retries=5 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2)"]
CMD ["python", "-m", "app", "serve", "--host", "0.0.0.0", "--port", "8080"]
