"""Environment variables fit to archive: those that may hold a secret are left out."""

import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

# Name parts that mark a credential: API_TOKEN, AWS_SECRET_ACCESS_KEY, PGPASSWORD, MYSQL_PWD,
# NETRC_PASSPHRASE, GOOGLE_APPLICATION_CREDENTIALS, SESSION_COOKIE, HTTP_AUTHORIZATION, ...
# Over-matching (KEYBOARD, AUTHOR) only drops a harmless variable; under-matching leaks a secret.
_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW|PASSPHRASE|_PWD$|CREDENTIAL|COOKIE|AUTH|KEY|PRIVATE|SESSION|SIGNATURE|"
    r"CERT_PASS|SALT|BEARER|DSN|WEBHOOK",
    re.IGNORECASE,
)
# A value carrying a password in a URL (https://user:pass@host), whatever the variable's name.
_URL_CREDENTIALS = re.compile(r"://[^/\s:@]+:[^/\s@]+@")


def is_secret(name: str, value: str) -> bool:
    """Whether a variable's name looks like a token, key, password, secret, credential,
    cookie or auth setting, or its value carries a password in a URL."""
    return bool(_SECRET_NAME.search(name) or _URL_CREDENTIALS.search(value))


def redact_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of env that may be archived: every one that looks like a secret is dropped."""
    return {name: value for name, value in env.items() if not is_secret(name, value)}


REDACTED = "<redacted>"
# What a secret is replaced with: REDACTED for display; a keyed digest for hashing (whichshot.keyed).
Replace = Callable[[str], str]


def _blank(_secret: str) -> str:
    return REDACTED


# A command-line flag whose value is a secret, by the words of its name: --api-key X, --hf-token=X,
# --password X, --ssl-keyfile-password X, --auth X. "key" and "token" count only as the name's last
# word (--api-key, --access-token), so --max-num-batched-tokens, --num-speculative-tokens,
# --tokenizer and --kv-cache-dtype are settings, kept and hashed in clear.
_SECRET_WORDS = {"secret", "secrets", "password", "passwd", "passphrase", "pwd", "credential",
                 "credentials", "cookie", "auth", "authorization", "bearer", "apikey"}  # fmt: skip
_SECRET_LAST_WORDS = {"key", "token"}


def is_secret_flag(flag: str) -> bool:
    """Whether a command-line flag (--api-key, -token) takes a secret as its value."""
    if not flag.startswith("-"):
        return False
    words = [w for w in re.split(r"[-_]+", flag.lstrip("-").lower()) if w]
    return bool(words) and (bool(_SECRET_WORDS.intersection(words)) or words[-1] in _SECRET_LAST_WORDS)


def redact_mapping(values: Any, replace: Replace = _blank) -> Any:
    """A copy of a (nested) mapping with the value of every secret-looking key replaced."""
    if isinstance(values, Mapping):
        return {k: replace(v) if isinstance(v, str) and is_secret(str(k), v) else redact_mapping(v, replace)
                for k, v in values.items()}  # fmt: skip
    if isinstance(values, list):
        return [redact_mapping(v, replace) for v in values]
    return values


def redact_argv(argv: list[str], replace: Replace = _blank) -> list[str]:
    """A copy of an argument list with the value of every secret flag replaced (as the next
    element, or after '='), and any password carried in a URL."""
    redacted: list[str] = []
    for index, element in enumerate(argv):
        flag, eq, value = element.partition("=")
        previous = argv[index - 1] if index else ""
        if index and is_secret_flag(previous) and "=" not in previous:
            redacted.append(replace(element))
        elif eq and is_secret_flag(flag):
            redacted.append(f"{flag}={replace(value)}")
        elif _URL_CREDENTIALS.search(element):
            redacted.append(_URL_CREDENTIALS.sub(lambda m: f"://{replace(m.group(0)[3:-1])}@", element))
        else:
            redacted.append(element)
    return redacted


def redact_url(url: str, replace: Replace = _blank) -> str:
    """A URL fit to write down: any user or password before the host, and the value of every
    secret-looking query parameter (?api_key=...), replaced."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        netloc = f"{replace(user)}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, replace(v) if is_secret(k, v) else v) for k, v in pairs], safe="<>:")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_engine(spec: Mapping[str, Any], replace: Replace = _blank) -> dict[str, Any]:
    """An engine's settings fit to write down: secrets out of its env, argv, request fields and the
    URL of a server it attaches to (replace: what each becomes; REDACTED by default)."""
    safe = dict(spec)
    if isinstance(safe.get("base_url"), str):
        safe["base_url"] = redact_url(safe["base_url"], replace)
    for key in ("env", "request_extra"):
        if key in safe:
            safe[key] = redact_mapping(safe[key], replace)
    if "argv" in safe:
        safe["argv"] = redact_argv(list(safe["argv"]), replace)
    return safe


def redact_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A resolved config fit to archive: every engine's settings redacted."""
    return {**config, "engines": {name: redact_engine(spec) for name, spec in config["engines"].items()}}


def secret_places(config: Mapping[str, Any]) -> list[str]:
    """Where a config (as written, defaults or not) holds what redaction would hide: engines.NAME.argv[2],
    engines.NAME.env.HF_TOKEN, engines.NAME.base_url, ..."""
    engines = config.get("engines") or {}
    if not isinstance(engines, Mapping):
        return []
    return [
        place
        for name, spec in engines.items()
        if isinstance(spec, Mapping)
        for place in _differences(spec, redact_engine(spec), f"engines.{name}")
    ]


def _differences(given: Any, redacted: Any, where: str) -> list[str]:
    if isinstance(given, Mapping) and isinstance(redacted, Mapping):
        return [p for key in given for p in _differences(given[key], redacted.get(key), f"{where}.{key}")]
    if isinstance(given, list) and isinstance(redacted, list) and len(given) == len(redacted):
        pairs = enumerate(zip(given, redacted, strict=True))
        return [p for i, (a, b) in pairs for p in _differences(a, b, f"{where}[{i}]")]
    return [] if given == redacted else [where]
