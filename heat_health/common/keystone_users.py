"""Users' names, read from Keystone with the engine's own credentials.

Nova's instance actions name a user by id; people read names. A name is
looked up once and kept; one that cannot be read is shown as its id.
"""

import threading

from keystoneclient.v3 import client as ks_client
from oslo_config import cfg
from oslo_log import log as logging

from heat_health.common import nova_adapter

LOG = logging.getLogger(__name__)


class UserNames(object):
    """user id -> name, cached for the engine's life.

    :param users: a keystoneclient ``users`` manager, or None to make one
        from the engine's service credentials when first needed.
    """

    def __init__(self, conf=cfg.CONF, users=None):
        self._conf = conf
        self._users = users
        self._names = {}
        self._lock = threading.Lock()

    def _manager(self):
        if self._users is None:
            session = nova_adapter.admin_session(self._conf)
            self._users = ks_client.Client(session=session).users
        return self._users

    def __call__(self, user_id):
        with self._lock:
            if user_id in self._names:
                return self._names[user_id]
        try:
            name = self._manager().get(user_id).name
        except Exception as e:
            LOG.info('Name of user %(u)s not read: %(e)s',
                     {'u': user_id, 'e': e})
            return user_id
        with self._lock:
            self._names[user_id] = name
        return name
