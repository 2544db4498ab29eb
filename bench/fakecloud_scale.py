"""fakecloud at scale: 10,000 servers in 100 projects, listed by an admin.

Creates (once; reruns reuse them) 100 Keystone projects with the admin user
as member, boots servers in each through the Nova API until there are
--servers in all, then times, through python-novaclient, one admin
``servers.list(detailed=True, search_opts={'all_tenants': True})`` and one
``changes-since`` query. Needs ``tools/localcloud up``.

    python bench/fakecloud_scale.py [--servers 10000] [--projects 100]
"""

import argparse
import concurrent.futures
import datetime
import pathlib
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from keystoneauth1 import loading  # noqa: E402
from keystoneauth1 import session as ks_session  # noqa: E402
from keystoneclient.v3 import client as ks_client  # noqa: E402
from novaclient import client as nova_client  # noqa: E402

from tests.functional import cloud as localcloud  # noqa: E402

PREFIX = 'bench-scale-'
NOVA_VERSION = '2.1'


def project_session(creds, project_id):
    auth = loading.get_plugin_loader('password').load_from_options(
        auth_url=creds['OS_AUTH_URL'], username=creds['OS_USERNAME'],
        password=creds['OS_PASSWORD'], project_id=project_id,
        user_domain_name='Default')
    return ks_session.Session(auth=auth)


def ensure_projects(admin, count):
    keystone = ks_client.Client(session=admin.session)
    user = keystone.users.find(name=admin.creds['OS_USERNAME'])
    role = keystone.roles.find(name='member')
    existing = {p.name: p for p in keystone.projects.list()
                if p.name.startswith(PREFIX)}
    projects = []
    for i in range(count):
        name = '%s%03d' % (PREFIX, i)
        project = existing.get(name) or keystone.projects.create(
            name, 'default', description='fakecloud scale benchmark')
        keystone.roles.grant(role, user=user, project=project)
        projects.append(project)
    return projects


def boot(session, count, flavor, image, network):
    nova = nova_client.Client(NOVA_VERSION, session=session)
    have = len(nova.servers.list(detailed=False))
    for i in range(have, count):
        nova.servers.create('scale-%05d' % i, image, flavor,
                            nics=[{'net-id': network}])
    return max(count - have, 0)


def timed(what, func):
    start = time.perf_counter()
    result = func()
    elapsed = time.perf_counter() - start
    print('%-58s %8.3f s  (%d servers)' % (what, elapsed, len(result)))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--servers', type=int, default=10000)
    parser.add_argument('--projects', type=int, default=100)
    parser.add_argument('--workers', type=int, default=4)
    args = parser.parse_args()

    admin = localcloud.Cloud('admin')
    nova = nova_client.Client(NOVA_VERSION, session=admin.session)
    flavor = nova.flavors.find(name='m1.tiny').id
    image = nova.glance.find_image('cirros').id
    network = nova.neutron.find_network('private').id

    start = time.perf_counter()
    projects = ensure_projects(admin, args.projects)
    per_project = args.servers // args.projects
    sessions = [project_session(admin.creds, p.id) for p in projects]
    with concurrent.futures.ThreadPoolExecutor(args.workers) as pool:
        booted = sum(pool.map(
            lambda s: boot(s, per_project, flavor, image, network),
            sessions))
    print('setup: %d projects, %d servers booted now, %.1f s'
          % (len(projects), booted, time.perf_counter() - start))

    # Nova answers at most max_limit (1000) servers at a time: limit=-1
    # makes novaclient follow the pages.
    servers = timed(
        "admin servers.list(detailed, all_tenants, limit=-1)",
        lambda: nova.servers.list(detailed=True, limit=-1,
                                  search_opts={'all_tenants': True}))
    assert len(servers) >= per_project * len(projects), len(servers)

    # What a poller asks every interval: what changed since the last poll.
    since = datetime.datetime.now(datetime.timezone.utc)
    nova_client.Client(NOVA_VERSION,
                       session=sessions[0]).servers.list()[0].stop()
    changed = timed(
        "admin changes-since (one server stopped since)",
        lambda: nova.servers.list(
            detailed=True, search_opts={'all_tenants': True,
                                        'changes-since': since.isoformat()}))
    assert changed, 'changes-since missed the stopped server'


if __name__ == '__main__':
    main()
