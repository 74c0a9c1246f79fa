"""A push-notification config as stored bytes, and back: what llamon's SQLite and
PostgreSQL push-config stores share.

What the caller sees:

* ``PushConfigCodec(encryption_key)``: ``encode(task_id, config)`` is ``(config_id,
  payload)`` -- an id-less config gets the task id as its id -- with the config's JSON
  encrypted by the Fernet key when one is given. ``ValueError`` when the key is not a
  Fernet key.
* ``decode(task_id, config_id, payload)`` reads it back; a payload that does not decrypt
  is read as plain JSON if it is (written before the key was set), else it is skipped
  (``None``) with an error log naming the task and config ids (never the URL or token).
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

from a2a.types import PushNotificationConfig
from pydantic import ValidationError

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

__all__ = ["PushConfigCodec"]

logger = logging.getLogger(__name__)


class PushConfigCodec:
    """Push configs to and from stored bytes, encrypted at rest with a Fernet key if given."""

    def __init__(self, encryption_key: bytes | None = None) -> None:
        self._fernet = _fernet(encryption_key) if encryption_key is not None else None

    def encode(
        self, task_id: str, notification_config: PushNotificationConfig
    ) -> tuple[str, bytes]:
        """``(config_id, payload)`` to store; the config id defaults to ``task_id``."""
        config_id = notification_config.id or task_id
        config = notification_config.model_copy(update={"id": config_id})
        payload = config.model_dump_json().encode()
        if self._fernet is not None:
            payload = self._fernet.encrypt(payload)
        return config_id, payload

    def decode(self, task_id: str, config_id: str, payload: bytes) -> PushNotificationConfig | None:
        """The stored config, or ``None`` (logged) when it cannot be read."""
        if self._fernet is not None:
            from cryptography.fernet import InvalidToken

            with contextlib.suppress(InvalidToken):  # else maybe stored before the key
                payload = self._fernet.decrypt(payload)
        try:
            return PushNotificationConfig.model_validate_json(payload)
        except ValidationError:
            logger.error(
                "push config %r of task %r is unreadable (wrong encryption key or corrupt)",
                config_id,
                task_id,
            )
            return None


def _fernet(key: bytes) -> Fernet:
    try:
        from cryptography.fernet import Fernet
    except ImportError:  # pragma: no cover - cryptography comes with a2a-sdk's extras
        raise ValueError(
            "push_encryption_key needs the 'cryptography' package: pip install cryptography"
        ) from None
    try:
        return Fernet(key)
    except (ValueError, TypeError):
        raise ValueError(
            "push_encryption_key must be a Fernet key (Fernet.generate_key():"
            " 32 url-safe base64-encoded bytes)"
        ) from None
