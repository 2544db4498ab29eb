"""Real Nova's flavors, the same as fakecloud's, made once.

The tests' templates name the flavors fakecloud seeds (m1.tiny, m1.small);
real Nova starts with none. Standard library only, as probe.py, whose
admin token it uses. Reads LC_NOVA_URL and LC_ADMIN_PASSWORD.
"""

import json
import os
import sys

import probe

FLAVORS = (('1', 'm1.tiny', 512, 1, 1), ('2', 'm1.small', 2048, 1, 20))


def main():
    token, _ = probe.admin_token()
    url = os.environ['LC_NOVA_URL'] + '/v2.1/flavors'
    headers = {'X-Auth-Token': token}
    status, _, raw = probe._request('GET', url, headers=headers)
    if status != 200:
        sys.exit('flavor list answered %s' % status)
    have = {f['name'] for f in json.loads(raw)['flavors']}
    for flavor_id, name, ram, vcpus, disk in FLAVORS:
        if name in have:
            continue
        status, _, raw = probe._request('POST', url, {'flavor': {
            'id': flavor_id, 'name': name, 'ram': ram, 'vcpus': vcpus,
            'disk': disk}}, headers=headers)
        if status != 200:
            sys.exit('creating flavor %s answered %s: %s' % (
                name, status, raw[:200]))
        print('flavor %s created' % name)


if __name__ == '__main__':
    main()
