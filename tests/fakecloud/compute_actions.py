"""Nova's server actions (POST /servers/{id}/action): which states allow
them, and handing them to the lifecycle.  Each action accepted goes on the
timeline as action:<name>, and on the server's instance actions
(os-instance-actions) with who asked."""

import secrets

from tests.fakecloud import compute_base as base
from tests.fakecloud import http
from tests.fakecloud import state

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
# Nova's task_states.ALLOW_REBOOT: the tasks a hard reboot may cut short,
# so that a server stuck in one can be rescued (its *_pending_hard and
# *_started_hard are not in it).
ALLOW_REBOOT = (None, 'rebooting', 'reboot_pending', 'reboot_started',
                'rebooting_hard', 'resuming', 'unpausing', 'pausing',
                'suspending')
# task_states in which an action is allowed; the others need none.
ALLOWED_TASKS = {
    'reboot_hard': ALLOW_REBOOT,
    'forceDelete': (None, 'deleting'),
}
ACTION_NAMES = {'os-stop': 'stop', 'os-start': 'start',
                'reboot_soft': 'reboot', 'reboot_hard': 'reboot'}
# The instance action Nova records for a request, where its name differs.
INSTANCE_ACTIONS = {'os-stop': 'stop', 'os-start': 'start',
                    'forceDelete': 'delete'}


class Actions(object):
    """Mixed into ComputeAPI: POST /servers/{id}/action."""

    @staticmethod
    def _conflict(server, action, attr=None):
        """Nova's 409; attr: the state that forbids it (task_state if set)."""
        if attr is None:
            attr = 'task_state' if server.task_state else 'vm_state'
        raise base.NovaError(409, "Cannot '%s' instance %s while it is in "
                             "%s %s" % (action, server.id, attr,
                                        getattr(server, attr)))

    def _check(self, server, key):
        """As Nova's check_instance_state: the vm_state, then the task."""
        if key == 'reboot_soft':
            # Nova checks what any reboot allows before what a soft one does.
            self._check(server, 'reboot_hard')
        action = ACTION_NAMES.get(key, key)
        if server.vm_state not in ALLOWED[key]:
            self._conflict(server, action, 'vm_state')
        if server.task_state not in ALLOWED_TASKS.get(key, (None,)):
            self._conflict(server, action, 'task_state')

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
            self.store.record(server, 'action:reboot', type=kind)
            server.act('reboot', context)
            life.reboot(server, context, hard=kind == 'HARD')
        elif name == 'rebuild':
            return self._rebuild(req, ctx, server, args or {})
        elif name == 'os-getConsoleOutput':
            return self._console_output(server, args or {})
        elif name in ('os-stop', 'os-start', 'pause', 'unpause', 'suspend',
                      'resume', 'restore', 'forceDelete'):
            self._check(server, name)
            self.store.record(server, 'action:' + name)
            server.act(INSTANCE_ACTIONS.get(name, name), context)
            {'os-stop': life.stop, 'os-start': life.start,
             'pause': life.pause, 'unpause': life.unpause,
             'suspend': life.suspend, 'resume': life.resume,
             'restore': life.restore,
             'forceDelete': life.hard_delete}[name](server, context)
        else:
            raise base.bad_request('Action %s is not supported here.' % name)
        return http.Reply(202)

    @staticmethod
    def _console_output(server, args):
        """The last ``length`` lines of the console log (-1 or none: all).

        Not an instance action: reading changes nothing.
        """
        length = args.get('length')
        try:
            length = None if length in (None, -1, '-1') else int(length)
        except (TypeError, ValueError):
            raise base.bad_request('Invalid input for field/attribute '
                                   'length. Value: %s.' % length)
        if length is not None and length < 0:
            raise base.bad_request('Invalid input for field/attribute '
                                   'length. Value: %s.' % length)
        lines = server.console[-length:] if length else (
            [] if length == 0 else server.console)
        return http.Reply(200, {'output': '\n'.join(lines) + '\n'})

    def _rebuild(self, req, ctx, server, args):
        self._check(server, 'rebuild')
        image_id = self._image_id(args.get('imageRef'))
        self.store.record(server, 'action:rebuild')
        server.act('rebuild', ctx.to_notification())
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

    # Instance actions

    @staticmethod
    def _instance_action(recorded, version):
        view = dict(recorded, start_time=state.isotime_us(
            recorded['start_time']))
        if version >= (2, 58):
            view['updated_at'] = view['start_time']
        return view

    def list_instance_actions(self, req, ctx, server_id):
        """Newest first, as Nova lists them."""
        server = self._server(ctx, server_id)
        return http.Reply(200, {'instanceActions': [
            self._instance_action(a, req.version)
            for a in reversed(server.actions)]})

    def show_instance_action(self, req, ctx, server_id, request_id):
        server = self._server(ctx, server_id)
        for recorded in server.actions:
            if recorded['request_id'] == request_id:
                view = self._instance_action(recorded, req.version)
                view['events'] = []
                return http.Reply(200, {'instanceAction': view})
        raise base.NovaError(404, 'Action %s not found' % request_id)
