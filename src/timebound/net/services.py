"""The public API of the channel, group and pub-sub services (``docs/net.md``)::

    from timebound.net.services import (Channel, ChannelListener, ChannelFailed, Group,
                                        Publisher, MergerServer, SubscriberClient)
"""

from timebound.net._channel import Channel, ChannelFailed, ChannelListener
from timebound.net._group import Group
from timebound.net._pubsub import MergerServer, MsClock, Publisher, SubscriberClient

__all__ = [
    "Channel",
    "ChannelFailed",
    "ChannelListener",
    "Group",
    "MergerServer",
    "MsClock",
    "Publisher",
    "SubscriberClient",
]
