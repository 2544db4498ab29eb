"""The devstack plugin's paste functions over the api-paste.ini Heat ships.

The plugin's own shell functions run in bash with the devstack stand-ins
that tools/localcloud uses, over a copy of Heat's installed file.
"""

import configparser
import os
import shutil
import subprocess
import tempfile

import testtools

from tests.unit import base

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
FILTER = 'heat_health'
AUTH_FILTERS = ('authtoken', 'authpassword', 'custombackendauth', 'noauth')
SCRIPT = '''
set -e
source "$ROOT/tools/localcloud.d/devstack-functions"
HEAT_HEALTH_DIR=$ROOT
source "$ROOT/devstack/plugin.sh"
for step in "$@"; do
    "$step"
done
'''


def heat_paste_file():
    return os.path.join(base._heat_etc_dir(), 'api-paste.ini')


def pipelines(path):
    parser = configparser.RawConfigParser()
    parser.read(path)
    return parser, {flavor: value.split() for flavor, value in
                    parser.items('composite:api')
                    if flavor != 'paste.composite_factory'}


class TestPastePipelines(testtools.TestCase):

    def setUp(self):
        super(TestPastePipelines, self).setUp()
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        self.paste = os.path.join(self.tmp, 'api-paste.ini')
        shutil.copyfile(heat_paste_file(), self.paste)
        with open(self.paste, 'rb') as f:
            self.shipped = f.read()

    def _run(self, *steps):
        env = dict(os.environ, ROOT=ROOT, HEAT_API_PASTE_FILE=self.paste,
                   HEAT_CONF_DIR=self.tmp, ENABLED_SERVICES='')
        result = subprocess.run(['bash', '-c', SCRIPT, 'plugin'] + list(steps),
                                env=env, capture_output=True, text=True,
                                timeout=60)
        self.assertEqual(0, result.returncode, result.stderr)
        return result.stderr

    def _read(self):
        with open(self.paste, 'rb') as f:
            return f.read()

    def assertPlaced(self, pipeline):
        """faultwrap, auth and context before heat_health; the app last."""
        where = dict((word, i) for i, word in enumerate(pipeline))
        auth = [where[name] for name in AUTH_FILTERS if name in where]
        self.assertEqual(1, pipeline.count(FILTER), pipeline)
        self.assertEqual(1, len(auth), pipeline)
        ours = where[FILTER]
        self.assertLess(where['faultwrap'], ours, pipeline)
        self.assertLess(auth[0], ours, pipeline)
        self.assertLess(where['context'], ours, pipeline)
        # Right after the last of them, so none of Heat's later filters
        # is skipped for the requests it answers.
        self.assertEqual(max(where['faultwrap'], auth[0],
                             where['context']) + 1, ours, pipeline)
        self.assertEqual('apiv1app', pipeline[-1])

    def test_shipped_file_has_every_flavour_this_test_knows(self):
        _parser, flavours = pipelines(self.paste)
        self.assertEqual({'default', 'standalone', 'custombackend',
                          'noauth'}, set(flavours))

    def test_filter_after_auth_and_inside_faultwrap_in_every_flavour(self):
        self._run('_heat_health_paste_insert')
        parser, flavours = pipelines(self.paste)
        for flavour, pipeline in flavours.items():
            self.assertPlaced(pipeline)
        self.assertEqual(
            'cors request_id context faultwrap versionnegotiation '
            'custombackendauth heat_health apiv1app',
            ' '.join(flavours['custombackend']))
        self.assertEqual('heat_health.api:filter_factory',
                         parser.get('filter:heat_health',
                                    'paste.filter_factory'))
        # The CloudFormation API is not ours.
        self.assertNotIn(FILTER, parser.get('composite:api-cfn', 'default'))

    def test_every_flavour_placed_without_a_warning(self):
        # Paste's own keys of the composite are no pipeline to warn about.
        self.assertEqual('', self._run('_heat_health_paste_insert'))

    def test_insert_again_changes_nothing(self):
        self._run('_heat_health_paste_insert')
        once = self._read()
        self._run('_heat_health_paste_insert')
        self.assertEqual(once, self._read())

    def test_earlier_placement_before_authentication_is_moved(self):
        # What earlier versions wrote: right after "context", which in the
        # custombackend flavour is before custombackendauth and faultwrap.
        with open(self.paste, 'w') as f:
            f.write(self.shipped.decode().replace(
                'custombackend = cors request_id context faultwrap',
                'custombackend = cors request_id context heat_health '
                'faultwrap'))
        self._run('_heat_health_paste_insert')
        _parser, flavours = pipelines(self.paste)
        self.assertPlaced(flavours['custombackend'])

    def test_pipeline_without_authentication_is_left_out(self):
        noauth = [line for line in self.shipped.decode().splitlines()
                  if line.startswith('noauth = ')][0]
        with open(self.paste, 'w') as f:
            f.write(self.shipped.decode().replace(
                noauth, noauth + '\nbare = cors faultwrap context '
                'heat_health apiv1app'))
        stderr = self._run('_heat_health_paste_insert')
        _parser, flavours = pipelines(self.paste)
        self.assertEqual('cors faultwrap context apiv1app',
                         ' '.join(flavours['bare']))
        self.assertIn('bare pipeline', stderr)
        self.assertPlaced(flavours['noauth'])

    def test_remove_restores_the_shipped_file(self):
        self._run('_heat_health_paste_insert', '_heat_health_paste_remove')
        self.assertEqual(self.shipped, self._read())


class TestPasteFileFound(base.HeatHealthTestCase):

    def test_heat_ships_the_file(self):
        self.assertTrue(os.path.isfile(heat_paste_file()),
                        heat_paste_file())
