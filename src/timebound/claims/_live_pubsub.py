"""Live checks on the pubsub service (``timebound.net.live pubsub``): see ``_live``."""

from __future__ import annotations

from collections.abc import Mapping

from ._base import Live

#: label of this service's live job (a ``Sources`` key) -> the ``timebound.net.live`` kind
JOBS: Mapping[str, str] = {}

#: claim text of a row -> its live check on this service
LIVE: Mapping[str, Live] = {}
