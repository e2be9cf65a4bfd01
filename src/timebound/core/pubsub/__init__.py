"""Causal pub-sub, sans-IO (causal merge paper, section 4): ``Publisher`` (⟨r, c, kn⟩
in the bounded wire form), ``MergerNode`` (replicated causal deterministic mergers,
stackable in levels), ``Subscriber`` (merger order, running digest). Times in ms.
Frame bodies (kind ``KIND_PUBSUB``): ``docs/wire.md``."""

from timebound.core.pubsub._nodes import (
    LEASE,
    LEASE_RENEW,
    MAX_SUBSCRIBERS,
    MergerNode,
    MergerNodeStatistics,
    MergerOutput,
    Publisher,
    Subscriber,
    SubscriberDelivery,
    SubscriberStatistics,
    merger_subscription,
)
from timebound.core.pubsub._wire import (
    MAX_DELTA,
    MAX_EPSILON,
    MAX_N,
    MAX_NAME_BYTES,
    Forwarded,
    Published,
    Subscribe,
    check_name,
    decode,
)

__all__ = [
    "LEASE",
    "LEASE_RENEW",
    "MAX_DELTA",
    "MAX_EPSILON",
    "MAX_N",
    "MAX_NAME_BYTES",
    "MAX_SUBSCRIBERS",
    "Forwarded",
    "MergerNode",
    "MergerNodeStatistics",
    "MergerOutput",
    "Published",
    "Publisher",
    "Subscribe",
    "Subscriber",
    "SubscriberDelivery",
    "SubscriberStatistics",
    "check_name",
    "decode",
    "merger_subscription",
]
