"""fakecloud: a Nova, Glance, Neutron and Cinder API simulator for tests.

Heat's own OS::Nova::Server, the openstack CLI and the python clients work
against it unmodified; tests inject faults (a server powered off, hung,
crashed, vanished; a slow or failing API) through its admin API and see
them through the compute API, the per-server health endpoints and the Nova
notifications it publishes on the real message bus.
"""
