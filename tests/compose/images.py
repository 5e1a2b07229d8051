"""Local stand-ins for the images compose.yaml names, which cannot be pulled here (no image
registry is reachable): built from Debian's packages and PyPI under the exact names, each
from a recipe in this directory that says what it imitates and where it differs.

An image is rebuilt only when its recipe changed (a label holds the recipe's hash), and the
Debian root file system is made once with debootstrap and kept in the cache, so a second
run on the same machine builds nothing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
ROOTFS_IMAGE = "private-search-test/bookworm:rootfs"
BASE_IMAGE = "python:3.11-slim"
LABEL = "org.private-search.recipe"
# Debian's CA bundle with the machine's own CAs: a TLS-intercepting proxy between the
# containers and PyPI needs it. Given to builds as a secret, never stored in an image.
CA_BUNDLE = Path(os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt")
DEBIAN_MIRROR = "http://deb.debian.org/debian"
ROOTFS_PACKAGES = "python3,python3-pip,python3-venv,ca-certificates,netbase,tzdata"


@dataclass(frozen=True)
class Images:
    """The names compose.yaml gives the images it pulls: SearXNG, llama.cpp, and the scale
    profile's PostgreSQL and nginx."""

    searxng: str
    llama: str
    postgres: str
    proxy: str


def compose_images() -> Images:
    services = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    return Images(*(services[name]["image"] for name in ("searxng", "llama", "postgres", "proxy")))


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "private-search-chat" / "compose"


def run(command: list[str], log: Path, **options: object) -> None:
    """Run a build step with its output in `log`; on failure, show its end."""
    with open(log, "a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, **options)  # type: ignore[call-overload]
    if done.returncode != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-40:])
        raise RuntimeError(f"{command[0]} failed ({done.returncode}); log {log}:\n{tail}")


def label_of(image: str) -> str | None:
    """The recipe hash an existing image was built from (None: no such image)."""
    done = subprocess.run(
        [
            "docker",
            "image",
            "inspect",
            "--format",
            f'{{{{index .Config.Labels "{LABEL}"}}}}',
            image,
        ],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def recipe_hash(*files: Path, extra: str = "") -> str:
    digest = hashlib.sha256(extra.encode())
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def base_of(dockerfile: Path) -> str:
    """The image ID a recipe builds on: a rebuilt base makes its images stale."""
    base = next(
        line.split()[1] for line in dockerfile.read_text().splitlines() if line.startswith("FROM ")
    )
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", base], capture_output=True, text=True
    )
    return done.stdout.strip()


def build(image: str, dockerfile: Path, context: Path, recipe: str, log: Path) -> None:
    """Build through Compose, which drives the engine's BuildKit itself (the docker CLI
    would need the buildx plugin for that), with the CA bundle as the secret ca-bundle."""
    spec = {
        "services": {
            "image": {
                "image": image,
                "build": {
                    "context": str(context),
                    "dockerfile": str(dockerfile),
                    "labels": {LABEL: recipe},
                    "secrets": ["ca-bundle"],
                },
            }
        },
        "secrets": {"ca-bundle": {"file": str(CA_BUNDLE)}},
    }
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=cache_dir()) as file:
        yaml.safe_dump(spec, file)
        file.flush()
        run(["docker", "compose", "-p", "stand-ins", "-f", file.name, "build"], log)


def ensure_rootfs(log: Path) -> None:
    """Debian bookworm's minimal system with Python, imported as an image (made once)."""
    recipe = recipe_hash(extra=f"{ROOTFS_PACKAGES} {DEBIAN_MIRROR}")
    if label_of(ROOTFS_IMAGE) == recipe:
        return
    tarball = cache_dir() / f"bookworm-{recipe}.tar"
    if not tarball.exists():
        with tempfile.TemporaryDirectory(dir=cache_dir(), prefix="rootfs-") as scratch:
            target = Path(scratch) / "root"
            debootstrap = ["debootstrap", "--variant=minbase", f"--include={ROOTFS_PACKAGES}"]
            run([*debootstrap, "bookworm", str(target), DEBIAN_MIRROR], log)
            shutil.rmtree(target / "var/cache/apt/archives", ignore_errors=True)
            (target / "var/cache/apt/archives/partial").mkdir(parents=True)
            partial = tarball.with_suffix(".partial")
            run(["tar", "-C", str(target), "-cf", str(partial), "."], log)
            os.replace(partial, tarball)
    change = ["--change", f"LABEL {LABEL}={recipe}", "--change", 'CMD ["bash"]']
    run(["docker", "import", *change, str(tarball), ROOTFS_IMAGE], log)


def ensure_image(image: str, dockerfile: Path, context: Path, log: Path, *inputs: Path) -> None:
    """Build `image` unless it was built from this recipe on a base that is still current."""
    recipe = recipe_hash(dockerfile, *inputs, extra=base_of(dockerfile))
    if label_of(image) != recipe:
        build(image, dockerfile, context, recipe, log)


def ensure_llama(image: str, llama_server: Path, log: Path) -> None:
    dockerfile = HERE / "llama.Dockerfile"
    if label_of(image) == recipe_hash(dockerfile, llama_server, extra=base_of(dockerfile)):
        return
    with tempfile.TemporaryDirectory(prefix="llama-image-") as scratch:
        shutil.copy2(llama_server, Path(scratch) / "llama-server")
        ensure_image(image, HERE / "llama.Dockerfile", Path(scratch), log, llama_server)


def ensure_all(llama_server: Path | None, say: Callable[[str], None] = print) -> dict[str, float]:
    """Every stand-in built (seconds each took; 0 when the cached one was current)."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    log = cache_dir() / "images.log"
    names = compose_images()
    steps: list[tuple[str, Callable[[], None]]] = [
        ("rootfs", lambda: ensure_rootfs(log)),
        (BASE_IMAGE, lambda: ensure_image(BASE_IMAGE, HERE / "python-slim.Dockerfile", HERE, log)),
        (
            names.searxng,
            lambda: ensure_image(
                names.searxng,
                HERE / "searxng.Dockerfile",
                HERE,
                log,
                HERE / "searxng-image.lock",
                HERE / "searxng-entrypoint.sh",
            ),
        ),
        (
            names.postgres,
            lambda: ensure_image(
                names.postgres,
                HERE / "postgres.Dockerfile",
                HERE,
                log,
                HERE / "postgres-entrypoint.sh",
            ),
        ),
        (names.proxy, lambda: ensure_image(names.proxy, HERE / "nginx.Dockerfile", HERE, log)),
    ]
    if llama_server is not None:
        steps.append((names.llama, lambda: ensure_llama(names.llama, llama_server, log)))
    took: dict[str, float] = {}
    for name, step in steps:
        started = time.monotonic()
        step()
        took[name] = round(time.monotonic() - started, 1)
        say(f"stand-in {name}: {took[name]} s")
    return took


def ensure_authelia(say: Callable[[str], None] = print) -> float:
    """The stand-in for compose.authelia.yaml's Authelia built (seconds it took; 0 when the
    cached one was current). Its base, the python:3.11-slim stand-in, is ensure_all's."""
    services = yaml.safe_load((ROOT / "compose.authelia.yaml").read_text())["services"]
    image = services["authelia"]["image"]
    log = cache_dir() / "images.log"
    started = time.monotonic()
    ensure_image(image, HERE / "authelia.Dockerfile", HERE, log, HERE / "authelia_standin.py")
    took = round(time.monotonic() - started, 1)
    say(f"stand-in {image}: {took} s")
    return took
