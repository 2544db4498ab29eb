"""Acting as a stack's owner: its stored context, kept a while.

Everything recovery does to a stack (Nova actions, pool changes, marks,
updates) is done with the stack's stored context, the owner's trust,
never an admin context. Making one costs a login and a new token that
Nova and Octavia each validate, so one is kept per stored credentials
and shared by a root and the stacks nested in it.
"""

import collections
import threading

from heat.common import context as heat_context
from heat.engine import stack as parser

from heat_health.common import nova_adapter
from heat_health.engine.recovery import heat_rows

# Seconds a stack's stored context, and with it one trust-scoped token for
# Nova and Octavia alike, is kept.
CONTEXT_SECONDS = 600

# An update is sent with the owner's trust-scoped token while the token
# has this long to live; heat-engine acts on it for the whole update.
UPDATE_TOKEN_SECONDS = 1800


def token_context(stored):
    """The owner's stored context as the trust-scoped token it holds.

    heat-engine makes a context of its own from the one an update is sent
    with, for each step of the update. From a trust it logs in for each
    (a new token, which Nova and Octavia validate again): seven logins
    per member stack replaced. From a token and its data, as an API
    request or Aodh's trust notifier sends, it reuses the token. The
    same trust and roles either way; the stored context is sent as it is
    when its token has less than UPDATE_TOKEN_SECONDS to live.
    """
    access = stored.auth_plugin.get_access(stored.keystone_session)
    if access.will_expire_soon(UPDATE_TOKEN_SECONDS):
        return stored
    values = stored.to_dict()
    del values['request_id']        # a request of its own
    values.update(
        auth_token=access.auth_token, auth_token_info=access._data,
        trust_id=None, trustor_user_id=None, password=None,
        user_id=access.user_id, project_id=access.project_id,
        user_domain_id=access.user_domain_id,
        project_domain_id=access.project_domain_id,
        roles=access.role_names)
    return heat_context.RequestContext.from_dict(values)


class OwnerContexts(object):
    """The stored contexts of the stacks a HeatReplacer acts on."""

    def __init__(self, clock):
        self._clock = clock
        # Stored contexts by the stored credentials they act with, which
        # a stack shares with every stack nested in it; and which
        # credentials each stack asked for points to.
        self._contexts = {}   # user_creds id -> (stored context, expiry)
        self._creds_of = {}   # stack id -> (user_creds id, expiry)
        self._contexts_lock = threading.Lock()
        self._making = collections.defaultdict(threading.Lock)
        self._admin_nova = None

    @staticmethod
    def _load(ctxt, stack_id, load_template=True):
        """The stack, acting with its stored (owner's) context."""
        return parser.Stack.load(ctxt,
                                 stack=heat_rows.stack_row(ctxt, stack_id),
                                 use_stored_context=True,
                                 load_template=load_template)

    def _stored_context(self, stack_id):
        """The stack's stored (owner's) context, kept a while.

        A fresh one means a new trust-scoped token, which Nova and
        Octavia each validate: most of a recovery's first second. Kept,
        one token serves the drains, Nova actions, pool changes and
        updates of every stack that shares the owner's stored
        credentials: a root and the stacks nested in it.
        """
        now = self._clock()
        with self._contexts_lock:
            creds, until = self._creds_of.get(stack_id, (None, now))
            found = self._contexts.get(creds)
        if until > now and found is not None and found[1] > now:
            return found[0]
        row = heat_rows.stack_state(heat_rows.reader(), stack_id)
        return self._context_of(row, lambda: self._load(
            heat_rows.reader(), stack_id, load_template=False).context)

    def _context_of(self, row, make):
        """The stored context of the stack row's credentials.

        ``make()`` makes one when none is kept; one at a time per
        credentials, so recoveries that start together share one login.
        """
        creds = row.user_creds_id or ('stack', row.id)
        with self._contexts_lock:
            making = self._making[creds]
        with making:
            now = self._clock()
            with self._contexts_lock:
                found = self._contexts.get(creds)
            if found is None or found[1] <= now:
                found = (make(), now + CONTEXT_SECONDS)
            with self._contexts_lock:
                self._contexts[creds] = found
                self._creds_of[row.id] = (creds, found[1])
        return found[0]

    def forget_clients(self, stack_id):
        """After an error: the next client gets a new token and trust.

        Every stack acting with the same stored credentials gets one.
        """
        with self._contexts_lock:
            creds, _until = self._creds_of.pop(stack_id, (None, None))
            self._contexts.pop(creds, None)

    def nova_client(self, stack_id):
        """A novaclient acting as the stack's owner (its stored trust).

        Through Heat's own nova client plugin, so Nova sees the same user
        and project as for the stack's servers.
        """
        return self._client(stack_id, 'nova')

    def admin_nova_client(self, stack_id):
        """A novaclient as heat-health-engine's own user.

        For what a stack's owner may not ask of Nova: an evacuation is an
        admin's by Nova's default policy. The credentials are the ones
        servers are listed with (``nova_auth_section``); ``stack_id`` only
        says whose recovery asks.
        """
        with self._contexts_lock:
            if self._admin_nova is None:
                self._admin_nova = nova_adapter.NovaAdapter().client
            return self._admin_nova

    def mistral_client(self, stack_id):
        """A mistralclient acting as the stack's owner (its stored trust).

        Raises when Mistral is not in the catalog.
        """
        return self._client(stack_id, 'mistral')

    def octavia_client(self, stack_id):
        """An OctaviaAPI acting as the stack's owner (its stored trust)."""
        return self._client(stack_id, 'octavia')

    def _client(self, stack_id, name):
        """One of Heat's clients made with the stack's stored context.

        Heat's client plugins hold their context weakly: the context is
        held here until the client is made, since another thread may drop
        it from the cache (forget_clients) meanwhile.
        """
        ctxt = self._stored_context(stack_id)
        return ctxt.clients.client(name)

    def owner(self, stack_id):
        """Who the stack acts as: the stored credentials it points to.

        For checking that a recovery left the owner and trust unchanged
        (Heat re-points ``user_creds_id`` when another user updates). Holds
        the trust id: do not log it.
        """
        ctxt = heat_rows.reader()
        row = heat_rows.stack_row(ctxt, stack_id)
        stack = parser.Stack.load(ctxt, stack=row, load_template=False)
        stored = stack.stored_context()
        return {'stack_id': row.id,
                # An int from a row, a string from Heat's object.
                'user_creds_id': str(stack.user_creds_id),
                'trust_id': stored.trust_id,
                'trustor_user_id': stored.trustor_user_id,
                'username': row.username,
                'project_id': row.tenant,
                'stack_user_project_id': row.stack_user_project_id}
