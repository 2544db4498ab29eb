"""Everything fakecloud knows, in memory, with the indexes lists need.

State lives only in this process: each start seeds the same flavors, image,
network and subnet under the same ids, so tests and templates can name them.
One lock guards it all; every operation under it is O(1) or proportional to
what it answers, so 10,000 servers cost no more per request than ten.
"""

import collections
import hashlib
import ipaddress
import itertools
import threading
import time
import uuid

# Fixed ids: uuid5 of a name in this namespace never change between runs.
_NAMESPACE = uuid.UUID('7c1e4d3a-2b0f-4e51-9a7e-5f6d2c8b1a90')

# Nova's power states: the API shows the number, notifications the name.
NOSTATE, RUNNING, PAUSED, SHUTDOWN, CRASHED, SUSPENDED = 0, 1, 3, 4, 6, 7
POWER_STATE_NAMES = {NOSTATE: 'pending', RUNNING: 'running',
                     PAUSED: 'paused', SHUTDOWN: 'shutdown',
                     CRASHED: 'crashed', SUSPENDED: 'suspended'}

# Nova's API status from (vm_state, task_state): the vm_state's default,
# unless the task is one that shows its own status.
_REBOOT = ('rebooting', 'reboot_pending', 'reboot_started')
_HARD_REBOOT = ('rebooting_hard', 'reboot_pending_hard',
                'reboot_started_hard')
_REBUILD = ('rebuilding', 'rebuild_block_device_mapping',
            'rebuild_spawning')
_RESIZE = ('resize_prep', 'resize_migrating', 'resize_migrated',
           'resize_finish')
_STATUS = {
    'active': dict([('', 'ACTIVE'), ('updating_password', 'PASSWORD'),
                    ('migrating', 'MIGRATING')] +
                   [(t, 'REBOOT') for t in _REBOOT] +
                   [(t, 'HARD_REBOOT') for t in _HARD_REBOOT] +
                   [(t, 'REBUILD') for t in _REBUILD] +
                   [(t, 'RESIZE') for t in _RESIZE]),
    'building': {'': 'BUILD'},
    'stopped': dict([('', 'SHUTOFF')] + [(t, 'REBUILD') for t in _REBUILD] +
                    [(t, 'RESIZE') for t in _RESIZE]),
    'paused': {'': 'PAUSED', 'migrating': 'MIGRATING'},
    'suspended': {'': 'SUSPENDED'},
    'error': dict([('', 'ERROR')] + [(t, 'REBUILD') for t in _REBUILD]),
    'deleted': {'': 'DELETED'},
    'soft-delete': {'': 'SOFT_DELETED'},
}


def fixed_id(kind, name):
    return str(uuid.uuid5(_NAMESPACE, '%s:%s' % (kind, name)))


def fixed_project_id(name):
    return uuid.uuid5(_NAMESPACE, 'project:%s' % name).hex


def isotime(ts):
    """Seconds since the epoch as Nova and Neutron print them."""
    if ts is None:
        return None
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(ts))


def isotime_us(ts):
    """With microseconds, as Nova's notifications and launched_at."""
    if ts is None:
        return None
    return '%s.%06d' % (time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(ts)),
                        int((ts % 1) * 1e6))


def hostname(name):
    """The guest host name Nova derives from a display name."""
    cleaned = ''.join(c if c.isalnum() or c == '-' else '-'
                      for c in name.lower())
    return cleaned.strip('-')[:63] or 'server'


class Server(object):
    """One Nova instance.  Changed only under Store.lock, through touch()."""

    def __init__(self, store, seq, project_id, user_id, name, flavor,
                 image_id, host):
        self.id = str(uuid.uuid4())
        self.seq = seq
        self.project_id = project_id
        self.user_id = user_id
        self.name = name
        self.flavor = flavor
        self.image_id = image_id
        self.host = host
        self.instance_name = 'instance-%08x' % seq
        self.host_id = hashlib.sha224(
            (project_id + host).encode()).hexdigest()
        self.metadata = {}
        self.security_groups = ['default']
        self.key_name = None
        self.user_data = None
        self.availability_zone = 'nova'
        self.config_drive = ''
        self.description = None
        self.tags = []
        self.reservation_id = None
        self.launch_index = 0
        self.vm_state = 'building'
        self.task_state = 'scheduling'
        self.power_state = NOSTATE
        self.fault = None
        # Nova's instance actions (os-instance-actions), oldest first.
        self.actions = []
        # The guest's console log (os-getConsoleOutput), line by line.
        self.console = ['Booting %s (%s)' % (name, self.id),
                        '%s login:' % hostname(name)]
        self.created_at = self.updated_at = time.time()
        self.launched_at = None
        self.terminated_at = None
        self.deleted_at = None
        # Ports Nova created for this server and deletes with it.
        self.owned_ports = set()
        # Test faults: a hung guest, per-server API faults, a failing
        # next action; fault_generation invalidates timed fault resets.
        self.hung = False
        # A guest broken for good (a bad disk): hung through every reboot
        # and rebuild; only a new server is well.
        self.broken = False
        self.fail_next_action = False
        self.api_faults = {}
        self.fault_generation = 0
        # Left in a task by stuck_task: nothing moves it on until a new
        # operation (Lifecycle.begin) takes over.
        self.stuck = False
        # Operation generation: scheduled steps of a superseded operation
        # (a delete during a build, a reset during a reboot) do nothing.
        self.operation = 0
        # Rendered answers, keyed by view variant; cleared by touch().
        self.views = {}
        self._store = store

    @property
    def status(self):
        states = _STATUS.get(self.vm_state, {'': 'UNKNOWN'})
        return states.get(self.task_state or '', states[''])

    @property
    def deleted(self):
        return self.vm_state == 'deleted'

    def act(self, action, context):
        """Record one instance action, as Nova's API does for a request.

        context: who asked, a notification context (no user and no
        project when Nova acted itself, with an admin context).
        """
        self.actions.append({
            'action': action, 'instance_uuid': self.id,
            'request_id': context['request_id'] or 'req-%s' % uuid.uuid4(),
            'user_id': context['user_id'],
            'project_id': context['project_id'],
            'start_time': time.time(), 'message': None})

    def touch(self):
        self.updated_at = time.time()
        self.views.clear()
        self._store.changed(self)


class IpPool(object):
    """Fixed IPs of one subnet: fresh addresses first, then released ones."""

    def __init__(self, first, last):
        self._next = int(first)
        self._last = int(last)
        self._first = int(first)
        self._released = collections.deque()
        self._used = set()

    def allocate(self, wanted=None):
        if wanted is not None:
            value = int(ipaddress.ip_address(wanted))
            if not self._first <= value <= self._last:
                raise ValueError('outside the allocation pools')
            if value in self._used:
                raise LookupError('in use')
        else:
            value = None
            while self._next <= self._last:
                candidate = self._next
                self._next += 1
                if candidate not in self._used:
                    value = candidate
                    break
            while value is None and self._released:
                candidate = self._released.popleft()
                if candidate not in self._used:
                    value = candidate
            if value is None:
                raise OverflowError('no more addresses')
        self._used.add(value)
        return str(ipaddress.ip_address(value))

    def release(self, address):
        value = int(ipaddress.ip_address(address))
        if value in self._used:
            self._used.discard(value)
            self._released.append(value)


class Store(object):
    """All resources and their indexes."""

    def __init__(self, compute_host, deleted_kept, timeline_kept=100000):
        self.lock = threading.RLock()
        self.compute_host = compute_host
        self.deleted_kept = deleted_kept
        self.flavors = {}
        self.images = {}
        self.networks = {}
        self.subnets = {}
        self.ip_pools = {}
        self.ports = {}
        self.ports_by_device = collections.defaultdict(dict)
        self.security_groups = {}
        self.default_security_group = {}
        # Live servers (soft-deleted included), in creation order.
        self.servers = {}
        self.servers_by_project = collections.defaultdict(dict)
        # Deleted servers kept for changes-since, oldest deletion first.
        self.deleted_servers = collections.OrderedDict()
        # Every known server, least recently changed first.
        self.by_change = collections.OrderedDict()
        self._seq = itertools.count(1)
        self._mac = itertools.count(1)
        # What happened to servers, in order, for tests that need to know
        # which came first; the oldest entries go beyond timeline_kept.
        self.timeline = collections.deque(maxlen=timeline_kept)
        self._timeline_seq = itertools.count(1)
        # Cinder's volumes (volume.Volumes), set once the timer runs.
        self.volumes = None
        self.seed_project = fixed_project_id('fakecloud')
        self._seed()

    # Seeds
    # -----

    def _seed(self):
        now = time.time()
        for flavor_id, name, ram, vcpus, disk in (
                ('1', 'm1.tiny', 512, 1, 1),
                ('2', 'm1.small', 2048, 1, 20)):
            self.flavors[flavor_id] = {
                'id': flavor_id, 'name': name, 'ram': ram, 'vcpus': vcpus,
                'disk': disk, 'ephemeral': 0, 'swap': 0, 'rxtx_factor': 1.0,
                'is_public': True, 'disabled': False, 'description': None,
                'extra_specs': {}}
        image_id = fixed_id('image', 'cirros')
        self.images[image_id] = {
            'id': image_id, 'name': 'cirros', 'status': 'active',
            'visibility': 'public', 'protected': False, 'os_hidden': False,
            'owner': self.seed_project, 'container_format': 'bare',
            'disk_format': 'qcow2', 'size': 21430272,
            'virtual_size': 117440512, 'min_disk': 0, 'min_ram': 0,
            'checksum': 'c8fc807773e5354afe61636071771906',
            'os_hash_algo': 'sha512',
            'os_hash_value': hashlib.sha512(b'cirros').hexdigest(),
            'tags': [], 'created_at': isotime(now),
            'updated_at': isotime(now)}
        network_id = fixed_id('network', 'private')
        subnet_id = fixed_id('subnet', 'private-subnet')
        common = {'project_id': self.seed_project,
                  'tenant_id': self.seed_project, 'description': '',
                  'tags': [], 'created_at': isotime(now),
                  'updated_at': isotime(now), 'revision_number': 1}
        self.networks[network_id] = dict(
            common, id=network_id, name='private', status='ACTIVE',
            admin_state_up=True, shared=True, subnets=[subnet_id],
            mtu=1450, port_security_enabled=True,
            **{'router:external': False, 'availability_zones': ['nova'],
               'availability_zone_hints': [], 'ipv4_address_scope': None,
               'ipv6_address_scope': None, 'is_default': False,
               'l2_adjacency': True, 'qos_policy_id': None,
               'provider:network_type': 'geneve',
               'provider:physical_network': None,
               'provider:segmentation_id': 1})
        self.subnets[subnet_id] = dict(
            common, id=subnet_id, name='private-subnet',
            network_id=network_id, ip_version=4, cidr='10.0.0.0/16',
            gateway_ip='10.0.0.1', enable_dhcp=True,
            allocation_pools=[{'start': '10.0.0.2', 'end': '10.0.255.254'}],
            dns_nameservers=[], host_routes=[], ipv6_ra_mode=None,
            ipv6_address_mode=None, subnetpool_id=None, segment_id=None,
            service_types=[], dns_publish_fixed_ip=False)
        self.ip_pools[subnet_id] = IpPool(
            ipaddress.ip_address('10.0.0.2'),
            ipaddress.ip_address('10.0.255.254'))

    # Servers
    # -------

    def new_server(self, project_id, user_id, name, flavor, image_id):
        server = Server(self, next(self._seq), project_id, user_id, name,
                        flavor, image_id, self.compute_host)
        self.servers[server.id] = server
        self.servers_by_project[project_id][server.id] = server
        self.by_change[server.id] = server
        return server

    def changed(self, server):
        self.by_change[server.id] = server
        self.by_change.move_to_end(server.id)

    def find_server(self, server_id, deleted=False):
        server = self.servers.get(server_id)
        if server is None and deleted:
            server = self.deleted_servers.get(server_id)
        return server

    def forget_server(self, server):
        """Move a server that is now deleted out of the live indexes."""
        self.servers.pop(server.id, None)
        project = self.servers_by_project.get(server.project_id)
        if project is not None:
            project.pop(server.id, None)
            if not project:
                del self.servers_by_project[server.project_id]
        self.deleted_servers[server.id] = server
        while len(self.deleted_servers) > self.deleted_kept:
            old_id, _ = self.deleted_servers.popitem(last=False)
            self.by_change.pop(old_id, None)

    def changed_since(self, since):
        """Servers changed at or after since, most recent first."""
        found = []
        for server in reversed(self.by_change.values()):
            if server.updated_at < since:
                break
            found.append(server)
        return found

    # Timeline
    # --------

    def record(self, server, event, **extra):
        """Add event to the timeline, with the server as it is now.

        server None: an event of the whole cloud (an API-wide fault).
        """
        with self.lock:
            entry = {'time': time.time(), 'seq': next(self._timeline_seq),
                     'server_id': None, 'name': None, 'event': event}
            if server is not None:
                entry.update(server_id=server.id, name=server.name,
                             status=server.status, vm_state=server.vm_state,
                             task_state=server.task_state)
            entry.update(extra)
            self.timeline.append(entry)

    def timeline_since(self, since_seq=0, server_id=None):
        """Entries after since_seq (of server_id), oldest first.

        Walks back from the newest entry only as far as since_seq, so a
        test polling for what is new does not pay for the whole history.
        """
        with self.lock:
            found = []
            for entry in reversed(self.timeline):
                if entry['seq'] <= since_seq:
                    break
                if server_id is None or entry['server_id'] == server_id:
                    found.append(entry)
            last_seq = self.timeline[-1]['seq'] if self.timeline else 0
        found.reverse()
        return found, last_seq

    # Ports
    # -----

    def new_mac(self):
        value = next(self._mac)
        return 'fa:16:3e:%02x:%02x:%02x' % ((value >> 16) & 0xff,
                                            (value >> 8) & 0xff,
                                            value & 0xff)

    def index_port(self, port, old_device_id=None):
        if old_device_id:
            owned = self.ports_by_device.get(old_device_id)
            if owned is not None:
                owned.pop(port['id'], None)
                if not owned:
                    del self.ports_by_device[old_device_id]
        if port['device_id']:
            self.ports_by_device[port['device_id']][port['id']] = port

    def ports_of(self, device_id):
        return list(self.ports_by_device.get(device_id, {}).values())
