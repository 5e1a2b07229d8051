# A stand-in for docker.io/library/nginx:1.28-bookworm, which cannot be pulled here, built
# by tests/compose/images.py under that name.
#
# Imitates the official image's interface: nginx on PATH (/usr/sbin/nginx) as the command
# (`nginx -g "daemon off;"`), its configuration in /etc/nginx (nginx.conf, mime.types,
# conf.d/), the user nginx with uid/gid 101, the logs of /var/log/nginx linked to the
# container's stdout and stderr, curl for healthchecks, STOPSIGNAL SIGQUIT, port 80 exposed.
# Differs: nginx is Debian bookworm's package (1.22.1), not
# nginx.org's 1.28; the modules Debian builds as dynamic ones are not loaded (the
# configuration of compose.yaml uses only the core http, proxy and resolver ones); the
# image's own nginx.conf and conf.d/default.conf are Debian's (compose.yaml mounts its own
# nginx.conf over it); no envsubst templates at start (the official entrypoint's
# /etc/nginx/templates, unused here).
FROM python:3.11-slim
RUN groupadd --system --gid 101 nginx \
    && useradd --system --uid 101 --gid 101 --home-dir /nonexistent --shell /usr/sbin/nologin nginx \
    && printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \
    && apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx curl \
    && rm -rf /var/lib/apt/lists/* /etc/nginx/sites-enabled/* /usr/sbin/policy-rc.d \
    && ln -sf /dev/stdout /var/log/nginx/access.log \
    && ln -sf /dev/stderr /var/log/nginx/error.log
EXPOSE 80
STOPSIGNAL SIGQUIT
CMD ["nginx", "-g", "daemon off;"]
