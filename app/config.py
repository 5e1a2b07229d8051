"""The environment's settings in one place: read once, checked, with defaults."""

from __future__ import annotations

import ipaddress
import json
import math
import os
import re
import string
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias
from urllib.parse import quote, urlsplit, urlunsplit

from app.errors import ServiceError

ROOT = Path(__file__).resolve().parent.parent
SEARXNG_DIR = ROOT / "searxng"
ENGINE_FILE = ROOT / "searxng-engines" / "brave_api.py"
# Our engine's name and shortcut in searxng/settings.yml (SearXNG wants names lowercase,
# without "_"). Not "braveapi": upstream SearXNG has an engine of that name since 2026,
# which sends Brave neither the locale nor the extra snippets. The module sets the shortcut
# too, so SearXNG's /config shows it wherever the engine is loaded: doctor tells ours by it.
ENGINE_NAME = "braveweb"
ENGINE_SHORTCUT = "bweb"
# Our engine's earlier name and shortcut: a settings.yml or a stored engine
# list (a conversation's, the search cache's, the lab's) that says it still means ours,
# for one release, with a warning.
OLD_ENGINE_NAME = "braveapi"
OLD_ENGINE_SHORTCUT = "bapi"
# Our second engine: Brave's LLM Context, whose results carry their pages' passages, read
# by Brave (searxng-engines/brave_llm.py; the chat service counts them as pages read).
CONTEXT_ENGINE_FILE = ROOT / "searxng-engines" / "brave_llm.py"
CONTEXT_ENGINE_NAME = "bravellm"

# SearXNG runs from PyPI in a virtualenv of its own (its exact pins clash with ours),
# installed from this lock of its whole tree, each file checked against its hash.
SEARXNG_LOCK = SEARXNG_DIR / "requirements.lock"

LOCALE = re.compile(r"^(all|auto|[a-z]{2,3}(-[A-Za-z]{2,4})?)$")


class ConfigError(ServiceError, ValueError):
    """A setting has a value the stack cannot use; the message says which and why."""

    status = 400


def integer(env: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, not {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, not {value}")
    return value


def optional_count(env: Mapping[str, str], name: str) -> int | None:
    """A whole number >= 0, or None when empty (no limit)."""
    if not env.get(name, "").strip():
        return None
    return integer(env, name, 0)


SWITCH_WORDS = {"1": True, "true": True, "on": True, "0": False, "false": False, "off": False}


def switch(env: Mapping[str, str], name: str, default: bool) -> bool:
    """A setting that is on or off: 1, true, on / 0, false, off; empty: the default."""
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw not in SWITCH_WORDS:
        raise ConfigError(f"{name} must be 1 (on) or 0 (off), not {raw!r}")
    return SWITCH_WORDS[raw]


def within(env: Mapping[str, str], name: str, default: int, minimum: int, maximum: int) -> int:
    """A whole number in the range an outside API accepts."""
    value = integer(env, name, default, minimum)
    if value > maximum:
        raise ConfigError(f"{name} must be at most {maximum}, not {value}")
    return value


@dataclass(frozen=True)
class ResearchDefaults:
    """A research run's budget when it asks for none of its own, and the service's caps on
    any run's (Brave's own research mode caps its queries at 50)."""

    searches: int = 12
    pages: int = 20
    minutes: int = 10


RESEARCH_CAPS = ResearchDefaults(searches=50, pages=60, minutes=60)


def research_defaults(env: Mapping[str, str]) -> ResearchDefaults:
    """RESEARCH_SEARCHES, RESEARCH_PAGES, RESEARCH_MINUTES: each from 1 to its cap."""
    given = ResearchDefaults()
    return ResearchDefaults(
        *(
            within(
                env,
                f"RESEARCH_{name.upper()}",
                getattr(given, name),
                1,
                getattr(RESEARCH_CAPS, name),
            )
            for name in ("searches", "pages", "minutes")
        )
    )


HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")
"""A header's name as HTTP allows it (RFC 9110's token)."""


@dataclass(frozen=True)
class ProxyHeaders:
    """The headers a forward-auth proxy names the person in, lower-case as ASGI gives them."""

    user: bytes
    email: bytes | None
    name: bytes | None


def header_name(env: Mapping[str, str], setting: str) -> bytes | None:
    raw = env.get(setting, "").strip()
    if not raw:
        return None
    if not HEADER_NAME.fullmatch(raw):
        raise ConfigError(f"{setting}={raw!r} is not a header name (e.g. Remote-User)")
    return raw.lower().encode()


def proxy_headers(env: Mapping[str, str]) -> ProxyHeaders | None:
    user = header_name(env, "AUTH_USER_HEADER")
    email, name = header_name(env, "AUTH_EMAIL_HEADER"), header_name(env, "AUTH_NAME_HEADER")
    if user is None:
        if email or name:
            raise ConfigError("AUTH_EMAIL_HEADER and AUTH_NAME_HEADER need AUTH_USER_HEADER")
        return None
    if not comma_list(env.get("TRUSTED_PROXIES", "")):
        raise ConfigError(
            "AUTH_USER_HEADER is believed only from TRUSTED_PROXIES, which is empty: "
            "set it to your forward-auth proxy's address"
        )
    return ProxyHeaders(user, email, name)


def comma_list(raw: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(item.strip() for item in raw.split(",") if item.strip()))


def engine_list(engines: str | None) -> str | None:
    """A comma list of SearXNG engines with our engine's old name read as its name now
    (stored lists were written with it)."""
    if not engines:
        return engines
    names = (ENGINE_NAME if name == OLD_ENGINE_NAME else name for name in comma_list(engines))
    return ",".join(dict.fromkeys(names))


def allow_key(entry: str) -> str:
    """A ``host:port`` allow-list entry as the fetcher compares it (lower case, IPv6 in
    brackets). ValueError if it is not host:port."""
    host, _, port = entry.strip().rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    host = host[1:-1] if bracketed else host
    if not host or ":" in host and not bracketed or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{entry!r} is not host:port (e.g. 127.0.0.1:8080 or [::1]:8080)")
    return host_port(host.lower(), int(port))


def parse_allow_hosts(value: str) -> frozenset[str]:
    """FETCH_ALLOW_HOSTS: ``host:port`` entries separated by commas or spaces."""
    return frozenset(allow_key(entry) for entry in value.replace(",", " ").split())


def host_port(host: str, port: int) -> str:
    """An address as the fetcher compares it with FETCH_ALLOW_HOSTS (IPv6 in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def allow_hosts(raw: str) -> frozenset[str]:
    """FETCH_ALLOW_HOSTS, checked now rather than failing in the middle of a turn."""
    try:
        return parse_allow_hosts(raw)
    except ValueError as exc:
        raise ConfigError(f"FETCH_ALLOW_HOSTS: {exc} (use host:port, comma separated)") from None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


MIN_TOKEN_BITS = 128
ALPHABETS = (
    (string.digits, 10),
    (string.hexdigits, 16),
    (string.ascii_lowercase + string.digits, 36),
    (string.ascii_letters + string.digits, 62),
    (string.ascii_letters + string.digits + "-_", 64),
)
"""The smallest of these holding every character of a token tells its bits per character
(any other token: the 95 printable characters' 6.6 bits)."""
MAKE_TOKEN = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"


def token_bits(token: str) -> int:
    """What guessing the token takes at best, in bits, were it random: its length times
    the bits of the smallest usual alphabet it is written in."""
    size = next((n for chars, n in ALPHABETS if set(token) <= set(chars)), 95)
    return int(len(token) * math.log2(size))


def auth_token(token: str) -> str:
    """AUTH_TOKEN, refused when too short to stand between a network and the service."""
    bits = token_bits(token)
    if token and bits < MIN_TOKEN_BITS:
        raise ConfigError(
            f"AUTH_TOKEN is too short to resist guessing: about {bits} bits, "
            f"{MIN_TOKEN_BITS} needed; make one with {MAKE_TOKEN}"
        )
    return token


# What each request must carry as the service built it: a MODEL_PARAMS entry for one of these
# would send another model's name, replace the conversation, offer tools the service does
# not run, or break the stream it reads (and its usage report).
RESERVED_MODEL_PARAMS = ("model", "messages", "tools", "stream", "stream_options")

ModelParameters: TypeAlias = dict[str, Any]
"""One model's MODEL_PARAMS entry: request fields (temperature, top_k, a server's own)
passed to the model server as the user wrote them. Free-form JSON: a server's fields are
its own."""


def model_params(raw: str) -> dict[str, ModelParameters]:
    """MODEL_PARAMS: a JSON object of extra request parameters per model id."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"MODEL_PARAMS is not valid JSON: {exc}") from None
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise ConfigError('MODEL_PARAMS must map model ids to objects: {"id": {"temperature": 0}}')
    for model, params in value.items():
        for key in RESERVED_MODEL_PARAMS:
            if key in params:
                raise ConfigError(
                    f"MODEL_PARAMS for {model!r} sets {key!r}, which the chat service sets "
                    f"itself on every request ({', '.join(RESERVED_MODEL_PARAMS)}); "
                    "remove it"
                )
    return value


@dataclass(frozen=True)
class Settings:
    searxng_url: str
    """An existing SearXNG to use; empty starts the embedded one."""
    search_locale: str
    """Drives SearXNG's default language and the language= every query sends."""
    searxng_venv: Path
    searxng_secret: str
    brave_api_key: str
    brave_api_url: str
    auth_token: str
    """Required to serve on an address other than loopback."""
    log_level: str
    """LOG_LEVEL: DEBUG, INFO (default), WARNING or ERROR."""
    allowed_hosts: frozenset[str]
    """Host names (or host:port) served besides loopback: a LAN name, a reverse proxy's."""
    trusted_proxies: tuple[str, ...]
    """Addresses of reverse proxies whose X-Forwarded-For / X-Forwarded-Proto are believed
    (TRUSTED_PROXIES); none by default, so a client cannot pose as another address."""
    auth_headers: ProxyHeaders | None
    """AUTH_USER_HEADER (with AUTH_EMAIL_HEADER, AUTH_NAME_HEADER): the header naming the
    person a forward-auth proxy signed in, believed from TRUSTED_PROXIES only; None: unset
    (docs/household.md)."""
    published_on_loopback: bool
    """Set by compose.yaml: the container binds all its interfaces (Docker publishes the
    port on 127.0.0.1, but older engines let the LAN reach it, and `ports` may be edited):
    without AUTH_TOKEN, serve makes a token at first start and keeps it in DATA_DIR."""
    llm_base_url: str
    llm_api_key: str
    llm_first_byte_timeout: int
    """Seconds from sending a model request to the server's first byte (its headers).
    llama-server answers only once it has read the prompt: raise this for long prompts on
    slow hardware."""
    llm_idle_timeout: int
    """Seconds a model stream may stay silent between two events."""
    llm_total_timeout: int
    """Seconds one model request may take in all: bounds a stream that never ends."""
    searxng_timeout: int
    """Seconds one SearXNG request may take before the search fails as a tool warning."""
    search_rate: float | None
    """SEARCH_RATE: queries a second searches may go at; None: the Brave plan's rate."""
    brave_price_per_1000: float
    """BRAVE_PRICE_PER_1000: dollars Brave charges for 1,000 queries; 0: not shown."""
    research: ResearchDefaults
    """A research run's budget where it gives none (docs/research.md)."""
    research_plan_wait: int
    """RESEARCH_PLAN_WAIT_SECONDS: how long a plan that waits for Start (the page's pause
    of 0) waits; then the run ends, nothing searched."""
    brave_context_tokens: int
    """BRAVE_CONTEXT_TOKENS: Brave's LLM Context tokens per search (our bravellm engine
    reads it in SearXNG; checked here so a value Brave refuses stops the start)."""
    brave_context_tokens_per_url: int
    """BRAVE_CONTEXT_TOKENS_PER_URL: the same per page."""
    search_plan_file: Path
    """SEARCH_PLAN_FILE: where our engine writes the plan Brave's headers state, and the
    service reads it (DATA_DIR/brave-plan.json by default; Compose: a shared volume)."""
    search_cache_ttl: int
    """SEARCH_CACHE_TTL: seconds a search is served from the cache; 0 turns it off."""
    search_cache_entries: int
    """SEARCH_CACHE_ENTRIES: searches the cache keeps, the least recently used out first."""
    search_cache_shared: bool
    """SEARCH_CACHE_SHARED: household mode's people share one search cache (else each has
    their own)."""
    search_user_daily_limit: int | None
    """SEARCH_USER_DAILY_LIMIT: household mode: the Brave queries each person may spend a
    UTC day, unless `users limit` says otherwise for them; None: no limit."""
    search_user_monthly_limit: int | None
    """SEARCH_USER_MONTHLY_LIMIT: the same a calendar month (UTC)."""
    models: tuple[str, ...]
    default_model: str
    summary_model: str
    model_params: dict[str, ModelParameters]
    data_dir: Path
    database_url: str
    """DATABASE_URL: a postgresql:// URL selects PostgreSQL (several replicas can share
    it); empty: SQLite in DATA_DIR (chat.db). With PGPASSWORD_FILE, its password in it."""
    database_password: str
    """What PGPASSWORD_FILE holds (empty without it), for the URLs migrate-db is given."""
    context_budget_tokens: int
    context_budget_stated: bool
    """CONTEXT_BUDGET_TOKENS was set: a server that does not say its window is then not
    warned of, the user having said how much fits."""
    keep_recent_messages: int
    keep_sources_turns: int
    """How many of the last answers keep their tool results' digest in the history, for
    follow-up questions; 0 keeps none."""
    max_completion_tokens: int
    compress_max_tokens: int
    web_search_max_uses: int
    web_fetch_max_uses: int
    max_tool_rounds: int
    fetch_max_tokens: int
    fetch_timeout: int
    """Seconds one page may take to arrive, redirects included."""
    fetch_allow_hosts: frozenset[str]
    """host:port pairs the fetcher may reach although private (the tests' page server)."""
    loop_lag_probe: bool
    """Measure the event loop's lateness and report it in /healthz (benchmarks)."""
    header_timeout: int
    """HEADER_TIMEOUT: seconds a client has to send a request's headers (app/api/serving.py)."""
    body_timeout: int
    """BODY_TIMEOUT: seconds a client has, after its headers, to send the request's body."""
    max_connections: int
    """MAX_CONNECTIONS: connections served at once; beyond, the one that waited longest
    for its headers is closed."""
    v1_answers_per_client: int
    """V1_ANSWERS_PER_CLIENT: /v1 answers one client address may run at once."""
    sources_in_text: bool
    """SOURCES_IN_TEXT: the default of /v1's `sources_in_text`, for clients that drop
    annotations and cannot send a body field of ours (`llm`, LangChain)."""
    search_activity_in_reasoning: bool
    """SEARCH_ACTIVITY_IN_REASONING: the default of /v1's `search_activity`; off for
    clients that count any reasoning_content as the model's reasoning tokens (litellm)."""


def search_rate(raw: str) -> float | None:
    """SEARCH_RATE: queries a second (``0.5``: one every two seconds); empty: the plan's."""
    if not raw.strip():
        return None
    try:
        rate = float(raw)
    except ValueError:
        rate = 0.0
    if not 0 < rate <= 1000:
        raise ConfigError(
            "SEARCH_RATE must be a number of queries a second above 0 and at most 1000, "
            f"not {raw!r}"
        )
    return rate


BRAVE_SEARCH_PRICE = 5.0
"""Dollars per 1,000 queries on Brave's Search plan, as priced from February 2026."""


def price_per_1000(raw: str) -> float:
    """BRAVE_PRICE_PER_1000: dollars for 1,000 queries; empty: the Search plan's price."""
    if not raw.strip():
        return BRAVE_SEARCH_PRICE
    try:
        price = float(raw)
    except ValueError:
        price = -1.0
    if not 0 <= price <= 1000:
        raise ConfigError(
            f"BRAVE_PRICE_PER_1000 must be dollars for 1,000 queries, 0 to 1000, not {raw!r}"
        )
    return price


def log_level(raw: str) -> str:
    level = raw.strip().upper() or "INFO"
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise ConfigError(f"LOG_LEVEL must be DEBUG, INFO, WARNING or ERROR, not {raw!r}")
    return level


def check_locale(value: str) -> str:
    """The locale as SearXNG spells it (``pl-PL``), or a ConfigError naming the setting."""
    if not LOCALE.match(value):
        raise ConfigError(
            f"invalid search locale {value!r}: use 'all', a language ('pl') "
            "or a language and country ('pl-PL')"
        )
    language, _, territory = value.partition("-")
    return f"{language}-{territory.upper()}" if territory else language


def setting_locale(value: str) -> str:
    try:
        return check_locale(value)
    except ConfigError as exc:
        raise ConfigError(f"SEARCH_LOCALE: {exc}") from None


def secret(env: Mapping[str, str], name: str) -> str:
    """NAME, or what the file NAME_FILE names holds: Compose passes a secret as such a file
    (/run/secrets/...), which neither the environment nor `docker inspect` shows."""
    path = env.get(f"{name}_FILE", "").strip()
    if not path:
        return env.get(name, "")
    if env.get(name, ""):
        raise ConfigError(f"both {name} and {name}_FILE are set: keep one")
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{name}_FILE: cannot read it ({exc})") from None


BRAVE_ENDPOINTS = frozenset(
    f"/res/v1/{name}"
    for name in (
        "web/search",
        "llm/context",
        "news/search",
        "images/search",
        "videos/search",
        "suggest/search",
        "spellcheck/search",
        "summarizer/search",
        "local/pois",
        "local/descriptions",
    )
)
"""The Brave Search API's endpoints (its reference, 2026): BRAVE_API_URL may name one of
them, as SearXNG's own engine takes it, instead of the root our engine adds them to."""


def brave_api_url(raw: str) -> str:
    """BRAVE_API_URL: empty (the official API), an API root (the official one, a proxy, a
    fake; a proxy may serve it under a path), or one of the API's endpoints. Anything else
    would fail every search later, with a less clear reason: refused now."""
    url = raw.strip()
    wrong = brave_url_fault(url) if url else None
    if wrong:
        raise ConfigError(
            "BRAVE_API_URL must be the API's root (https://api.search.brave.com) or one of "
            f"its endpoints (https://api.search.brave.com/res/v1/web/search), not {url[:120]!r}: "
            + wrong
        )
    return url


def brave_url_fault(url: str) -> str | None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "it is not an http(s) address"
    if parts.query or parts.fragment:
        return "a query or fragment has no place in it"
    if parts.username or parts.password:
        return "a user or password has no place in it (the key is BRAVE_API_KEY)"
    path = parts.path.rstrip("/")
    api = path.find("/res/")
    if api >= 0 and path[api:] != "/res/v1" and path[api:] not in BRAVE_ENDPOINTS:
        return f"{path[api:]} is none of the API's endpoints"
    return None


def database_url(raw: str) -> str:
    """DATABASE_URL: empty, or a PostgreSQL URL (postgresql:// or postgres://)."""
    url = raw.strip()
    if url and not url.startswith(("postgresql://", "postgres://")):
        scheme = url.partition("://")[0] if "://" in url else url[:20]
        raise ConfigError(
            f"DATABASE_URL must be a postgresql:// URL (or empty for SQLite in DATA_DIR), "
            f"not one starting {scheme!r}"
        )
    return url


def with_password(url: str, password: str) -> str:
    """A postgresql:// URL with the password in it (libpq reads PGPASSWORD itself, but
    never a file: PGPASSWORD_FILE's goes in the URL); any other URL, or none, as it is."""
    if not password or not url.startswith(("postgresql://", "postgres://")):
        return url
    parts = urlsplit(url)
    userinfo, _, host = parts.netloc.rpartition("@")
    netloc = f"{userinfo.partition(':')[0]}:{quote(password, safe='')}@{host}"
    return urlunsplit(parts._replace(netloc=netloc))


def load(environ: dict[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    password = secret(env, "PGPASSWORD") if env.get("PGPASSWORD_FILE", "").strip() else ""
    models = comma_list(env.get("MODELS", ""))
    default_model = env.get("DEFAULT_MODEL", "").strip() or (models[0] if models else "")
    if default_model and default_model not in models:
        models = (default_model, *models)
    return Settings(
        searxng_url=env.get("SEARXNG_URL", "").strip().rstrip("/"),
        search_locale=setting_locale(env.get("SEARCH_LOCALE", "").strip() or "all"),
        searxng_venv=Path(env.get("SEARXNG_VENV") or ROOT / ".venv-searxng"),
        searxng_secret=env.get("SEARXNG_SECRET", ""),
        brave_api_key=secret(env, "BRAVE_API_KEY"),
        brave_api_url=brave_api_url(env.get("BRAVE_API_URL", "")),
        auth_token=auth_token(secret(env, "AUTH_TOKEN")),
        log_level=log_level(env.get("LOG_LEVEL", "")),
        allowed_hosts=frozenset(
            h.lower().rstrip(".") for h in comma_list(env.get("ALLOWED_HOSTS", ""))
        ),
        trusted_proxies=comma_list(env.get("TRUSTED_PROXIES", "")),
        auth_headers=proxy_headers(env),
        published_on_loopback=env.get("PUBLISHED_ON_LOOPBACK", "") == "1",
        llm_base_url=(env.get("LLM_BASE_URL", "").strip() or "http://127.0.0.1:11434/v1").rstrip(
            "/"
        ),
        llm_api_key=secret(env, "LLM_API_KEY"),
        llm_first_byte_timeout=integer(env, "LLM_FIRST_BYTE_TIMEOUT", 60, 1),
        llm_idle_timeout=integer(env, "LLM_IDLE_TIMEOUT", 300, 1),
        llm_total_timeout=integer(env, "LLM_TOTAL_TIMEOUT", 900, 1),
        searxng_timeout=integer(env, "SEARXNG_TIMEOUT", 20, 1),
        search_rate=search_rate(env.get("SEARCH_RATE", "")),
        brave_price_per_1000=price_per_1000(env.get("BRAVE_PRICE_PER_1000", "")),
        research=research_defaults(env),
        research_plan_wait=within(env, "RESEARCH_PLAN_WAIT_SECONDS", 1800, 1, 86400),
        brave_context_tokens=within(env, "BRAVE_CONTEXT_TOKENS", 8192, 1024, 32768),
        brave_context_tokens_per_url=within(env, "BRAVE_CONTEXT_TOKENS_PER_URL", 4096, 512, 8192),
        search_plan_file=Path(
            env.get("SEARCH_PLAN_FILE", "").strip()
            or Path(env.get("DATA_DIR", "").strip() or ROOT / "data") / "brave-plan.json"
        ),
        search_cache_ttl=integer(env, "SEARCH_CACHE_TTL", 3600),
        search_cache_entries=integer(env, "SEARCH_CACHE_ENTRIES", 1000, 1),
        search_cache_shared=switch(env, "SEARCH_CACHE_SHARED", False),
        search_user_daily_limit=optional_count(env, "SEARCH_USER_DAILY_LIMIT"),
        search_user_monthly_limit=optional_count(env, "SEARCH_USER_MONTHLY_LIMIT"),
        models=models,
        default_model=default_model,
        summary_model=env.get("SUMMARY_MODEL", "").strip() or default_model,
        model_params=model_params(env.get("MODEL_PARAMS", "")),
        data_dir=Path(env.get("DATA_DIR", "").strip() or ROOT / "data"),
        database_url=with_password(database_url(env.get("DATABASE_URL", "")), password),
        database_password=password,
        context_budget_tokens=integer(env, "CONTEXT_BUDGET_TOKENS", 102_400, 1_000),
        context_budget_stated=bool(env.get("CONTEXT_BUDGET_TOKENS", "").strip()),
        keep_recent_messages=integer(env, "KEEP_RECENT_MESSAGES", 8, 2),
        keep_sources_turns=integer(env, "KEEP_SOURCES_TURNS", 3),
        max_completion_tokens=integer(env, "MAX_COMPLETION_TOKENS", 4_096, 16),
        compress_max_tokens=integer(env, "COMPRESS_MAX_TOKENS", 1_200, 100),
        web_search_max_uses=integer(env, "WEB_SEARCH_MAX_USES", 3),
        web_fetch_max_uses=integer(env, "WEB_FETCH_MAX_USES", 2),
        max_tool_rounds=integer(env, "MAX_TOOL_ROUNDS", 6, 1),
        fetch_max_tokens=integer(env, "FETCH_MAX_TOKENS", 12_000, 500),
        fetch_timeout=integer(env, "FETCH_TIMEOUT", 15, 1),
        fetch_allow_hosts=allow_hosts(env.get("FETCH_ALLOW_HOSTS", "")),
        loop_lag_probe=env.get("LOOP_LAG_PROBE", "") == "1",
        header_timeout=integer(env, "HEADER_TIMEOUT", 10, 1),
        body_timeout=integer(env, "BODY_TIMEOUT", 60, 1),
        max_connections=integer(env, "MAX_CONNECTIONS", 500, 10),
        v1_answers_per_client=integer(env, "V1_ANSWERS_PER_CLIENT", 4, 1),
        sources_in_text=switch(env, "SOURCES_IN_TEXT", False),
        search_activity_in_reasoning=switch(env, "SEARCH_ACTIVITY_IN_REASONING", True),
    )
