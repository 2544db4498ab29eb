"""The signature of a WEBHOOK rung's body, and the policy's key for it.

Each policy has a key of its own, derived from Heat's
``auth_encryption_key`` and the policy's id: every heat-health-engine
and heat-engine that shares Heat's configuration computes the same key
without storing it, the resource gives it to the template (its
``webhook_secret`` attribute) for the receiver, and one policy's key
tells nothing of another's. Changing ``auth_encryption_key`` changes them
all, as it already re-keys Heat's stored credentials.
"""

import hashlib
import hmac

from heat.common import crypt  # noqa: F401 (auth_encryption_key)
from oslo_config import cfg

HEADER = 'X-Heat-Health-Signature'
PREFIX = 'sha256='


def policy_secret(policy_id, conf=cfg.CONF):
    """The policy's signing key, as text."""
    return hmac.new(conf.auth_encryption_key.encode('utf-8'),
                    b'heat-health webhook ' + policy_id.encode('utf-8'),
                    hashlib.sha256).hexdigest()


def signature(secret, body):
    """The header's value for ``body`` (bytes): ``sha256=<hex>``."""
    return PREFIX + hmac.new(secret.encode('utf-8'), body,
                             hashlib.sha256).hexdigest()


def verify(secret, body, header):
    """Whether ``header`` is the signature of ``body``: for receivers."""
    return hmac.compare_digest(signature(secret, body), header or '')
