"""``openstack stack health show|event list|event show|pause|resume``."""

import csv
import datetime
import itertools
import json
import signal
import time

from cliff import columns
from osc_lib.command import command
from osc_lib import exceptions
import yaml

EVENT_COLUMNS = ('Time', 'Policy', 'Server', 'Event', 'From', 'Reason',
                 'Source')
# A followed table is written a line at a time, so it keeps to the columns
# a person watches; the other formats keep every column.
FOLLOW_LINE = ('Time', 'Policy', 'Server', 'Event', 'Reason')
POLICY_COLUMNS = ('Policy', 'Paused', 'By', 'At', 'Reason')
EVENT_FIELDS = ('id', 'time', 'policy', 'server_id', 'path', 'new_state',
                'old_state', 'reason', 'source', 'detail')


def _add_stack(parser):
    parser.add_argument('stack', metavar='<stack>',
                        help='Name or ID of the stack')


def _policy_state(policy):
    states = []
    if not policy.get('enabled', True):
        states.append('disabled')
    if policy.get('suspended'):
        states.append('suspended')
    paused = policy.get('paused')
    if paused:
        states.append('paused by %s at %s' % (paused.get('by'),
                                              paused.get('at')) +
                      (': %s' % paused['reason']
                       if paused.get('reason') else ''))
    if policy.get('braked'):
        states.append('braked since %s: %s' % (policy.get('braked_since'),
                                               policy['braked']))
    if policy.get('error'):
        states.append('not watched fully since %s: %s' % (
            policy.get('error_since'), policy['error']))
    for mode, blind in sorted((policy.get('blind_modes') or {}).items()):
        states.append('%s blind for %d server%s (%s): %s' % (
            mode, blind.get('count', 0),
            '' if blind.get('count') == 1 else 's',
            ', '.join(blind.get('targets') or []), blind.get('reason')))
    return '; '.join(states) or 'active'


def _policy_line(policy):
    counts = policy.get('counts') or {}
    return '%s: %s; detection %s; recovery %s; engine %s; %s' % (
        policy.get('resource_name'), _policy_state(policy),
        ', '.join(policy.get('detection_modes') or []) or '-',
        policy.get('recovery_mode') or '-', policy.get('engine_id') or '-',
        ', '.join('%s %s' % item for item in counts.items()) or 'no servers')


def _future(when, now):
    """Whether an ISO 8601 time from the report is still to come."""
    try:
        at = datetime.datetime.fromisoformat(when)
    except (TypeError, ValueError):
        return False
    if at.tzinfo is None:
        at = at.replace(tzinfo=datetime.timezone.utc)
    return at > now


def _server_line(target, now=None):
    """One watched server, without what no longer applies.

    A grace or a back-off that has passed and a name not learnt yet are
    left out.
    """
    now = now or datetime.datetime.now(datetime.timezone.utc)
    name = target.get('server_name')
    line = '%s %s(%s): %s since %s' % (
        target.get('path') or target.get('resource_name') or '-',
        '%s ' % name if name else '', target.get('server_id'),
        target.get('state'), target.get('since'))
    if target.get('reason'):
        line += ' (%s)' % target['reason']
    if _future(target.get('grace_until'), now):
        line += '; grace until %s' % target['grace_until']
    if target.get('attempts') and target.get('state') != 'HEALTHY':
        line += '; recovery attempt %s' % target['attempts']
        if _future(target.get('next_attempt_at'), now):
            line += ', next not before %s' % target['next_attempt_at']
        recovery = target.get('recovery') or {}
        if recovery.get('execution'):
            line += '; workflow %s execution %s %s' % (
                (recovery.get('params') or {}).get('workflow'),
                recovery['execution'], recovery.get('execution_state'))
    seen = target.get('last_observation')
    if seen:
        line += '; last seen %s by %s at %s' % (
            seen.get('verdict'), seen.get('source'),
            seen.get('still_seen_at') or seen.get('time'))
    return line


class PoliciesColumn(columns.FormattableColumn):
    """A line per policy; the policies without their targets as data."""

    def human_readable(self):
        return '\n'.join(_policy_line(p) for p in self._value) or 'none'

    def machine_readable(self):
        return [{k: v for k, v in p.items() if k != 'targets'}
                for p in self._value]


class ServersColumn(columns.FormattableColumn):
    """A line per watched server; each target naming its policy as data."""

    def human_readable(self):
        # The policy only needs naming when there is more than one.
        named = len(self._value) > 1
        return '\n'.join(
            ('%s: ' % p.get('resource_name') if named else '') +
            _server_line(t)
            for p in self._value for t in p.get('targets') or []) or 'none'

    def machine_readable(self):
        return [dict(t, policy=p.get('resource_name'))
                for p in self._value for t in p.get('targets') or []]


class ShowHealth(command.ShowOne):
    """Show the health policies of a stack and the servers they watch."""

    def get_parser(self, prog_name):
        parser = super(ShowHealth, self).get_parser(prog_name)
        _add_stack(parser)
        return parser

    def take_action(self, parsed_args):
        report = self.app.client_manager.health.report(parsed_args.stack)
        policies = report.get('policies') or []
        return (('stack', 'stack_id', 'policies', 'servers'),
                (report.get('stack_name'), report.get('stack_id'),
                 PoliciesColumn(policies), ServersColumn(policies)))


def _event_row(event):
    return (event.get('time'), event.get('policy') or '-',
            event.get('path') or event.get('server_id') or '-',
            event.get('new_state'), event.get('old_state') or '-',
            event.get('reason') or '', event.get('source') or '')


def _chosen(requested, names):
    """Indexes of the ``-c`` columns, matched as cliff matches them."""
    def norm(name):
        return name.lower().strip().replace(' ', '_')
    wanted = [norm(name) for name in requested]
    chosen = [i for i, name in enumerate(names) if norm(name) in wanted]
    if not chosen:
        raise exceptions.CommandError(
            'No recognized column names in %s; the columns are %s.'
            % (', '.join(requested), ', '.join(names)))
    return chosen


def _line_writer(formatter, names, stdout):
    """Write one event as one self-contained piece of the chosen format."""
    if formatter == 'json':
        return lambda row: stdout.write(
            json.dumps(dict(zip(names, row))) + '\n')
    if formatter == 'yaml':
        # Each event a one-item list: the whole stream stays one YAML list.
        return lambda row: stdout.write(yaml.safe_dump(
            [dict(zip(names, row))], default_flow_style=False,
            sort_keys=False))
    if formatter == 'csv':
        writer = csv.writer(stdout, quoting=csv.QUOTE_NONNUMERIC)
        writer.writerow(names)
        return writer.writerow
    return lambda row: stdout.write('\t'.join(str(v) for v in row) + '\n')


def _interrupt(signum, frame):
    raise KeyboardInterrupt()


class ListHealthEvents(command.Lister):
    """List the health timeline of a stack, oldest first."""

    def get_parser(self, prog_name):
        parser = super(ListHealthEvents, self).get_parser(prog_name)
        _add_stack(parser)
        parser.add_argument(
            '--since', metavar='<time>',
            help='Only events at or after this ISO 8601 time (UTC unless '
                 'it names its zone)')
        parser.add_argument(
            '--limit', metavar='<n>', type=int,
            help='Only the newest <n> events (at most 1000)')
        parser.add_argument(
            '--follow', action='store_true',
            help='Keep printing new events as they happen, until '
                 'interrupted')
        parser.add_argument(
            '--interval', metavar='<seconds>', type=float, default=2.0,
            help='Seconds between polls with --follow (default: 2)')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.health
        stack = parsed_args.stack
        events = client.events(stack, since=parsed_args.since,
                               limit=parsed_args.limit)
        rows = [_event_row(e) for e in events]
        if not parsed_args.follow:
            return EVENT_COLUMNS, rows
        last = events[-1]['id'] if events else None
        return EVENT_COLUMNS, itertools.chain(
            rows, self._poll(client, stack, last, parsed_args))

    @staticmethod
    def _poll(client, stack, last, parsed_args):
        while True:
            time.sleep(parsed_args.interval)
            if last is None:
                # Nothing seen yet: whatever matches is new.
                events = client.events(stack, since=parsed_args.since)
            else:
                events = client.events(stack, marker=last)
            for event in events:
                last = event['id']
                yield _event_row(event)

    def produce_output(self, parsed_args, column_names, data):
        if not parsed_args.follow:
            return super(ListHealthEvents, self).produce_output(
                parsed_args, column_names, data)
        # A cliff table prints once all rows are in; a follow never ends,
        # so each row is written (and flushed) as it arrives.
        if parsed_args.columns:
            keep = _chosen(parsed_args.columns, column_names)
        elif parsed_args.formatter in ('table', 'value'):
            keep = [column_names.index(name) for name in FOLLOW_LINE]
        else:
            keep = range(len(column_names))
        write = _line_writer(parsed_args.formatter,
                             [column_names[i] for i in keep], self.app.stdout)
        stdout = self.app.stdout
        # Interrupted ends it, even where SIGINT came in ignored (a
        # command started in the background by a shell).
        previous = {signum: signal.signal(signum, _interrupt)
                    for signum in (signal.SIGINT, signal.SIGTERM)}
        try:
            stdout.flush()
            for row in data:
                write([row[i] for i in keep])
                stdout.flush()
        except KeyboardInterrupt:
            pass
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return 0


class DetailColumn(columns.FormattableColumn):
    """An event's detail (a failed server's crash evidence), readable."""

    def human_readable(self):
        detail = self._value or {}
        lines = []
        for key, value in sorted(detail.items()):
            if key == 'console':
                lines.append('console (tail):\n' + value)
            elif isinstance(value, list):
                lines.append('%s:' % key)
                lines.extend('  %s' % json.dumps(v, sort_keys=True)
                             for v in value)
            else:
                lines.append('%s: %s' % (
                    key, json.dumps(value, sort_keys=True)))
        return '\n'.join(lines)

    def machine_readable(self):
        return self._value


class ShowHealthEvent(command.ShowOne):
    """Show one event of a stack's health timeline, with its detail.

    The detail of a crash evidence row holds what a failed server left:
    its console log's tail, Nova's fault, its last instance actions and
    the last poll URL answer. The event is looked up among the timeline's
    events that follow it (the newest 1000).
    """

    def get_parser(self, prog_name):
        parser = super(ShowHealthEvent, self).get_parser(prog_name)
        _add_stack(parser)
        parser.add_argument('event', metavar='<event-id>', type=int,
                            help='Id of the event (as event list -f json '
                                 'gives it)')
        return parser

    def take_action(self, parsed_args):
        found = [e for e in self.app.client_manager.health.events(
            parsed_args.stack, marker=parsed_args.event - 1)
            if e.get('id') == parsed_args.event]
        if not found:
            raise exceptions.CommandError(
                'No event %s in the health timeline of stack %s (or more '
                'than 1000 events came after it).' % (
                    parsed_args.event, parsed_args.stack))
        event = found[0]
        return EVENT_FIELDS, tuple(
            DetailColumn(event.get(key)) if key == 'detail'
            else event.get(key) for key in EVENT_FIELDS)


def _policy_row(policy):
    paused = policy.get('paused') or {}
    return (policy.get('resource_name'), bool(paused),
            paused.get('by') or '', paused.get('at') or '',
            paused.get('reason') or '')


class _SetPaused(command.Lister):
    """Pause or resume; the affected policies as now stored."""

    pausing = True

    def get_parser(self, prog_name):
        parser = super(_SetPaused, self).get_parser(prog_name)
        _add_stack(parser)
        parser.add_argument(
            '--policy', metavar='<policy>',
            help='Health policy (resource name or ID) to %s; all of the '
                 'stack\'s when omitted'
                 % ('pause' if self.pausing else 'resume'))
        if self.pausing:
            parser.add_argument(
                '--reason', metavar='<reason>',
                help='Why, kept in the timeline and shown in the report')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.health
        if self.pausing:
            policies = client.pause(parsed_args.stack,
                                    policy=parsed_args.policy,
                                    reason=parsed_args.reason)
        else:
            policies = client.resume(parsed_args.stack,
                                     policy=parsed_args.policy)
        return POLICY_COLUMNS, [_policy_row(p) for p in policies]


class PauseHealth(_SetPaused):
    """Pause the healing of a stack; detection and the report go on."""


class ResumeHealth(_SetPaused):
    """Resume the healing of a stack paused with 'stack health pause'."""

    pausing = False
