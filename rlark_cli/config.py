"""Profiles in `$XDG_CONFIG_HOME/rlark/config.toml` (default `~/.config/rlark/config.toml`).

    current = "default"
    [profiles.default]
    url = "https://rlark.example.com"
    token = "..."

The directory is 0700 and the file 0600, written atomically (a temporary file in the same
directory, then a rename), so a reader never sees half a file and a token never sits in a file
others may read. `RLARK_PROFILE` picks the profile, `RLARK_URL` and `RLARK_TOKEN` override its
values. Tokens are never printed or logged; `redact` is what shows one.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlark_cli.errors import USAGE, CliError

DEFAULT_PROFILE = "default"


@dataclass(frozen=True)
class Profile:
    name: str
    url: str
    token: str
    url_from: str  # where the URL came from: "RLARK_URL", "profile", or "" (none)
    token_from: str


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or ""
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".config"
    return root / "rlark"


def config_path() -> Path:
    return config_dir() / "config.toml"


def load() -> dict[str, Any]:
    import tomllib

    path = config_path()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror}") from None
    try:
        config = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise CliError(f"{path} is not valid TOML ({error}); fix or remove it") from None
    if not isinstance(config.get("profiles", {}), dict):
        raise CliError(f"{path}: `profiles` must be a table")
    return config


def save(config: dict[str, Any]) -> Path:
    """Write the whole config atomically with 0600 in a 0700 directory."""
    import tomli_w

    directory = config_dir()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    if stat.S_IMODE(directory.stat().st_mode) != 0o700:
        directory.chmod(0o700)
    path = directory / "config.toml"
    temporary = directory / f".config.toml.{os.getpid()}.tmp"
    text = tomli_w.dumps(config).encode("utf-8")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def profile_name(explicit: str | None, config: dict[str, Any]) -> str:
    name = explicit or os.environ.get("RLARK_PROFILE") or config.get("current")
    return str(name) if name else DEFAULT_PROFILE


def resolve(explicit: str | None = None) -> Profile:
    config = load()
    name = profile_name(explicit, config)
    stored = config.get("profiles", {}).get(name) or {}
    if not isinstance(stored, dict):
        raise CliError(f"{config_path()}: profile {name!r} must be a table")
    env_url, env_token = os.environ.get("RLARK_URL", ""), os.environ.get("RLARK_TOKEN", "")
    url = env_url or str(stored.get("url") or "")
    token = env_token or str(stored.get("token") or "")
    return Profile(name=name, url=url, token=token,
                   url_from="RLARK_URL" if env_url else ("profile" if url else ""),
                   token_from="RLARK_TOKEN" if env_token else ("profile" if token else ""))


def store(name: str, *, url: str, token: str) -> Path:
    config = load()
    profiles = config.setdefault("profiles", {})
    profiles[name] = {"url": url, "token": token}
    config["current"] = name
    return save(config)


def forget_token(name: str) -> bool:
    config = load()
    stored = config.get("profiles", {}).get(name)
    if not isinstance(stored, dict) or "token" not in stored:
        return False
    del stored["token"]
    save(config)
    return True


def redact(token: str) -> str:
    """What may be shown of a token: whether there is one, never any of its characters."""
    return "(set)" if token else "(none)"


def require(profile: Profile) -> None:
    if not profile.url:
        raise CliError(f"no RLark URL for profile {profile.name!r}: run `rlark login --url URL` "
                       "or set RLARK_URL", USAGE)
