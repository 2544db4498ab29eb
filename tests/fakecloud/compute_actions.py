"""Nova's server actions (POST /servers/{id}/action): which states allow
them, and handing them to the lifecycle."""

import secrets

from tests.fakecloud import compute_base as base
from tests.fakecloud import http

# vm_states in which an action is allowed, as Nova's API checks them.
ALLOWED = {
    'reboot_soft': ('active',),
    'reboot_hard': ('active', 'stopped', 'paused', 'suspended', 'error'),
    'rebuild': ('active', 'stopped', 'error'),
    'os-stop': ('active', 'error'),
    'os-start': ('stopped',),
    'pause': ('active',),
    'unpause': ('paused',),
    'suspend': ('active',),
    'resume': ('suspended',),
    'restore': ('soft-delete',),
    'forceDelete': ('soft-delete',),
}
ACTION_NAMES = {'os-stop': 'stop', 'os-start': 'start',
                'reboot_soft': 'reboot', 'reboot_hard': 'reboot'}


class Actions(object):
    """Mixed into ComputeAPI: POST /servers/{id}/action."""

    @staticmethod
    def _conflict(server, action):
        if server.task_state:
            raise base.NovaError(409, "Cannot '%s' instance %s while it is in "
                                 "task_state %s" % (action, server.id,
                                                    server.task_state))
        raise base.NovaError(409, "Cannot '%s' instance %s while it is in "
                             "vm_state %s" % (action, server.id,
                                              server.vm_state))

    def _check(self, server, key):
        action = ACTION_NAMES.get(key, key)
        busy = server.task_state is not None
        if key == 'reboot_hard' and server.task_state in (
                'rebooting', 'reboot_pending', 'reboot_started'):
            busy = False
        if key == 'forceDelete':
            busy = server.task_state not in (None, 'deleting')
        if busy or server.vm_state not in ALLOWED[key]:
            self._conflict(server, action)

    def action(self, req, ctx, server_id):
        server = self._server(ctx, server_id)
        body = http.json_body(req, base.bad_request)
        if len(body) != 1:
            raise base.bad_request('There is either no action or more than '
                                   'one '
                                   'action in the request body.')
        name, args = next(iter(body.items()))
        context = ctx.to_notification()
        life = self.lifecycle
        if name == 'reboot':
            kind = str((args or {}).get('type', '')).upper()
            if kind not in ('SOFT', 'HARD'):
                raise base.bad_request("Invalid input for field/attribute "
                                       "type. "
                                       "Value: %s." % kind)
            self._check(server, 'reboot_' + kind.lower())
            life.reboot(server, context, hard=kind == 'HARD')
        elif name == 'rebuild':
            return self._rebuild(req, ctx, server, args or {})
        elif name in ('os-stop', 'os-start', 'pause', 'unpause', 'suspend',
                      'resume', 'restore', 'forceDelete'):
            self._check(server, name)
            {'os-stop': life.stop, 'os-start': life.start,
             'pause': life.pause, 'unpause': life.unpause,
             'suspend': life.suspend, 'resume': life.resume,
             'restore': life.restore,
             'forceDelete': life.hard_delete}[name](server, context)
        else:
            raise base.bad_request('Action %s is not supported here.' % name)
        return http.Reply(202)

    def _rebuild(self, req, ctx, server, args):
        self._check(server, 'rebuild')
        image_id = self._image_id(args.get('imageRef'))
        if 'name' in args:
            server.name = str(args['name'])
        if 'metadata' in args:
            server.metadata = {str(k): str(v)
                               for k, v in (args['metadata'] or {}).items()}
        if 'description' in args:
            server.description = args['description']
        self.lifecycle.rebuild(server, ctx.to_notification(), image_id)
        view = self.views.server(server, ctx.is_admin, req.version)
        view['adminPass'] = secrets.token_urlsafe(9)
        return http.Reply(202, {'server': view})
