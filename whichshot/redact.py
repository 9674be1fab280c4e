"""Environment variables fit to archive: those that may hold a secret are left out."""

import re
from collections.abc import Mapping
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
# A command-line flag whose value is a secret: --api-key X, --hf-token=X, --password X, ...
_SECRET_FLAG = re.compile(r"^--?[\w-]*(token|secret|passw|key|auth|credential|cookie)[\w-]*", re.IGNORECASE)


def redact_mapping(values: Any) -> Any:
    """A copy of a (nested) mapping with the value of every secret-looking key replaced."""
    if isinstance(values, Mapping):
        return {k: REDACTED if isinstance(v, str) and is_secret(str(k), v) else redact_mapping(v)
                for k, v in values.items()}  # fmt: skip
    if isinstance(values, list):
        return [redact_mapping(v) for v in values]
    return values


def redact_argv(argv: list[str]) -> list[str]:
    """A copy of an argument list with the value of every secret-looking flag replaced (as the next
    element, or after '='), and any password carried in a URL."""
    redacted: list[str] = []
    for element in argv:
        flag, eq, _value = element.partition("=")
        if redacted and _SECRET_FLAG.match(redacted[-1]) and "=" not in redacted[-1]:
            redacted.append(REDACTED)
        elif eq and _SECRET_FLAG.match(flag):
            redacted.append(f"{flag}={REDACTED}")
        elif _URL_CREDENTIALS.search(element):
            redacted.append(_URL_CREDENTIALS.sub(f"://{REDACTED}@", element))
        else:
            redacted.append(element)
    return redacted


def redact_url(url: str) -> str:
    """A URL fit to write down: any user or password before the host, and the value of every
    secret-looking query parameter (?api_key=...), replaced."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, REDACTED if is_secret(k, v) else v) for k, v in pairs], safe="<>")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_engine(spec: Mapping[str, Any]) -> dict[str, Any]:
    """An engine's settings fit to write down: secrets out of its env, argv, request fields and the
    URL of a server it attaches to."""
    safe = dict(spec)
    if isinstance(safe.get("base_url"), str):
        safe["base_url"] = redact_url(safe["base_url"])
    for key in ("env", "request_extra"):
        if key in safe:
            safe[key] = redact_mapping(safe[key])
    if "argv" in safe:
        safe["argv"] = redact_argv(list(safe["argv"]))
    return safe


def redact_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A resolved config fit to archive: every engine's settings redacted."""
    return {**config, "engines": {name: redact_engine(spec) for name, spec in config["engines"].items()}}
