"""The credential vault: secrets encrypted at rest with ``AHENTIC["VAULT_KEYS"]``.

The keys are Fernet keys (``Fernet.generate_key()``), newest first; ``MultiFernet`` encrypts
with the first and decrypts with any, so rotation is: prepend a new key, run
``manage.py ahentic_vault_rotate`` (``rotate`` on every stored secret), then drop the old key.
The keys are never derived from ``SECRET_KEY``: rotating one must not touch the other.

A secret is never shown back in full: ``hint`` gives ``••••abcd`` for the admin and the API.
"""

from __future__ import annotations

import re
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from sessions_app.conf import ahentic_settings

MASK = "••••"
# Names whose values are secrets: form fields (the browser tools never read or fill one
# unasked), and, with the names of credentials, the keys telemetry masks
# (``orchestrator_app.telemetry.redact``).
SENSITIVE_FIELD_PATTERN = r"pass|secret|token|otp|csrf|cvc|cvv|card.?num|ssn"
_SECRET_NAME = re.compile(
    SENSITIVE_FIELD_PATTERN + r"|authorization|api.?key|cookie|credential|private.?key",
    re.IGNORECASE,
)


def is_secret_name(name: Any) -> bool:
    """Whether a value named ``name`` (a form field, a JSON key, a header) is a secret."""
    return bool(_SECRET_NAME.search(str(name)))


class VaultError(Exception):
    """No key is configured, or a stored secret cannot be decrypted with the keys there are."""


def configured() -> bool:
    return bool(ahentic_settings.VAULT_KEYS)


def key_problem() -> str | None:
    """Why ``VAULT_KEYS`` cannot be used, or None when it can (the system checks report it)."""
    keys = ahentic_settings.VAULT_KEYS
    if not isinstance(keys, list | tuple):
        return "AHENTIC['VAULT_KEYS'] must be a list of Fernet keys, newest first."
    for key in keys:
        try:
            Fernet(key)
        except (ValueError, TypeError):
            return "AHENTIC['VAULT_KEYS'] holds a value that is not a Fernet key."
    return None


def _fernet() -> MultiFernet:
    keys = ahentic_settings.VAULT_KEYS
    if not keys:
        raise VaultError("No AHENTIC['VAULT_KEYS'] configured: credentials cannot be stored.")
    try:
        return MultiFernet([Fernet(key) for key in keys])
    except (ValueError, TypeError) as exc:
        raise VaultError("AHENTIC['VAULT_KEYS'] holds a value that is not a Fernet key.") from exc


def seal(plain: str) -> str:
    """``plain`` encrypted with the newest key ("" stays "")."""
    if not plain:
        return ""
    return _fernet().encrypt(plain.encode()).decode()


def unseal(sealed: str) -> str:
    """The secret ``seal`` stored ("" stays ""); ``VaultError`` when no key opens it."""
    if not sealed:
        return ""
    try:
        return _fernet().decrypt(sealed.encode()).decode()
    except InvalidToken as exc:
        raise VaultError(
            "A stored credential cannot be decrypted with AHENTIC['VAULT_KEYS']."
        ) from exc


def rotate(sealed: str) -> str:
    """``sealed`` encrypted again with the newest key."""
    if not sealed:
        return ""
    try:
        return _fernet().rotate(sealed.encode()).decode()
    except InvalidToken as exc:
        raise VaultError(
            "A stored credential cannot be decrypted with AHENTIC['VAULT_KEYS']."
        ) from exc


def hint(plain: str) -> str:
    """What may be shown of a secret: its last four characters (none of a short one)."""
    return MASK + (plain[-4:] if len(plain) >= 12 else "")
