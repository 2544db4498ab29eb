"""The params of a workflow or webhook rung, expanded from its target.

A template names what it needs of the failed server as ``{{ server.id }}``
and the like (Senlin's ``{{ node.physicalid }}`` too). A string that is
one placeholder alone takes the value as it is (a list of addresses stays
a list); placeholders inside text are replaced by their text. Validation
refuses an unknown name, so a typo is an error at stack create, not an
empty value sent to a workflow at 3 a.m.
"""

import ipaddress
import re

VARIABLES = ('server.id', 'server.name', 'server.ip', 'server.addresses',
             'stack.id', 'resource.path', 'resource.name', 'reason',
             'node.physicalid')
_PLACEHOLDER = re.compile(r'\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}')


def _first_ip(addresses):
    """The first IPv4 address, else the first address, else ''."""
    found = []
    for address in addresses or ():
        try:
            found.append(ipaddress.ip_address(str(address)))
        except ValueError:
            continue
    v4 = [a for a in found if a.version == 4]
    chosen = (v4 or found or [''])[0]
    return str(chosen)


def values(server_id, server_name, addresses, stack_id, path,
           resource_name, reason):
    """What each variable stands for, for one target and its failure."""
    addresses = [str(a) for a in addresses or ()]
    return {'server.id': server_id, 'node.physicalid': server_id,
            'server.name': server_name or '',
            'server.ip': _first_ip(addresses),
            'server.addresses': addresses, 'stack.id': stack_id,
            'resource.path': path or '', 'resource.name': resource_name,
            'reason': reason or ''}


def expand(value, known):
    """``value`` (a param, or a dict or list of them) with its variables.

    :param known: from ``values``.
    """
    if isinstance(value, dict):
        return {k: expand(v, known) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v, known) for v in value]
    if not isinstance(value, str):
        return value
    whole = _PLACEHOLDER.fullmatch(value.strip())
    if whole is not None:
        return known[whole.group(1)]

    def text(match):
        found = known[match.group(1)]
        return ','.join(found) if isinstance(found, list) else str(found)
    return _PLACEHOLDER.sub(text, value)


def unknown(value):
    """The placeholder names in ``value`` that are not VARIABLES, sorted."""
    if isinstance(value, dict):
        names = set()
        for key, item in value.items():
            names.update(unknown(key))
            names.update(unknown(item))
        return sorted(names)
    if isinstance(value, list):
        return sorted({n for item in value for n in unknown(item)})
    if not isinstance(value, str):
        return []
    return sorted({m.group(1) for m in _PLACEHOLDER.finditer(value)} -
                  set(VARIABLES))
