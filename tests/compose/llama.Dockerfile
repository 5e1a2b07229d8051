# A stand-in for ghcr.io/ggml-org/llama.cpp:server-b11312, which cannot be pulled here,
# built by tests/compose/images.py under that name; its build context holds the
# llama-server that tests/llama_server.py builds (the same llama.cpp, b11312).
#
# Imitates: llama-server as the entrypoint (/app/llama-server), so the service's
# `command` is its arguments; curl for healthchecks; LLAMA_ARG_HOST=0.0.0.0; no USER.
# Differs: the base is Debian bookworm (the python:3.11-slim stand-in) rather than
# Ubuntu; the binary is the tests' static CPU build (no web UI, no curl/SSL model download).
FROM python:3.11-slim
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends curl libgomp1 \
    && rm -rf /var/lib/apt/lists/*
COPY llama-server /app/llama-server
WORKDIR /app
ENV LLAMA_ARG_HOST=0.0.0.0
ENTRYPOINT ["/app/llama-server"]
