"""Faults made to a server's guest behind Nova's back, whatever the cloud.

The tests marked ``real_nova`` fail a guest where the hypervisor holds it,
not through Nova, so that Nova's own handling runs and heat-health sees
only what Nova shows. Two backends make the faults:

``fault-driver``
    The local deployment's computes run the fault driver
    (``tests/fault_driver``); its control API makes every fault.
``libvirt``
    A single-node devstack: ``virsh`` on the domain of the server. libvirt
    has no operation faults (``fail_next``, ``hang_next``).

``HEAT_HEALTH_GUEST_FAULTS`` (``fault-driver``, ``libvirt`` or ``none``)
chooses; by default the fault driver when the local deployment says where
its control APIs are, else libvirt when there is a ``virsh`` to run.
``HEAT_HEALTH_VIRSH`` is the command (default ``virsh -c qemu:///system``;
``sudo virsh ...`` for a user libvirt refuses).

Each backend's ``fault(server, fault, **extra)`` takes the server as an
admin reads it from Nova and returns what the hypervisor holds of the
guest: ``{'uuid', 'host', 'power_state', 'next'}``, the power state as
Nova's integer (None: the hypervisor has no such guest).
"""

import json
import os
import pathlib
import shlex
import shutil
import subprocess
import urllib.error
import urllib.request

VARIABLE = 'HEAT_HEALTH_GUEST_FAULTS'
VIRSH_VARIABLE = 'HEAT_HEALTH_VIRSH'
DEFAULT_VIRSH = 'virsh -c qemu:///system'
FAULT_DRIVER, LIBVIRT, NONE = 'fault-driver', 'libvirt', 'none'
OPERATION_FAULTS = ('fail_next', 'hang_next')
HOST = 'OS-EXT-SRV-ATTR:host'
INSTANCE_NAME = 'OS-EXT-SRV-ATTR:instance_name'
# Seconds a control API request or a virsh command may take.
TIMEOUT = 120


class FaultNotSupported(Exception):
    """The backend cannot make that fault."""


class FaultFailed(Exception):
    """The backend could not make the fault; the message says why."""


class FaultDriverBackend(object):
    """The fault driver's control API on the compute holding the server.

    :param where: the JSON file mapping each compute host to its control
        API's URL (``tools/localcloud`` writes it), read at each fault.
    """

    name = FAULT_DRIVER
    operation_faults = True

    def __init__(self, where):
        self.where = where

    def fault(self, server, fault, **extra):
        apis = json.loads(pathlib.Path(self.where).read_text())
        if server[HOST] not in apis:
            raise FaultFailed('%s names no control API for the host %s'
                              % (self.where, server[HOST]))
        url = '%s/guests/%s/fault' % (apis[server[HOST]], server['id'])
        request = urllib.request.Request(
            url, data=json.dumps(dict(fault=fault, **extra)).encode(),
            headers={'Content-Type': 'application/json'}, method='POST')
        # The control APIs are on 127.0.0.1: never through a proxy.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=TIMEOUT) as resp:
                return json.loads(resp.read())['guest']
        except urllib.error.HTTPError as exc:
            raise FaultFailed('POST %s: %s %s' % (
                url, exc.code, exc.read().decode(errors='replace')))


# virsh domstate -> Nova's power state, as Nova's libvirt driver maps them.
POWER_STATES = {'no state': 0, 'running': 1, 'idle': 1, 'blocked': 1,
                'in shutdown': 1, 'paused': 3, 'shut off': 4, 'crashed': 6,
                'pmsuspended': 7}


class LibvirtBackend(object):
    """virsh on the server's domain, on this machine (a single node).

    What libvirt does to the domain, and what Nova then sees:

    ``power_off``
        ``virsh destroy``: the domain shuts off; Nova syncs SHUTDOWN (4)
        and stops the server.
    ``crash``
        ``virsh destroy`` as well: seen from outside the guest, a crash is
        QEMU ending unasked, and destroy (not ``--graceful``, which lets
        QEMU flush and exit cleanly, or fails) is that end. libvirt keeps
        a domain CRASHED only when its ``on_crash`` action preserves it,
        which cannot be set behind Nova's back, so Nova sees SHUTDOWN (4),
        not the fault driver's CRASHED.
    ``pause``
        ``virsh suspend``, libvirt's pause (as QEMU pauses on an I/O
        error): PAUSED (3), which Nova leaves ACTIVE.
    ``suspend``
        ``virsh managedsave``, as Nova's own suspend: the memory is saved
        and the domain shuts off, so Nova sees SHUTDOWN (4), not the fault
        driver's SUSPENDED, and stops the server.
    ``lose``
        ``virsh destroy`` (ignored if it is not running), then ``virsh
        undefine --managed-save --keep-nvram`` (the firmware variables stay
        for Nova's hard reboot to define the domain again): no domain, so
        Nova syncs NOSTATE (0) and leaves the server ACTIVE.
    ``reset``
        Nothing: there are no operation faults to clear.

    :param command: the virsh command, split as a shell would.
    """

    name = LIBVIRT
    operation_faults = False
    # fault -> virsh commands, each (arguments after the domain, must pass)
    ACTIONS = {
        'power_off': [('destroy', (), True)],
        'crash': [('destroy', (), True)],
        'pause': [('suspend', (), True)],
        'suspend': [('managedsave', (), True)],
        'lose': [('destroy', (), False),
                 ('undefine', ('--managed-save', '--keep-nvram'), True)],
        'reset': [],
    }

    def __init__(self, command=DEFAULT_VIRSH):
        self.command = shlex.split(command)

    def available(self):
        """Whether the command, and virsh behind a prefix, are found."""
        virsh = [w for w in self.command if os.path.basename(w) == 'virsh']
        return all(shutil.which(w) for w in [self.command[0]] + virsh[:1])

    def virsh(self, *args):
        """The finished virsh command; virsh speaks English to be parsed."""
        try:
            return subprocess.run(
                self.command + list(args), capture_output=True, text=True,
                stdin=subprocess.DEVNULL, timeout=TIMEOUT,
                env=dict(os.environ, LC_ALL='C'))
        except OSError as exc:
            raise FaultFailed('%s: %s (set %s)' % (
                ' '.join(self.command), exc, VIRSH_VARIABLE))

    def _check(self, result):
        if result.returncode != 0:
            raise FaultFailed('%s exited %d: %s' % (
                ' '.join(result.args), result.returncode,
                result.stderr.strip()))
        return result.stdout

    def power_state(self, domain):
        """Nova's power state of the domain; None when there is none."""
        result = self.virsh('domstate', domain)
        if result.returncode != 0 and (
                'failed to get domain' in result.stderr or
                'domain not found' in result.stderr.lower()):
            return None
        state = self._check(result).strip().lower()
        if state not in POWER_STATES:
            raise FaultFailed('virsh domstate %s: unknown state %r'
                              % (domain, state))
        return POWER_STATES[state]

    def fault(self, server, fault, **extra):
        if fault in OPERATION_FAULTS:
            raise FaultNotSupported(
                '%s cannot be made with libvirt: the test needs the fault '
                'driver (mark it guest_operation_faults)' % fault)
        if fault not in self.ACTIONS:
            raise FaultNotSupported('%s cannot be made with libvirt, only %s'
                                    % (fault, ', '.join(self.ACTIONS)))
        domain = server[INSTANCE_NAME]
        for command, options, must_pass in self.ACTIONS[fault]:
            result = self.virsh(command, domain, *options)
            if must_pass:
                self._check(result)
        return {'uuid': server['id'], 'host': server.get(HOST),
                'power_state': self.power_state(domain), 'next': {}}


def select(environ, fault_driver_file):
    """The backend making guest faults for this run, or None.

    :param environ: the environment (``HEAT_HEALTH_GUEST_FAULTS``,
        ``HEAT_HEALTH_VIRSH``).
    :param fault_driver_file: where the local deployment says its fault
        driver's control APIs are; the default backend when it exists.
    """
    wanted = environ.get(VARIABLE, '').strip().lower()
    libvirt = LibvirtBackend(environ.get(VIRSH_VARIABLE) or DEFAULT_VIRSH)
    if wanted == FAULT_DRIVER:
        return FaultDriverBackend(fault_driver_file)
    if wanted == LIBVIRT:
        return libvirt
    if wanted == NONE:
        return None
    if wanted:
        raise ValueError('%s=%s: not one of %s, %s, %s' % (
            VARIABLE, environ[VARIABLE], FAULT_DRIVER, LIBVIRT, NONE))
    if os.path.exists(fault_driver_file):
        return FaultDriverBackend(fault_driver_file)
    return libvirt if libvirt.available() else None
