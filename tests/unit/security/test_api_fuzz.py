"""Random requests to heat-health's routes: never a 5xx, never a traceback.

Hypothesis draws methods, paths (unicode, percent-encoding, very long
segments, ``..``), query strings, bodies (JSON of any shape, non-JSON, over
the size limit) and content types, sent through Heat's pipeline to the real
engine on real databases (tests/unit/security/api_pipeline.py). Derandomized:
the same requests every run. ``HEAT_HEALTH_FUZZ_REQUESTS`` sets how many
(bench/api_fuzz.py runs 10,000).
"""

import collections
import json
import os
import urllib.parse

from hypothesis import given
from hypothesis import HealthCheck
from hypothesis import settings
from hypothesis import strategies as st
from oslo_config import cfg

from tests.unit.security import test_api_attacks

REQUESTS = int(os.environ.get('HEAT_HEALTH_FUZZ_REQUESTS', '1000'))
OWN = test_api_attacks.VICTIM
OTHER = test_api_attacks.ATTACKER
SMALL_BODY_LIMIT = 4096

# Segments with something to say about parsing and lookup.
NASTY = ['..', '.', '', '%', '%zz', '%00', '%2F', '%2e%2e', ';', '?', '#',
         '\\', '\x7f', 'health', 'resources', 'events', 'pause', 'v1',
         'x' * 5000, '\u00e9', '\U0001f600', '\ud7ff', '\u202e', '*']
KEYS = ['marker', 'since', 'limit', 'policy', 'reason', 'x', '']
TIMES = ['9999-12-31T23:00:00-05:00', '0001-01-01T00:00:00+05:00',
         '2026-11-23T10:00:00Z', '2026-02-30', '+2026-01-01', 'now', '1e9',
         '2026-11-23T10:00:00.999999999999+23:59']
CONTENT_TYPES = ['application/json', 'application/json; charset=latin-1',
                 'text/plain', 'application/x-www-form-urlencoded',
                 'multipart/form-data; boundary=x', '', '\u00e9/\u00e9',
                 'application/json; charset=utf-16']
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() |
    st.floats(allow_nan=True, allow_infinity=True) | st.text(),
    lambda inner: st.lists(inner, max_size=4) |
    st.dictionaries(st.text(max_size=20), inner, max_size=4),
    max_leaves=12)
mark_bodies = st.fixed_dictionaries(
    {'mark_unhealthy': st.one_of(st.booleans(), json_values)},
    optional={'resource_status_reason': st.one_of(
        json_values, st.sampled_from([65535, 65536, 70000]).map(
            lambda n: '\u00e9' * (n // 2))),
        'policy': json_values, 'reason': json_values})


def _quoted(segment, safe):
    return urllib.parse.quote(segment, safe=safe)


@st.composite
def segment(draw, real):
    raw = draw(st.one_of(st.sampled_from(real), st.sampled_from(NASTY),
                         st.text(max_size=40),
                         st.text(min_size=1, max_size=10).map(
                             lambda t: t * 300)))
    return _quoted(raw, draw(st.sampled_from(['', '%/', "%;.~!$&'()*+,=:@"])))


@st.composite
def fuzz_request(draw, stack_id):
    real = [OWN, OTHER, 'web', stack_id, 'web', 'health']
    seg = segment(real)
    tenant, name, ident, res = (draw(seg) for _ in range(4))
    suffix = draw(st.sampled_from(['', '/events', '/pause', '/resume',
                                   '/events/', '/pause/x', '/']))
    own_full = '/v1/%s/stacks/web/%s' % (OWN, stack_id)
    path = draw(st.sampled_from([
        '/v1/%s/stacks/%s/%s/resources/%s' % (tenant, name, ident, res),
        '/v1/%s/stacks/%s/%s/health%s' % (tenant, name, ident, suffix),
        '/v1/%s/stacks/%s/health%s' % (tenant, ident, suffix),
        '/%s/stacks/%s/health%s' % (tenant, ident, suffix),
        '/v1/%s/stacks/%s/health%s' % (OWN, ident, suffix)] +
        # The real stack's routes, more often: past the lookup.
        3 * [own_full + '/health' + suffix, own_full + '/resources/web',
             own_full + '/resources/' + res,
             '/v1/%s/stacks/%s/health%s' % (OWN, stack_id, suffix)]))
    query = draw(st.lists(st.tuples(
        st.sampled_from(KEYS) | st.text(max_size=10),
        st.sampled_from(TIMES) | st.integers().map(str) |
        st.text(max_size=30) | st.just('9' * 5000)), max_size=4))
    if query:
        path += '?' + urllib.parse.urlencode(query)
    method = draw(st.sampled_from(['GET', 'POST', 'PATCH', 'PUT', 'DELETE',
                                   'HEAD', 'OPTIONS', 'get', 'PATCH ']))
    body = draw(st.one_of(
        st.none(),
        mark_bodies.map(json.dumps),
        json_values.map(json.dumps),
        st.binary(max_size=200),
        st.text(max_size=200),
        st.sampled_from(['[' * 100000, '{"a":' * 50000, '"\\ud800"',
                         '{"mark_unhealthy": true, ' * 3,
                         'x' * (SMALL_BODY_LIMIT + 1)])))
    content_type = draw(st.sampled_from(CONTENT_TYPES))
    project = draw(st.sampled_from([OWN, OWN, OTHER, '', '\u00e9']))
    roles = draw(st.sampled_from([('member', 'reader'), ('reader',), (),
                                  ('admin',), ('member', 'reader')]))
    return method, path, body, content_type, project, roles


class TestApiFuzz(test_api_attacks.VictimTestCase):

    def setUp(self):
        super(TestApiFuzz, self).setUp()
        # Bodies over the limit are drawn cheaply.
        cfg.CONF.set_override('max_json_body_size', SMALL_BODY_LIMIT)

    def send(self, method, path, body, content_type, project, roles):
        try:
            project.encode('latin-1')
        except UnicodeEncodeError:
            project = project.encode().decode('latin-1')
        return self.request(method, path, body, project=project,
                            roles=roles, content_type=content_type)

    def fuzz(self, count):
        """Send count requests: statuses seen, and every 5xx or traceback."""
        failures = []
        statuses = collections.Counter()

        @settings(max_examples=count, derandomize=True, database=None,
                  deadline=None, suppress_health_check=list(HealthCheck))
        @given(fuzz_request(self.victim.id))
        def one(drawn):
            resp = self.send(*drawn)
            statuses[resp.status_int] += 1
            text = resp.body.decode('utf-8', 'replace')
            if resp.status_int >= 500 or 'Traceback' in text:
                failures.append((resp.status_int, drawn[:2], text[:300]))

        one()
        return statuses, failures

    def test_no_5xx_and_no_traceback(self):
        statuses, failures = self.fuzz(REQUESTS)
        self.assertEqual([], failures)
        self.assertGreaterEqual(sum(statuses.values()), REQUESTS * 0.9)
        # The engine answered (200s from the real stack), refusals were
        # told apart: the requests went the whole way, not only to a 400.
        for status in (200, 400, 403, 404):
            self.assertIn(status, statuses)
