"""Environment variables fit to archive: those that may hold a secret are left out."""

import re
from collections.abc import Mapping

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
