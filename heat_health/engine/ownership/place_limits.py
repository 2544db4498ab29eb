"""Places as stored: what Heat found, bounded to the target table's columns.

A template decides its resource names, how deep its provider templates
nest and, through some resource types, the physical id Heat records; so
what Heat found is bounded before a row is written. A value longer than
its column would fail the write of the policy's whole sync on MariaDB.

A path only tells people where the server is (the place itself is the
stack and resource name, which Heat bounds): a long one is shortened, its
first name (the policy's target) and its end (the server's resource) kept
around a digest of the whole, so two long paths never read the same. A
physical id longer than a Nova server id is not a server: that place is
not watched, and the policy says why.
"""

import hashlib

from heat_health.db import models

PATH_MAX = models.Target.path.type.length
SERVER_ID_MAX = models.Target.server_id.type.length
# The shown part of a refused id, in the reason.
ID_SHOWN = 40


def shortened_path(path):
    """The path itself if it fits, else its start and end around a digest."""
    if len(path) <= PATH_MAX:
        return path
    digest = hashlib.sha256(path.encode('utf-8')).hexdigest()[:16]
    head = path.split('/', 1)[0][:255]
    marker = '/...%s.../' % digest
    tail = path[len(path) - (PATH_MAX - len(head) - len(marker)):]
    if '/' in tail[:-1]:
        # Start the end at a name, not in the middle of one.
        tail = tail[tail.index('/') + 1:]
    return head + marker + tail


def bounded(places):
    """(places that fit, {place: why it is not watched})."""
    kept, refused = {}, {}
    for place, found in places.items():
        server_id = found['server_id'] or ''
        if len(server_id) > SERVER_ID_MAX:
            shown = server_id[:ID_SHOWN] + (
                '...' if len(server_id) > ID_SHOWN else '')
            refused[place] = (
                'resource %(path)s is not watched: its physical id %(id)s '
                '(%(n)d characters) is not a Nova server id' %
                {'path': shortened_path(found['path'])[:255],
                 'id': shown, 'n': len(server_id)})
            continue
        path = shortened_path(found['path'])
        kept[place] = found if path == found['path'] else dict(
            found, path=path)
    return kept, refused
