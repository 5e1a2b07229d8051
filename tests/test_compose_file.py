"""compose.yaml checked statically (tests/test_compose_live.py runs it for real).

It is validated against the Compose Specification's JSON schema (Apache-2.0: see
tests/compose_spec/LICENSE) after the interpolation Compose itself does.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml

from app import config
from app.search.embedded import render_settings

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
SERVICES = COMPOSE["services"]
SCHEMA = json.loads((ROOT / "tests" / "compose_spec" / "compose-spec.json").read_text())
SECRET = "0" * 64

# The forms of the Compose Specification's interpolation: $$, ${VAR}, ${VAR:-default},
# ${VAR-default}, ${VAR:?error}, ${VAR?error}, ${VAR:+replacement}, ${VAR+replacement}, $VAR.
VARIABLE = re.compile(
    r"\$(?:(?P<dollar>\$)|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
    r"|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)


class InterpolationError(ValueError):
    """What Compose refuses to start with: a ${VAR:?message} whose variable is unset."""


def env_example() -> dict[str, str]:
    """.env.example as Compose reads a .env file."""
    return dict(
        line.split("=", 1)
        for line in (ROOT / ".env.example").read_text().splitlines()
        if re.match(r"^[A-Z_][A-Z0-9_]*=", line)
    )


def interpolate_text(text: str, env: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        if match["dollar"]:
            return "$"
        name = match["name"] or match["bare"]
        op, arg = match["op"] or "", match["arg"] or ""
        # With a colon, an empty variable counts as unset.
        unset = name not in env or (op.startswith(":") and env[name] == "")
        if op.endswith("?") and unset:
            raise InterpolationError(f"required variable {name} is missing a value: {arg}")
        if op.endswith("-") and unset:
            return arg
        if op.endswith("+"):
            return "" if unset else arg
        return env.get(name, "")

    result = VARIABLE.sub(value, text)
    assert "${" not in result.replace("$$", ""), f"an interpolation form not handled: {text}"
    return result


def interpolate(node: Any, env: dict[str, str]) -> Any:
    """The file as Compose sees it: every string value interpolated, keys left alone."""
    if isinstance(node, dict):
        return {key: interpolate(value, env) for key, value in node.items()}
    if isinstance(node, list):
        return [interpolate(item, env) for item in node]
    if isinstance(node, str):
        return interpolate_text(node, env)
    return node


def schema_errors(compose: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(SCHEMA)
    return [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(compose)
    ]


def resolved(**env: str) -> dict[str, Any]:
    """compose.yaml with .env.example's values (and a secret, as the user is told to set)."""
    return interpolate(COMPOSE, {**env_example(), "SEARXNG_SECRET": SECRET, **env})


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
    ours = (config.ENGINE_NAME, config.CONTEXT_ENGINE_NAME)
    modules = [e["engine"] for e in settings["engines"] if e["name"] in ours]
    targets = [t for _s, t, _m in bind_mounts(SERVICES["searxng"]) if "/searx/engines/" in t]
    assert targets == [f"/usr/local/searxng/searx/engines/{module}.py" for module in modules]
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


def test_compose_file_is_valid_against_the_compose_spec_with_env_example_values():
    assert schema_errors(resolved()) == []


def test_the_schema_check_catches_a_mistake():
    # A misspelt key must be refused, or the test above proves nothing.
    broken = copy.deepcopy(resolved())
    broken["services"]["chat"]["healthcheck"]["intervall"] = "15s"
    assert schema_errors(broken)


def test_an_empty_searxng_secret_is_refused_with_its_message():
    with pytest.raises(InterpolationError, match=r"set SEARXNG_SECRET in \.env"):
        interpolate(COMPOSE, env_example())  # .env.example leaves it empty


def test_compose_has_its_own_model_server_default():
    env = env_example()
    chat = resolved()["services"]["chat"]
    # Natively 127.0.0.1 is the host; in the chat container it is the container itself.
    assert env["LLM_BASE_URL"] == "http://127.0.0.1:11434/v1"
    assert chat["environment"]["LLM_BASE_URL"] == "http://host.docker.internal:11434/v1"
    assert "host.docker.internal:host-gateway" in chat["extra_hosts"]
    custom = resolved(COMPOSE_LLM_BASE_URL="http://host.docker.internal:8081/v1")
    assert custom["services"]["chat"]["environment"]["LLM_BASE_URL"].endswith(":8081/v1")


def image_workdir() -> str:
    dockerfile = (ROOT / "Dockerfile").read_text()
    return re.search(r"^WORKDIR\s+(\S+)", dockerfile, re.MULTILINE).group(1)


def test_settings_are_rendered_from_the_mounted_directory_not_the_image_copy():
    init = SERVICES["searxng-settings"]
    target = f"{image_workdir()}/{config.SEARXNG_DIR.relative_to(config.ROOT)}"
    assert ("./searxng", target, "ro") in bind_mounts(init)


def test_rendered_settings_are_written_as_searxng_user_before_searxng_mounts_them():
    init = SERVICES["searxng-settings"]
    volume, rendered = next(
        v.split(":")[:2] for v in init["volumes"] if v.startswith("searxng-settings:")
    )
    assert init["command"] == ["python", "-m", "app", "searxng-settings", rendered]
    # The user SearXNG runs as, so its start-up script finds its own files.
    assert init["user"] == SERVICES["searxng"]["user"] == "977:977"
    assert f"{volume}:/etc/searxng:ro" in SERVICES["searxng"]["volumes"]
    # A new volume takes the owner of the image's directory it is mounted on.
    assert re.search(rf"chown 977:977 {rendered}\b", (ROOT / "Dockerfile").read_text())


def test_the_plan_file_is_written_by_searxng_and_read_by_chat_on_a_shared_volume():
    plan = "/search-plan/brave-plan.json"
    for name in ("searxng", "chat"):
        assert SERVICES[name]["environment"]["SEARCH_PLAN_FILE"] == plan, name
    assert "search-plan:/search-plan" in SERVICES["searxng"]["volumes"]
    assert "search-plan:/search-plan:ro" in SERVICES["chat"]["volumes"]
    # Mounted first by the renderer (before SearXNG starts), from the image's directory
    # owned by SearXNG's user: the new volume is SearXNG's to write.
    assert "search-plan:/search-plan" in SERVICES["searxng-settings"]["volumes"]
    assert re.search(r"chown 977:977 [^\n]*/search-plan\b", (ROOT / "Dockerfile").read_text())


# The variables of .env.example that are not the chat service's, each with where it goes.
NOT_FOR_CHAT = {
    "SEARXNG_SECRET": "searxng",
    "BRAVE_API_KEY": "searxng",
    "BRAVE_API_URL": "searxng",
    "BRAVE_CONTEXT_TOKENS": "searxng",
    "BRAVE_CONTEXT_TOKENS_PER_URL": "searxng",
    "SEARXNG_URL": "native runs only: Compose sets its own",
    "LLM_BASE_URL": "native runs only: COMPOSE_LLM_BASE_URL under Compose",
    "COMPOSE_LLM_BASE_URL": "chat's LLM_BASE_URL",
    "DATA_DIR": "native runs only: the image sets /data",
    "SEARCH_PLAN_FILE": "native runs only: Compose sets the shared volume's path",
    "CHAT_PORT": "chat's published port",
    "LLAMA_MODEL_DIR": "llama",
    "LLAMA_MODEL_FILE": "llama",
    "LLAMA_CTX_SIZE": "llama",
    "COMPOSE_PROFILES": "Compose itself",
    "POSTGRES_PASSWORD": "postgres, and the replicas' PGPASSWORD",
    "CHAT_REPLICAS": "chat-replica's number of containers",
    "SEARXNG_WORKERS": "searxng's GRANIAN_WORKERS",
    "BRAVE_API_KEY_FILE": "searxng, as a secret",
    "POSTGRES_PASSWORD_FILE": "postgres, and the replicas' PGPASSWORD_FILE, as a secret",
}
KEY_FILES = {
    "LLM_API_KEY_FILE": "llm-api-key",
    "AUTH_TOKEN_FILE": "auth-token",
    "BRAVE_API_KEY_FILE": "brave-api-key",
    "POSTGRES_PASSWORD_FILE": "postgres-password",
}
"""The keys a user may keep in files, and the Compose secret each becomes."""


def test_every_chat_setting_of_env_example_reaches_the_chat_container():
    """A setting of .env.example that compose.yaml does not hand to chat is silently ignored
    under Compose (ALLOWED_HOSTS was: a Compose user got 421 with no way to fix it)."""
    documented = set(env_example())
    chat = SERVICES["chat"]["environment"]
    missing = sorted(documented - set(NOT_FOR_CHAT) - set(chat))
    assert not missing, f"not passed to the chat service: {missing}"
    for name in documented - set(NOT_FOR_CHAT):
        if name in KEY_FILES:  # a path in the container: the secret's, when one is given
            assert chat[name] == f"${{{name}:+/run/secrets/{KEY_FILES[name]}}}", name
        elif name != "SEARCH_LOCALE":  # SEARCH_LOCALE has Compose's own default
            assert chat[name] == f"${{{name}:-}}", (name, chat[name])
    # What a user writes in .env arrives as written.
    values = {"ALLOWED_HOSTS": "chat.lan", "LOG_LEVEL": "DEBUG", "FETCH_TIMEOUT": "7"}
    environment = resolved(**values)["services"]["chat"]["environment"]
    assert {name: environment[name] for name in values} == values
    for name, where in NOT_FOR_CHAT.items():
        assert name in documented, (name, where)


def test_the_replicas_get_every_chat_setting_and_postgresql_instead_of_sqlite():
    chat = resolved(LOG_LEVEL="DEBUG")["services"]["chat"]["environment"]
    replica = resolved(LOG_LEVEL="DEBUG")["services"]["chat-replica"]["environment"]
    own = {"DATABASE_URL", "PGPASSWORD", "PGPASSWORD_FILE"}
    assert {k: v for k, v in replica.items() if k not in own} == {
        k: v for k, v in chat.items() if k not in own
    }
    assert replica["LOG_LEVEL"] == "DEBUG"
    url = urlsplit(replica["DATABASE_URL"])
    postgres = SERVICES["postgres"]["environment"]
    assert url.scheme == "postgresql" and url.hostname == "postgres" and url.port == 5432
    assert (url.username, url.path) == (postgres["POSTGRES_USER"], f"/{postgres['POSTGRES_DB']}")
    # The password is the one PostgreSQL was made with, from .env only: never in the file,
    # never in the URL (libpq reads PGPASSWORD).
    assert url.password is None
    assert SERVICES["chat-replica"]["environment"]["PGPASSWORD"] == "${POSTGRES_PASSWORD:-}"
    assert postgres["POSTGRES_PASSWORD"] == "${POSTGRES_PASSWORD:-}"
    stack = resolved(POSTGRES_PASSWORD="f00d")["services"]
    assert stack["chat-replica"]["environment"]["PGPASSWORD"] == "f00d"
    assert stack["postgres"]["environment"]["POSTGRES_PASSWORD"] == "f00d"
    assert "f00d" not in (ROOT / "compose.yaml").read_text()


def test_a_plain_http_brave_api_url_reaches_searxng_and_its_renderer():
    for service in ("searxng-settings", "searxng"):
        assert SERVICES[service]["environment"]["BRAVE_API_URL"] == "${BRAVE_API_URL:-}"
    assert "host.docker.internal:host-gateway" in SERVICES["searxng"]["extra_hosts"]


def test_searxng_and_llama_run_unprivileged_with_no_capabilities():
    for name in SERVICES:
        service = SERVICES[name]
        assert service["cap_drop"] == ["ALL"], name
        assert "no-new-privileges:true" in service["security_opt"], name
    for name in ("searxng-settings", "searxng", "llama"):
        assert SERVICES[name]["user"] == "977:977", name


def test_the_locale_change_command_recreates_chat_too():
    """chat reads SEARCH_LOCALE when it starts: a command that leaves it running keeps the
    old language= on every search."""
    command = "docker compose up -d --force-recreate searxng-settings searxng chat"
    readme = (ROOT / "README.md").read_text()
    assert command in readme
    assert "--force-recreate searxng-settings searxng`" not in readme
    assert command.removeprefix("docker compose ") in (ROOT / "compose.yaml").read_text()


def test_the_renderer_knows_whether_there_is_a_brave_key_but_never_the_key():
    key = "BSA-the-users-own-key"
    for env, told in (({"BRAVE_API_KEY": key}, "set"), ({"BRAVE_API_KEY": ""}, "")):
        renderer = resolved(**env)["services"]["searxng-settings"]
        assert renderer["environment"]["BRAVE_API_KEY"] == told
        assert key not in json.dumps(renderer)
        engines = yaml.safe_load(render_settings("pl-PL", brave_api_key=told))["engines"]
        ours = next(e for e in engines if e["name"] == config.ENGINE_NAME)
        assert ours.get("disabled", False) is not bool(told)
    assert resolved(BRAVE_API_KEY=key)["services"]["searxng"]["environment"]["BRAVE_API_KEY"] == key


def test_keys_in_files_reach_only_the_services_that_read_them_as_compose_secrets():
    given = {name: f"./keys/{secret}" for name, secret in KEY_FILES.items()}
    stack = resolved(**given)
    assert {name: entry["file"] for name, entry in stack["secrets"].items()} == {
        secret: given[name] for name, secret in KEY_FILES.items()
    }
    services = stack["services"]
    secrets = {name: set(service.get("secrets", ())) for name, service in services.items()}
    assert secrets["chat"] == {"llm-api-key", "auth-token"}
    assert secrets["chat-replica"] == {"llm-api-key", "auth-token", "postgres-password"}
    assert secrets["searxng"] == {"brave-api-key"}
    assert secrets["postgres"] == {"postgres-password"}
    assert not secrets["searxng-settings"] and not secrets["llama"] and not secrets["proxy"]
    read = {
        ("chat", "LLM_API_KEY_FILE"): "/run/secrets/llm-api-key",
        ("chat", "AUTH_TOKEN_FILE"): "/run/secrets/auth-token",
        ("chat-replica", "PGPASSWORD_FILE"): "/run/secrets/postgres-password",
        ("searxng", "BRAVE_API_KEY_FILE"): "/run/secrets/brave-api-key",
        ("postgres", "POSTGRES_PASSWORD_FILE"): "/run/secrets/postgres-password",
        ("searxng-settings", "BRAVE_API_KEY"): "set",
    }
    for (service, variable), value in read.items():
        assert services[service]["environment"][variable] == value, (service, variable)
    assert schema_errors(stack) == []


def test_keys_in_env_need_no_file():
    """The newcomer's way: .env alone, the secrets' files /dev/null and never read."""
    stack = resolved(LLM_API_KEY="sk-1", POSTGRES_PASSWORD="f00d")
    assert {entry["file"] for entry in stack["secrets"].values()} == {"/dev/null"}
    chat, postgres = stack["services"]["chat"], stack["services"]["postgres"]
    assert (chat["environment"]["LLM_API_KEY"], chat["environment"]["LLM_API_KEY_FILE"]) == (
        "sk-1",
        "",
    )
    assert postgres["environment"]["POSTGRES_PASSWORD_FILE"] == ""


def test_every_container_has_a_read_only_root_and_memory_for_what_it_writes():
    for name, service in SERVICES.items():
        assert service["read_only"] is True, name
        assert "/tmp" in service["tmpfs"], name
    # PostgreSQL's socket and lock file; its cluster is on its volume.
    assert "/var/run/postgresql" in SERVICES["postgres"]["tmpfs"]


def test_searxng_cannot_reach_postgresql_or_the_model_server():
    """SearXNG reads what the internet sends: only the chat services share its network."""
    networks = {name: set(service.get("networks", ())) for name, service in SERVICES.items()}
    assert networks["searxng"] == {"frontend"}
    for name in ("postgres", "llama", "proxy"):
        assert networks[name] == {"backend"}, name
    for name in ("chat", "chat-replica"):
        assert networks[name] == {"frontend", "backend"}, name
    assert SERVICES["searxng-settings"]["network_mode"] == "none"
    assert set(COMPOSE["networks"]) == {"frontend", "backend"}


def test_searxng_binds_ipv4_keeps_a_cache_volume_and_checks_health_with_wget():
    searxng = SERVICES["searxng"]
    assert searxng["environment"]["GRANIAN_HOST"] == "0.0.0.0"
    assert "searxng-cache:/var/cache/searxng" in searxng["volumes"]
    assert "searxng-cache" in COMPOSE["volumes"]
    assert searxng["healthcheck"]["test"][:2] == ["CMD", "wget"]


def test_dockerignore_keeps_secrets_and_bulk_out_but_not_what_the_image_copies():
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    wanted = {".venv", ".venv-searxng", ".git", ".env", "data", "docs", "tests", "bench"}
    assert wanted <= ignored, sorted(wanted - ignored)
    copied = re.findall(r"^COPY\s+(\S+)", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert copied and not ignored & set(copied)


def test_the_llm_profile_runs_a_pinned_llama_server_the_chat_service_can_reach():
    llama = SERVICES["llama"]
    assert llama["profiles"] == ["llm"]  # `docker compose up` alone does not start it
    assert re.fullmatch(r"ghcr\.io/ggml-org/llama\.cpp:server-b\d+", llama["image"])
    assert "ports" not in llama, "the model server is for the stack only"
    profiles = {name: service.get("profiles") for name, service in SERVICES.items()}
    assert profiles == {
        **dict.fromkeys(("searxng-settings", "searxng", "chat")),
        "llama": ["llm"],
        **dict.fromkeys(("postgres", "chat-replica", "proxy"), ["scale"]),
    }

    stack = resolved(COMPOSE_LLM_BASE_URL="http://llama:8080/v1", LLAMA_MODEL_DIR="/srv/gguf")
    assert schema_errors(stack) == []
    served = stack["services"]["llama"]
    command = served["command"]
    option = dict(zip(command, command[1:], strict=False))
    # The chat service's URL names this service and the port it listens on, on all its
    # interfaces (loopback in the container would be unreachable from the chat service).
    chat_url = stack["services"]["chat"]["environment"]["LLM_BASE_URL"]
    assert chat_url == f"http://llama:{option['--port']}/v1" and option["--host"] == "0.0.0.0"
    assert "--jinja" in command and int(option["--ctx-size"]) == 8192
    # The model file is read from the host directory, mounted read-only.
    assert "/srv/gguf:/models:ro" in served["volumes"]
    assert option["--model"] == "/models/model.gguf"
    assert served["healthcheck"]["test"][-1].endswith(":8080/health")


def locked(path: Path) -> dict[str, tuple[str, int]]:
    """name -> (version, number of hashes) of a lock written by `make lock`."""
    entries: dict[str, tuple[str, int]] = {}
    name = ""
    for line in path.read_text().splitlines():
        pin = re.match(r"^([A-Za-z0-9_.\-]+)==(\S+)", line)
        if pin:
            name = pin[1].lower().replace("_", "-")
            entries[name] = (pin[2], 0)
        elif "--hash=sha256:" in line and name:
            version, hashes = entries[name]
            entries[name] = (version, hashes + 1)
    return entries


def direct_pins(extra: str | None = None) -> dict[str, str]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = list(project["dependencies"])
    if extra:
        pins += project["optional-dependencies"][extra]
    # A pin with extras (psycopg[binary]) is locked under its name alone.
    return {
        p.split("==")[0].split("[")[0].lower().replace("_", "-"): p.split("==")[1] for p in pins
    }


@pytest.mark.parametrize(
    ("lock", "extra"), [("requirements.lock", None), ("requirements-test.lock", "test")]
)
def test_the_lock_pins_the_whole_tree_with_hashes_at_pyprojects_versions(lock, extra):
    entries = locked(ROOT / lock)
    pins = direct_pins(extra)
    assert {name: entries.get(name, ("missing", 0))[0] for name in pins} == pins
    assert "pydantic" in pins  # imported by app/config.py itself, so declared
    assert len(entries) > len(pins)  # the transitive dependencies are pinned too
    assert all(hashes for _, hashes in entries.values()), entries


def test_the_tests_run_on_the_versions_the_image_installs():
    shipped, tested = locked(ROOT / "requirements.lock"), locked(ROOT / "requirements-test.lock")
    assert {name: tested.get(name, ("missing", 0))[0] for name in shipped} == {
        name: version for name, (version, _) in shipped.items()
    }


def test_the_image_and_make_install_from_the_locks_checking_hashes():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(
        r"pip install [^\n]*--require-hashes --no-deps \\\n\s+-r requirements.lock", dockerfile
    )
    assert "COPY requirements.lock" in dockerfile
    makefile = (ROOT / "Makefile").read_text()
    assert "pip install --quiet --require-hashes --no-deps -r requirements-test.lock" in makefile
    assert re.search(r"^lock:", makefile, re.MULTILINE)


def test_the_tests_override_is_valid_and_gives_the_chat_build_the_ca_bundle_as_a_secret():
    override = yaml.safe_load((ROOT / "tests" / "compose" / "compose.test.yaml").read_text())
    assert schema_errors(interpolate(override, {"CA_BUNDLE": "/etc/ssl/certs/ca.crt"})) == []
    assert override["services"]["chat"]["build"]["secrets"] == ["ca-bundle"]
    # The Dockerfile mounts it for the pip step only; no COPY or ENV keeps it in the image.
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "--mount=type=secret,id=ca-bundle" in dockerfile
    assert "ca-bundle" not in "".join(re.findall(r"^(?:COPY|ENV|ADD).*$", dockerfile, re.M))


NGINX = (ROOT / "proxy" / "nginx.conf").read_text()


def nginx_directives(name: str) -> list[str]:
    """The values of every `name ...;` line of proxy/nginx.conf."""
    return re.findall(rf"^\s*{name}\s+([^;]*);", NGINX, re.MULTILINE)


def test_the_scale_profile_is_postgresql_replicas_and_a_proxy_on_the_chat_port():
    postgres, replica, proxy = (SERVICES[n] for n in ("postgres", "chat-replica", "proxy"))
    assert postgres["image"] == "docker.io/library/postgres:15"
    assert re.fullmatch(r"docker\.io/library/nginx:\d+\.\d+-bookworm", proxy["image"])
    # PostgreSQL and the replicas are reached only on the stack's network; the proxy takes
    # the single service's address, so the two cannot both serve.
    assert "ports" not in postgres and "ports" not in replica
    assert proxy["ports"] == SERVICES["chat"]["ports"]
    assert "postgres-data:/var/lib/postgresql/data" in postgres["volumes"]
    assert postgres["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    assert replica["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert replica["depends_on"]["searxng"]["condition"] == "service_healthy"
    assert proxy["depends_on"]["chat-replica"]["condition"] == "service_healthy"
    assert replica["image"] == SERVICES["chat"]["image"]
    # The household's memory.md and access token, whichever replica serves.
    assert (
        "chat-data:/data" in replica["volumes"] and "chat-data:/data" in SERVICES["chat"]["volumes"]
    )
    for name in ("postgres", "chat-replica", "proxy"):
        assert SERVICES[name]["healthcheck"]["test"], name
    assert (SERVICES["postgres"]["user"], proxy["user"]) == ("999:999", "101:101")


def test_the_number_of_replicas_and_searxng_workers_come_from_env():
    env = env_example()
    stack = resolved()["services"]
    assert stack["chat-replica"]["deploy"]["replicas"] == env["CHAT_REPLICAS"] == "2"
    assert stack["searxng"]["environment"]["GRANIAN_WORKERS"] == env["SEARXNG_WORKERS"]
    stack = resolved(CHAT_REPLICAS="3", SEARXNG_WORKERS="4")["services"]
    assert stack["chat-replica"]["deploy"]["replicas"] == "3"
    assert stack["searxng"]["environment"]["GRANIAN_WORKERS"] == "4"
    assert schema_errors(resolved(CHAT_REPLICAS="3")) == []


def test_the_proxy_streams_unbuffered_to_the_replicas_and_runs_unprivileged():
    proxy = SERVICES["proxy"]
    assert ("./proxy/nginx.conf", "/etc/nginx/nginx.conf", "ro") in bind_mounts(proxy)
    # The port it listens on is the one published, and it sends to the replicas' service
    # name on the port they serve (the Dockerfile's).
    assert nginx_directives("listen") == [proxy["ports"][0].rsplit(":", 1)[1]]
    assert nginx_directives("set") == ["$replicas chat-replica"]
    served = re.search(r"^EXPOSE\s+(\d+)", (ROOT / "Dockerfile").read_text(), re.M).group(1)
    assert nginx_directives("proxy_pass") == [f"http://$replicas:{served}"]
    # Docker's DNS, asked at run time (a name in a variable needs a resolver).
    assert nginx_directives("resolver")[0].startswith("127.0.0.11 ")
    # Server-sent events: unbuffered, HTTP/1.1, and no cut before the longest turn.
    assert nginx_directives("proxy_buffering") == ["off"]
    assert nginx_directives("proxy_http_version") == ["1.1"]
    assert nginx_directives("proxy_ignore_client_abort") == ["off"]
    (read_timeout,) = nginx_directives("proxy_read_timeout")
    assert int(read_timeout.removesuffix("s")) >= int(env_example()["LLM_TOTAL_TIMEOUT"])
    # As its image's nginx user (no capabilities): nothing written outside /tmp.
    paths = nginx_directives("pid") + [
        v
        for n in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        for v in nginx_directives(f"{n}_temp_path")
    ]
    assert len(paths) == 6 and all(p.startswith("/tmp/") for p in paths), paths
    assert "user" not in re.findall(r"^\s*(\w+)", NGINX, re.M)


def seconds(value: str) -> int:
    return int(value.removesuffix("s"))


def test_the_proxy_shields_the_replicas_from_slow_clients():
    """Slowloris at the proxy: nginx waits 60 s for headers by default; here no longer
    than a replica itself would (HEADER_TIMEOUT), with room for many sockets."""
    (header,) = nginx_directives("client_header_timeout")
    assert seconds(header) <= 10
    assert seconds(nginx_directives("client_body_timeout")[0]) <= 30
    assert seconds(nginx_directives("keepalive_timeout")[0]) <= 30
    assert nginx_directives("reset_timedout_connection") == ["on"]
    (connections,) = nginx_directives("worker_connections")
    assert int(connections) >= 4096
    assert int(nginx_directives("worker_rlimit_nofile")[0]) >= 2 * int(connections)
    (zone,) = nginx_directives("limit_conn_zone")
    assert zone.startswith("$binary_remote_addr zone=per_client:")
    assert nginx_directives("limit_conn") == ["per_client 256"]
    assert nginx_directives("limit_conn_status") == ["429"]


def test_the_readme_scale_command_is_compose_yamls_and_leaves_the_single_service_out():
    """`--profile scale up` alone would start the single chat service too (it has no
    profile): the command names the proxy, which brings what it depends on."""
    command = "docker compose --profile scale up -d --build --wait proxy"
    assert command in (ROOT / "README.md").read_text()
    assert command in (ROOT / "compose.yaml").read_text()
    needed, queue = set(), ["proxy"]
    while queue:
        name = queue.pop()
        needed.add(name)
        queue += [d for d in SERVICES[name].get("depends_on", {}) if d not in needed]
    assert needed == {"proxy", "chat-replica", "postgres", "searxng", "searxng-settings"}


def test_the_authelia_override_believes_the_header_from_nginxs_fixed_address_only():
    """compose.authelia.yaml (docs/household.md): TRUSTED_PROXIES is nginx's own address,
    which no other container can be given, and nginx sets each header the replicas read."""
    text = (ROOT / "compose.authelia.yaml").read_text()
    override = interpolate(yaml.safe_load(text), {"PROXY_NETWORK": "10.9.8"})
    assert schema_errors(override) == []
    services, network = override["services"], override["networks"]["backend"]["ipam"]["config"][0]
    replica, proxy = services["chat-replica"]["environment"], services["proxy"]
    nginx = proxy["networks"]["backend"]["ipv4_address"]
    assert replica["TRUSTED_PROXIES"] == nginx == "10.9.8.2"
    address = ipaddress.ip_address(nginx)
    assert address in ipaddress.ip_network(network["subnet"])
    assert address not in ipaddress.ip_network(network["ip_range"])
    assert "ports" not in services["authelia"] and services["authelia"]["networks"] == ["backend"]
    # Each setting reaches the replicas through compose.yaml's chat environment too.
    assert set(replica) <= set(SERVICES["chat"]["environment"])
    conf = (ROOT / "deploy" / "authelia" / "nginx.conf").read_text()
    assert ("./deploy/authelia/nginx.conf", "/etc/nginx/nginx.conf", "ro") in bind_mounts(proxy)
    assert "/api/authz/auth-request" in conf
    for setting in ("AUTH_USER_HEADER", "AUTH_EMAIL_HEADER", "AUTH_NAME_HEADER"):
        header = replica[setting]
        variable = re.search(
            rf"auth_request_set \$(\w+) \$upstream_http_{header.lower().replace('-', '_')};", conf
        )
        assert variable, header
        assert f"proxy_set_header {header} ${variable[1]};" in conf
