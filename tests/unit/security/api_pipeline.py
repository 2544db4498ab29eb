"""Heat's API pipeline with heat-health's filter, and the engine behind it.

The pipeline is Heat's own ``api-paste.ini`` with the filter placed by the
devstack plugin's own function, loaded by paste.deploy in the
``custombackend`` flavour: Heat's context, faultwrap, version negotiation
and custom-backend authentication, then heat-health's filter. The identity
comes from the ``X-Project-Id``/``X-User-Id``/``X-Roles`` headers, and the
backend accepts only requests that carry ``X-Auth-Token: good``. The final
app stands for the rest of Heat's API: a request heat-health does not own
is answered there 404 and recorded, never sent to a heat-engine.

Behind the filter, the real heat-health RPC endpoint serves its topic over
oslo.messaging's fake driver, on real sqlite databases (Heat's and ours).
"""

import os
import shutil
import subprocess
import tempfile

from heat.common import messaging
from heat.common import wsgi
from heat.rpc import client as heat_rpc_client
from oslo_config import cfg
import oslo_messaging
from paste import deploy
import webob
import webob.dec

from heat_health.engine import endpoint
from heat_health.rpc import api as rpc_api
from tests.unit import base

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
GOOD_TOKEN = 'good'
INSERT = '''
set -e
source "$ROOT/tools/localcloud.d/devstack-functions"
HEAT_HEALTH_DIR=$ROOT
source "$ROOT/devstack/plugin.sh"
_heat_health_paste_insert
'''
HEAT_APP = '''
[app:apiv1app]
paste.app_factory = tests.unit.security.api_pipeline:heat_app_factory
'''


class HeatRest(object):
    """The rest of Heat's API: answers 404, records what reached it."""

    seen = []

    @webob.dec.wsgify
    def __call__(self, req):
        self.seen.append((req.method, req.path_info))
        return webob.Response(status=404, json_body={'heat': 'not here'})


def heat_app_factory(global_conf, **local_conf):
    return HeatRest()


def paste_file(directory):
    """Heat's api-paste.ini with the filter placed by the plugin."""
    path = os.path.join(directory, 'api-paste.ini')
    shutil.copyfile(os.path.join(base._heat_etc_dir(), 'api-paste.ini'), path)
    subprocess.run(['bash', '-c', INSERT], check=True, timeout=60,
                   env=dict(os.environ, ROOT=ROOT, HEAT_API_PASTE_FILE=path,
                            HEAT_CONF_DIR=directory, ENABLED_SERVICES=''))
    with open(path) as f:
        text = f.read()
    # The rest of Heat's API answers from this process.
    start = text.index('[app:apiv1app]')
    end = text.index('\n[', start + 1)
    with open(path, 'w') as f:
        f.write(text[:start] + HEAT_APP.strip() + '\n' + text[end:])
    return path


def _backend_accepts(self, ctxt):
    """The custom backend: only the good token authenticates."""
    return ctxt.auth_token == GOOD_TOKEN


class PipelineTestCase(base.HeatHealthTestCase):
    """The loaded pipeline as ``self.app``; the engine serving the topic."""

    def setUp(self):
        super(PipelineTestCase, self).setUp()
        # No policy file: Heat's registered default rules apply.
        self.mock_find_file.return_value = None
        self.setup_health_db()
        HeatRest.seen = []
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        cfg.CONF.set_override('flavor', 'custombackend',
                              group='paste_deploy')
        # An engine that does not answer is a 503 in a second, not a hang.
        cfg.CONF.set_override('rpc_response_timeout', 1,
                              group='heat_health')
        self.patchobject(heat_rpc_client.EngineClient,
                         'authenticated_to_backend', new=_backend_accepts)
        wsgi.setup_paste_factories(cfg.CONF)
        self.addCleanup(wsgi.teardown_paste_factories)
        self.app = deploy.loadapp('config:%s' % paste_file(tmp),
                                  name='heat-api')
        self.endpoint = endpoint.HealthEndpoint('health-engine-1')
        target = oslo_messaging.Target(
            topic=cfg.CONF.heat_health.topic, server='health-engine-1',
            version=rpc_api.RPC_API_VERSION)
        server = messaging.get_rpc_server(target, self.endpoint)
        server.start()
        self.addCleanup(server.wait)
        self.addCleanup(server.stop)

    def request(self, method, path, body=None, project='p1', user='u1',
                roles=('member', 'reader'), token=GOOD_TOKEN,
                content_type='application/json', headers=None):
        req = webob.Request.blank(path, method=method)
        req.headers['X-Auth-Token'] = token
        req.headers['X-Project-Id'] = project
        req.headers['X-User-Id'] = user
        req.headers['X-Roles'] = ','.join(roles)
        if body is not None:
            req.body = body if isinstance(body, bytes) else body.encode()
            req.content_type = content_type
        for key, value in (headers or {}).items():
            req.headers[key] = value
        return req.get_response(self.app)


def unwrap(call, *args, **kwargs):
    """An endpoint call as an RPC caller sees it: Heat's own exception."""
    try:
        return call(*args, **kwargs)
    except oslo_messaging.ExpectedException as e:
        raise e.exc_info[1]
