"""Recovery actions on one server, through a python-novaclient Client.

The caller builds the client (from the stack's stored trust, through
Heat's nova client plugin), so actions run as the stack's owner. This
adapter only speaks to Nova and sorts its answers into the three outcomes
recovery treats differently:

* ``ServerGone`` (404): the server no longer exists; recreate it, or,
  when fencing, it is dead for sure;
* ``ActionRefused`` (409; 400 for an evacuation, whose compute Nova
  still takes for up): Nova will not do this in the server's state (a
  task is set, wrong vm_state, locked); another action may work;
* ``NovaActionFailed``: Nova could not be asked or failed (5xx, timeout,
  no endpoint, bad credentials, any other HTTP error); it says nothing
  about the server, so the same action may be retried later.
"""

import collections
import datetime

from keystoneauth1 import exceptions as ks_exc
from novaclient import exceptions as nova_exc
from oslo_log import log as logging
from oslo_utils import timeutils
import requests

LOG = logging.getLogger(__name__)

ServerStatus = collections.namedtuple(
    'ServerStatus', ['id', 'status', 'vm_state', 'task_state',
                     'power_state', 'image_id', 'updated', 'name',
                     'addresses', 'fault'], defaults=(None, (), None))
"""A server as Nova shows it: ``status`` (ACTIVE, SHUTOFF...), the
``OS-EXT-STS`` vm_state, task_state and (integer) power_state, the id of
the image it was built from (None when it boots from a volume),
``updated`` (Nova's ISO 8601 time of the last change), its name, its
addresses (for the params of a workflow or webhook rung) and Nova's
``fault`` (message, code, created) of a server in ERROR, else None."""

InstanceAction = collections.namedtuple(
    'InstanceAction', ['action', 'user_id', 'project_id', 'request_id',
                       'start_time', 'message'])
"""One of Nova's instance actions: what was asked (``stop``,
``reboot``...), by which user and project (None for both when Nova acted
by itself, as its power sync stops a guest that shut down), the request
id, when (a naive UTC datetime) and Nova's message (None unless it
failed)."""

ACTIONS = (START, STOP, UNPAUSE, RESUME, REBOOT, REBUILD, EVACUATE) = (
    'START', 'STOP', 'UNPAUSE', 'RESUME', 'REBOOT', 'REBUILD', 'EVACUATE')
REBOOT_TYPES = ('SOFT', 'HARD')


class ServerGone(Exception):
    """404: the server no longer exists."""


class ActionRefused(Exception):
    """409: Nova refuses the action in the server's current state."""


class NovaActionFailed(Exception):
    """Nova could not be reached, or failed otherwise."""


def _reason(error):
    """Nova's own words, with the HTTP code and request id when known."""
    if isinstance(error, nova_exc.ClientException):
        text = '%s (HTTP %s)' % (error.message, error.code)
        if error.request_id:
            text += ' (Request-ID: %s)' % error.request_id
        return text
    return '%s: %s' % (type(error).__name__, error)


def _instance_action(info):
    start = info.get('start_time')
    return InstanceAction(
        action=info.get('action'), user_id=info.get('user_id'),
        project_id=info.get('project_id'),
        request_id=info.get('request_id'),
        start_time=start and timeutils.normalize_time(
            timeutils.parse_isotime(start)),
        message=info.get('message'))


def _fault(fault):
    """Nova's fault of a server: its message, code and time."""
    if not isinstance(fault, dict):
        return None
    return {key: fault.get(key) for key in ('message', 'code', 'created')}


def _started(action):
    """Sort key: when it started (one without a time counts as oldest)."""
    return action.start_time or datetime.datetime.min


class NovaActions(object):
    """Status and recovery actions of servers, with one novaclient Client."""

    def __init__(self, client):
        self._client = client

    def _call(self, what, server_id, func, *args, refusals=(
            nova_exc.Conflict,)):
        try:
            return func(*args)
        except nova_exc.NotFound as e:
            raise ServerGone('server %s not found: %s' % (
                server_id, _reason(e)))
        except refusals as e:
            raise ActionRefused('Nova refused %s of server %s: %s' % (
                what, server_id, _reason(e)))
        except (nova_exc.ClientException, ks_exc.ClientException,
                requests.RequestException) as e:
            raise NovaActionFailed('%s of server %s failed: %s' % (
                what, server_id, _reason(e)))

    def status(self, server_id):
        """The server's ServerStatus (GET /servers/{id})."""
        server = self._call('status', server_id, self._client.servers.get,
                            server_id)
        info = server.to_dict()
        image = info.get('image')
        return ServerStatus(
            id=info.get('id', server_id),
            status=info.get('status'),
            vm_state=info.get('OS-EXT-STS:vm_state'),
            task_state=info.get('OS-EXT-STS:task_state'),
            power_state=info.get('OS-EXT-STS:power_state'),
            # A server booted from a volume has '' for its image.
            image_id=image.get('id') if isinstance(image, dict) else None,
            updated=info.get('updated'), name=info.get('name'),
            addresses=tuple(
                a.get('addr') for net in (info.get('addresses') or {})
                .values() for a in net if a.get('addr')),
            fault=_fault(info.get('fault')))

    def console_tail(self, server_id, lines):
        """The last ``lines`` lines of the server's console log.

        :raises ActionRefused: Nova has no console log of it now (409;
            a driver without one answers otherwise: NovaActionFailed).
        """
        return str(self._call('console output', server_id,
                              self._client.servers.get_console_output,
                              server_id, lines))

    def instance_actions(self, server_id, limit=10):
        """The server's last ``limit`` instance actions, newest first.

        Who asked Nova for what (os-instance-actions, readable by the
        server's owner): a stop its user asked for is intent, one Nova
        made itself is a failure.
        """
        found = self._call('instance actions', server_id,
                           self._client.instance_action.list, server_id,
                           refusals=())
        actions = sorted((_instance_action(a.to_dict()) for a in found),
                         key=_started, reverse=True)
        return actions[:limit]

    def run(self, server_id, name, params=None):
        """Ask Nova for one action on the server; returns once accepted.

        :param name: START, UNPAUSE, RESUME, REBOOT (params
            ``{'type': 'SOFT'|'HARD'}``, SOFT by default), REBUILD (with
            the image the server has now), EVACUATE (rebuilt by Nova on
            another host, with its ports and volumes; needs an admin
            client and a host Nova takes for down) or STOP (fencing).
        :raises ValueError: for an unknown action or reboot type (RECREATE
            is not a Nova action: Heat replaces the server).
        :raises ActionRefused: also for REBUILD of a server that boots
            from a volume: it has no image to rebuild with.
        """
        action = str(name).upper()
        params = params or {}
        servers = self._client.servers
        if action == REBOOT:
            kind = str(params.get('type') or 'SOFT').upper()
            if kind not in REBOOT_TYPES:
                raise ValueError('Unknown reboot type %r' % params['type'])
            label = '%s %s' % (REBOOT, kind)
            call, args = servers.reboot, (server_id, kind)
        elif action == REBUILD:
            image_id = self.status(server_id).image_id
            if not image_id:
                raise ActionRefused('Nova cannot rebuild server %s: it '
                                    'boots from a volume, not an image'
                                    % server_id)
            label = '%s with image %s' % (REBUILD, image_id)
            call, args = servers.rebuild, (server_id, image_id)
        else:
            simple = {START: servers.start, STOP: servers.stop,
                      UNPAUSE: servers.unpause, RESUME: servers.resume,
                      EVACUATE: servers.evacuate}
            if action not in simple:
                raise ValueError('Unknown Nova action %r' % name)
            label = action
            call, args = simple[action], (server_id,)
        LOG.info('Asking Nova for %s of server %s', label, server_id)
        refusals = (nova_exc.Conflict,)
        if action == EVACUATE:
            refusals += (nova_exc.BadRequest,)
        self._call(label, server_id, call, *args, refusals=refusals)

    def force_delete(self, server_id):
        """Delete the server for good (fencing before a recreate).

        A plain delete, which Nova accepts whatever the task state; a
        soft-deleted server needs a force delete instead. ServerGone
        means the server is already gone.
        """
        found = self.status(server_id)
        servers = self._client.servers
        if found.vm_state == 'soft-delete':
            label, call = 'force delete', servers.force_delete
        else:
            label, call = 'delete', servers.delete
        LOG.info('Asking Nova for %s of server %s', label, server_id)
        self._call(label, server_id, call, server_id)
