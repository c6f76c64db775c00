"""Upstream adapters, one per wire format (see :mod:`responses_gateway.adapters.base`)."""

from responses_gateway.adapters.base import Adapter, ModelCall

__all__ = ["Adapter", "ModelCall"]
