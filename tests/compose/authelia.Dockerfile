# A stand-in for docker.io/authelia/authelia:4.38, which cannot be pulled here, built by
# tests/compose/images.py under that name (build context: tests/compose).
#
# Imitates what compose.authelia.yaml and nginx use of the image: its configuration read
# from /config/configuration.yml, port 9091, the authorization endpoint
# /api/authz/auth-request, the portal's sign-in API (/api/firstfactor), and a healthcheck of
# its own on /api/health (authelia_standin.py says what it follows and where it differs).
# Differs: it is a small Python service, not Authelia (Go); the AUTHELIA_*_FILE secrets are
# not read; the storage and notifier settings are unused.
FROM python:3.11-slim
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
       python3-argon2 python3-yaml \
    && rm -rf /var/lib/apt/lists/*
COPY authelia_standin.py /app/authelia_standin.py
EXPOSE 9091
HEALTHCHECK --interval=5s --timeout=3s --retries=10 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9091/api/health', timeout=2)"]
CMD ["python", "/app/authelia_standin.py"]
