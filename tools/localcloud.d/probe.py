"""Check that a local service answers; print one line, exit 0 if it does.

    probe.py keystone      issue a token as admin
    probe.py heat-api      GET / on heat-api
    probe.py heat-engine [SINCE]
                           heat's service list (as admin) shows an engine up,
                           registered at or after SINCE (seconds since the
                           epoch) if given: records of engines stopped
                           moments ago still show as up
    probe.py fakecloud     list flavors as admin through the catalog's
                           compute URL; the health port answers
    probe.py http URL      GET URL answers (below 500)
    probe.py nova-service BINARY [HOST]
                           Nova's service list (as admin) shows the binary
                           up (on HOST if given)

Standard library only, so a probe costs no more than starting Python.
Reads LC_KEYSTONE_URL, LC_HEAT_URL, LC_FAKECLOUD_URL,
LC_FAKECLOUD_HEALTH_URL, LC_NOVA_URL and LC_ADMIN_PASSWORD from the
environment.
"""

import datetime
import json
import os
import sys
import urllib.error
import urllib.request

TIMEOUT = 10


def _request(method, url, body=None, headers=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header('Accept', 'application/json')
    if data is not None:
        req.add_header('Content-Type', 'application/json')
    for name, value in (headers or {}).items():
        req.add_header(name, value)
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def admin_token():
    """Return (token, project id) of admin in project admin."""
    body = {'auth': {
        'identity': {'methods': ['password'], 'password': {'user': {
            'name': 'admin', 'domain': {'id': 'default'},
            'password': os.environ['LC_ADMIN_PASSWORD']}}},
        'scope': {'project': {'name': 'admin',
                              'domain': {'id': 'default'}}}}}
    status, headers, raw = _request(
        'POST', os.environ['LC_KEYSTONE_URL'] + '/auth/tokens', body)
    if status != 201:
        raise RuntimeError('token request answered %s' % status)
    return (headers['X-Subject-Token'],
            json.loads(raw)['token']['project']['id'])


def probe_keystone():
    admin_token()
    return 'token issued'


def probe_heat_api():
    status, _, _ = _request('GET', os.environ['LC_HEAT_URL'] + '/')
    if status not in (200, 300):
        raise RuntimeError('GET / answered %s' % status)
    return 'GET / answered %s' % status


def _epoch(timestamp):
    """Seconds since the epoch of one of Heat's naive UTC timestamps."""
    when = datetime.datetime.fromisoformat(timestamp.split('.')[0])
    return when.replace(tzinfo=datetime.timezone.utc).timestamp()


def probe_heat_engine(since=None):
    token, project_id = admin_token()
    status, _, raw = _request(
        'GET', '%s/v1/%s/services' % (os.environ['LC_HEAT_URL'], project_id),
        headers={'X-Auth-Token': token})
    if status != 200:
        raise RuntimeError('service list answered %s' % status)
    up = [s for s in json.loads(raw)['services']
          if s['binary'] == 'heat-engine' and s['status'] == 'up' and
          (since is None or _epoch(s['created_at']) >= float(since) - 2)]
    if not up:
        raise RuntimeError('no heat-engine up in the service list')
    return '%d heat-engine up in the service list' % len(up)


def probe_fakecloud():
    token, _ = admin_token()
    status, _, raw = _request(
        'GET', os.environ['LC_FAKECLOUD_URL'] + '/compute/v2.1/flavors',
        headers={'X-Auth-Token': token})
    if status != 200:
        raise RuntimeError('flavor list answered %s' % status)
    flavors = len(json.loads(raw)['flavors'])
    status, _, _ = _request(
        'GET', os.environ['LC_FAKECLOUD_HEALTH_URL'] + '/probe/health')
    if status != 404:
        raise RuntimeError('health port answered %s for no server' % status)
    return '%d flavors as admin; health port answers' % flavors


def probe_http(url):
    status, _, _ = _request('GET', url)
    if status >= 500:
        raise RuntimeError('GET %s answered %s' % (url, status))
    return 'GET / answered %s' % status


def probe_nova_service(binary, host=None):
    token, _ = admin_token()
    status, _, raw = _request(
        'GET', os.environ['LC_NOVA_URL'] + '/v2.1/os-services?binary=' +
        binary, headers={'X-Auth-Token': token})
    if status != 200:
        raise RuntimeError('service list answered %s' % status)
    up = [s for s in json.loads(raw)['services']
          if s['state'] == 'up' and (host is None or s['host'] == host)]
    if not up:
        raise RuntimeError('no %s up%s in the service list' % (
            binary, ' on %s' % host if host else ''))
    return '%s up on %s' % (binary, ', '.join(s['host'] for s in up))


PROBES = {
    'http': probe_http,
    'nova-service': probe_nova_service,
    'keystone': probe_keystone,
    'heat-api': probe_heat_api,
    'heat-engine': probe_heat_engine,
    'fakecloud': probe_fakecloud,
}


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in PROBES:
        sys.exit('usage: probe.py {%s} [ARG]' % ','.join(PROBES))
    try:
        print(PROBES[sys.argv[1]](*sys.argv[2:]))
    except Exception as exc:  # any failure means "does not answer"
        print('%s: %s' % (type(exc).__name__, exc))
        sys.exit(1)


if __name__ == '__main__':
    main()
