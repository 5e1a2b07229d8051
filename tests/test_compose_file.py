"""compose.yaml checked statically: there is no Docker engine on the test machines."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from app import config
from app.searxng import render_settings

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
SERVICES = COMPOSE["services"]


def bind_mounts(service: dict) -> list[tuple[str, str, str]]:
    mounts = []
    for volume in service.get("volumes", []):
        source, target, *mode = volume.split(":")
        if source.startswith("."):
            mounts.append((source, target, mode[0] if mode else "rw"))
    return mounts


def test_every_mounted_file_exists():
    for name, service in SERVICES.items():
        for source, _target, _mode in bind_mounts(service):
            assert (ROOT / source).exists(), f"{name} mounts missing {source}"


def test_engine_mount_target_matches_the_engine_module_in_settings():
    settings = yaml.safe_load(render_settings("all"))
    entry = next(e for e in settings["engines"] if e["name"] == config.ENGINE_NAME)
    targets = [t for _s, t, _m in bind_mounts(SERVICES["searxng"]) if "/searx/engines/" in t]
    assert targets == [f"/usr/local/searxng/searx/engines/{entry['engine']}.py"]
    assert config.ENGINE_NAME in settings["use_default_settings"]["engines"]["keep_only"]


def test_searxng_settings_and_engine_are_mounted_read_only():
    searxng = SERVICES["searxng"]
    assert all(mode == "ro" for _s, _t, mode in bind_mounts(searxng))
    assert "searxng-settings:/etc/searxng:ro" in searxng["volumes"]


def test_searxng_uses_a_pinned_official_image():
    image = SERVICES["searxng"]["image"]
    assert re.fullmatch(r"docker\.io/searxng/searxng:\d{4}\.\d+\.\d+-[0-9a-f]+", image)


def test_searxng_is_not_published_on_the_host():
    assert "ports" not in SERVICES["searxng"]


def test_chat_is_published_on_loopback_only():
    ports = SERVICES["chat"]["ports"]
    assert ports and all(p.startswith("127.0.0.1:") for p in ports)
    # The container may then bind all its interfaces without a token.
    assert SERVICES["chat"]["environment"]["PUBLISHED_ON_LOOPBACK"] == "1"


def test_both_services_have_healthchecks_and_start_in_order():
    for name in ("searxng", "chat"):
        assert SERVICES[name]["healthcheck"]["test"], name
    assert SERVICES["chat"]["depends_on"]["searxng"]["condition"] == "service_healthy"
    assert (
        SERVICES["searxng"]["depends_on"]["searxng-settings"]["condition"]
        == "service_completed_successfully"
    )


def test_one_locale_variable_drives_searxng_and_chat():
    for name in ("searxng-settings", "chat"):
        assert SERVICES[name]["environment"]["SEARCH_LOCALE"].startswith("${SEARCH_LOCALE")


def test_every_variable_used_is_documented_in_env_example():
    used = set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*)", (ROOT / "compose.yaml").read_text()))
    documented = {
        line.split("=", 1)[0]
        for line in (ROOT / ".env.example").read_text().splitlines()
        if re.match(r"^[A-Z_][A-Z0-9_]*=", line)
    }
    assert used, "compose.yaml uses no variable: the check would prove nothing"
    assert used <= documented, f"undocumented: {sorted(used - documented)}"
