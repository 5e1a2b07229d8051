#!/bin/sh
# The start-up of the SearXNG stand-in (searxng.Dockerfile), behaving as the official
# image's entrypoint does: it checks that its two volumes and settings.yml belong to the
# searxng user, chowns them when run as root and warns otherwise, creates settings.yml from
# SearXNG's template when there is none, writes a random secret into it, then runs Granian.
# No `set -e`, as there: a step that fails (a chown or an edit on a read-only mount)
# prints its error and the server starts anyway.

owned_by_searxng() {
    [ "$(stat -c %U:%G "$1")" = "searxng:searxng" ]
}

fix_ownership() {
    owned_by_searxng "$1" && return
    if [ "$(id -u)" -eq 0 ]; then
        chown -R searxng:searxng "$1"
    else
        echo "!!! WARNING: $1 is not owned by searxng; this may cause issues when running SearXNG"
    fi
}

echo "SearXNG $SEARXNG_VERSION"
for directory in "$CONFIG_PATH" "$DATA_PATH"; do
    if [ ! -d "$directory" ]; then
        echo "!!! ERROR: $directory is not a valid directory, exiting..."
        exit 127
    fi
    fix_ownership "$directory"
done

template=/usr/local/searxng/searx/settings.yml
if [ -f "$SEARXNG_SETTINGS_PATH" ]; then
    fix_ownership "$SEARXNG_SETTINGS_PATH"
    if [ "$template" -nt "$SEARXNG_SETTINGS_PATH" ]; then
        cp -pfT "$template" "$SEARXNG_SETTINGS_PATH.new"
        echo "... INFORMATION: a newer settings template is at $SEARXNG_SETTINGS_PATH.new"
    fi
else
    echo "... INFORMATION: $SEARXNG_SETTINGS_PATH does not exist, creating from template..."
    cp -pfT "$template" "$SEARXNG_SETTINGS_PATH"
fi

secret=$(head -c 24 /dev/urandom | base64 | tr -dc 'a-zA-Z0-9')
sed -i -e "s/ultrasecretkey/$secret/g" "$SEARXNG_SETTINGS_PATH"

exec /usr/local/searxng/.venv/bin/granian searx.webapp:app
