"""Create what Heat and the local users need in a bootstrapped Keystone.

Idempotent: finds before it creates, and resets passwords and endpoint URLs
to the given values.  Reads from the environment:

    LC_KEYSTONE_URL     e.g. http://127.0.0.1:5000/v3
    LC_HEAT_URL         e.g. http://127.0.0.1:8004
    LC_HEAT_CFN_URL     e.g. http://127.0.0.1:8000
    LC_FAKECLOUD_URL    e.g. http://127.0.0.1:8774 (compute, image, network,
                        volume)
    LC_NOVA_URL         set when real Nova runs: its compute API (with
                        LC_PLACEMENT_URL); fakecloud keeps image, network
                        and volume (volumes attach through its compute
                        API only)
    LC_REGION           e.g. RegionOne
    LC_ADMIN_PASSWORD, LC_SERVICE_PASSWORD, LC_DEMO_PASSWORD,
    LC_READER_PASSWORD
    LC_OCTAVIA_URL      e.g. http://127.0.0.1:9876 (Octavia is left out
                        when unset)
    LC_MISTRAL_URL      e.g. http://127.0.0.1:8989/v2 (when unset, Mistral's
                        catalog entry and service user are removed if an
                        earlier run made them)
"""

import os

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1.identity import v3
from keystoneauth1 import session
from keystoneclient.v3 import client

ENV = os.environ
DEFAULT_DOMAIN = 'default'


def _first(items):
    return items[0] if items else None


class Setup(object):

    def __init__(self):
        auth = v3.Password(
            auth_url=ENV['LC_KEYSTONE_URL'], username='admin',
            password=ENV['LC_ADMIN_PASSWORD'], project_name='admin',
            user_domain_id=DEFAULT_DOMAIN, project_domain_id=DEFAULT_DOMAIN)
        self.ks = client.Client(session=session.Session(auth=auth))

    def domain(self, name, description):
        return (_first(self.ks.domains.list(name=name)) or
                self.ks.domains.create(name, description=description))

    def project(self, name, description):
        return (_first(self.ks.projects.list(name=name,
                                             domain=DEFAULT_DOMAIN)) or
                self.ks.projects.create(name, DEFAULT_DOMAIN,
                                        description=description))

    def role(self, name):
        return (_first(self.ks.roles.list(name=name)) or
                self.ks.roles.create(name))

    def user(self, name, password, domain=DEFAULT_DOMAIN):
        user = _first(self.ks.users.list(name=name, domain=domain))
        if user is None:
            return self.ks.users.create(name, domain=domain,
                                        password=password)
        if self._password_works(user, password):
            # Setting it again would revoke every token the user holds.
            return user
        return self.ks.users.update(user, password=password)

    @staticmethod
    def _password_works(user, password):
        auth = v3.Password(auth_url=ENV['LC_KEYSTONE_URL'], user_id=user.id,
                           password=password, unscoped=True)
        try:
            session.Session(auth=auth).get_token()
        except ks_exc.Unauthorized:
            return False
        return True

    def grant(self, role, user, project=None, domain=None):
        self.ks.roles.grant(self.role(role), user=user, project=project,
                            domain=domain)

    def service(self, name, service_type, description, endpoints):
        service = (_first(self.ks.services.list(type=service_type)) or
                   self.ks.services.create(name, service_type,
                                           description=description))
        region = ENV['LC_REGION']
        for interface, url in endpoints.items():
            found = _first(self.ks.endpoints.list(
                service=service, interface=interface, region=region))
            if found is None:
                self.ks.endpoints.create(service, url, interface=interface,
                                         region=region)
            elif found.url != url:
                self.ks.endpoints.update(found, url=url)

    def fakecloud(self, service_project):
        """Service user nova and the catalog of fakecloud's APIs."""
        nova = self.user('nova', ENV['LC_SERVICE_PASSWORD'])
        self.grant('admin', nova, project=service_project)
        # Real Nova sends its own token as a service token with the user's
        # (to Glance and Neutron): with service_token_roles_required, it
        # must hold the service role.
        self.grant('service', nova, project=service_project)
        base = ENV['LC_FAKECLOUD_URL']
        apis = [('glance', 'image', 'Image Service (fakecloud)', base,
                 '/image'),
                ('neutron', 'network', 'Network Service (fakecloud)', base,
                 '/network'),
                ('cinderv3', 'volumev3', 'Block Storage (fakecloud)', base,
                 '/volume/v3/%(project_id)s')]
        if ENV.get('LC_NOVA_URL'):
            apis += [('nova', 'compute', 'Compute Service', ENV['LC_NOVA_URL'],
                      '/v2.1'),
                     ('placement', 'placement', 'Placement Service',
                      ENV['LC_PLACEMENT_URL'], '')]
            placement = self.user('placement', ENV['LC_SERVICE_PASSWORD'])
            self.grant('admin', placement, project=service_project)
            self.grant('service', placement, project=service_project)
        else:
            apis.append(('nova', 'compute', 'Compute Service (fakecloud)',
                         base, '/compute/v2.1'))
        for name, service_type, description, root, path in apis:
            url = root + path
            self.service(name, service_type, description,
                         {'public': url, 'internal': url, 'admin': url})

    def run(self):
        service_project = self.project('service', 'Service users')
        demo_project = self.project('demo', 'Demo and test workloads')
        for name in ('heat_stack_owner', 'heat_stack_user'):
            self.role(name)

        admin = _first(self.ks.users.list(name='admin',
                                          domain=DEFAULT_DOMAIN))
        admin_project = self.project('admin', 'Bootstrap project')
        self.grant('heat_stack_owner', admin, project=admin_project)

        heat = self.user('heat', ENV['LC_SERVICE_PASSWORD'])
        self.grant('admin', heat, project=service_project)

        heat_domain = self.domain('heat',
                                  'Owns users and projects created by heat')
        domain_admin = self.user('heat_domain_admin',
                                 ENV['LC_SERVICE_PASSWORD'],
                                 domain=heat_domain)
        self.grant('admin', domain_admin, domain=heat_domain)

        demo = self.user('demo', ENV['LC_DEMO_PASSWORD'])
        self.grant('member', demo, project=demo_project)
        reader = self.user('reader', ENV['LC_READER_PASSWORD'])
        self.grant('reader', reader, project=demo_project)
        # A member of another project, as devstack's alt_demo: what one
        # project may not see or do to another's stacks.
        alt_project = self.project('alt_demo', 'A second project')
        alt_demo = self.user('alt_demo', ENV['LC_DEMO_PASSWORD'])
        self.grant('member', alt_demo, project=alt_project)

        heat_url = ENV['LC_HEAT_URL'] + '/v1/%(tenant_id)s'
        self.service('heat', 'orchestration', 'Heat Orchestration Service',
                     {'public': heat_url, 'internal': heat_url})
        cfn_url = ENV['LC_HEAT_CFN_URL'] + '/v1'
        self.service('heat-cfn', 'cloudformation',
                     'Heat CloudFormation Service',
                     {'public': cfn_url, 'internal': cfn_url})
        self.fakecloud(service_project)
        self.octavia(service_project)
        self.mistral(service_project)

    def octavia(self, service_project):
        """Octavia's service user and catalog entry.

        Octavia 19's default policy (new defaults enforced) lets a project's
        member write and its reader read: demo and reader need no
        load-balancer_* role.
        """
        url = ENV.get('LC_OCTAVIA_URL')
        if not url:
            return
        octavia = self.user('octavia', ENV['LC_SERVICE_PASSWORD'])
        self.grant('admin', octavia, project=service_project)
        self.service('octavia', 'load-balancer', 'Octavia Load Balancing',
                     {'public': url, 'internal': url, 'admin': url})

    def mistral(self, service_project):
        """Mistral's service user and catalog entry, or neither.

        Clients tell whether the cloud has Mistral by the catalog: without
        LC_MISTRAL_URL, what an earlier run made for it goes. Mistral's
        default policy lets a project's members run their own workflows.
        """
        url = ENV.get('LC_MISTRAL_URL')
        if url:
            mistral = self.user('mistral', ENV['LC_SERVICE_PASSWORD'])
            self.grant('admin', mistral, project=service_project)
            self.service('mistral', 'workflowv2', 'Workflow Service',
                         {'public': url, 'internal': url, 'admin': url})
            return
        for service in self.ks.services.list(type='workflowv2'):
            for endpoint in self.ks.endpoints.list(service=service):
                self.ks.endpoints.delete(endpoint)
            self.ks.services.delete(service)
        user = _first(self.ks.users.list(name='mistral',
                                         domain=DEFAULT_DOMAIN))
        if user is not None:
            self.ks.users.delete(user)


if __name__ == '__main__':
    Setup().run()
