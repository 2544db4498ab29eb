"""The rules of a NODE_STATUS_POLL_URL detection mode's options.

Its options and their defaults, how a URL template is expanded, why a
template or a healthy pattern is refused: what the plugin validates at
stack create and the engine applies at each check (``poll_url``).
"""

import ipaddress
import re
from urllib import parse

import re2

from heat_health.policy import poll_url_guard as guard

OPTIONS = (POLL_URL, SSL_VERIFY, CONN_ERROR_AS_UNHEALTHY, HEALTHY_RESPONSE,
           RETRY_LIMIT, RETRY_INTERVAL, TIMEOUT) = (
    'poll_url', 'poll_url_ssl_verify', 'poll_url_conn_error_as_unhealthy',
    'poll_url_healthy_response', 'poll_url_retry_limit',
    'poll_url_retry_interval', 'poll_url_timeout')
"""Options of a NODE_STATUS_POLL_URL detection mode (Senlin's names)."""

DEFAULTS = {
    SSL_VERIFY: True,
    CONN_ERROR_AS_UNHEALTHY: True,
    RETRY_LIMIT: 3,
    RETRY_INTERVAL: 3,
    TIMEOUT: 5,
}

TEMPLATE_VARIABLES = ('ip', 'name', 'id')
_VARIABLE = re.compile(r'\{(%s)\}' % '|'.join(TEMPLATE_VARIABLES))

# RE2 would also write a bad pattern's error to stderr: it is reported with
# the check or the validation instead.  A pattern and its matching state get
# 1 MiB (RE2's default is 8 MiB): plenty for a health page, and the compiled
# patterns RE2 caches stay small.
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_RE2_OPTIONS.max_mem = 1 << 20

# What validation expands a template with: any server's values parse the
# same way (a documentation address, a quoted name, a UUID).
_SAMPLE = {'ip': '192.0.2.1', 'name': 'name',
           'id': '00000000-0000-0000-0000-000000000000'}


def _ip(address):
    try:
        return ipaddress.ip_address(str(address).strip('[]'))
    except ValueError:
        return None


def expand(template, target):
    """The poll URL of target: the template with its variables expanded.

    {ip} is its first IPv4 address, else its first address; {name} and
    {id} its name and id.  Nothing else is expanded.
    """
    addresses = list(target.addresses or [])
    ips = [a for a in addresses if _ip(a) is not None]
    ip = next((a for a in ips if _ip(a).version == 4),
              ips[0] if ips else '')
    if _ip(ip) is not None and _ip(ip).version == 6:
        ip = '[%s]' % ip
    values = {'ip': ip, 'name': parse.quote(target.name or '', safe=''),
              'id': target.server_id}
    return _VARIABLE.sub(lambda m: values[m.group(1)], template)


def healthy_pattern(pattern):
    """pattern compiled by RE2, which matches in time linear in the body.

    With Python's ``re`` a pattern such as ``(a+)+$`` takes exponential
    time on a body of a's and holds a worker for good.  RE2 has no
    backreferences or lookaround: such a pattern is an error here, never
    matched some other way.

    :raises ValueError: RE2 cannot compile pattern; the message says why.
    """
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as error:
        reason = error.args[0] if error.args else ''
        if isinstance(reason, bytes):
            reason = reason.decode('utf-8', errors='replace')
        raise ValueError(reason or 'RE2 cannot compile %r' % pattern)


def pattern_refusal(pattern):
    """Why pattern cannot be the healthy response, or None if it can.

    None (no pattern: any 2xx answer is healthy) can.  Validation refuses
    the others; a policy stored before patterns were RE2's gets unknown
    observations, with the reason, rather than a check failing in a worker.
    """
    if pattern is None:
        return None
    if not pattern:
        return 'empty poll_url_healthy_response'
    try:
        healthy_pattern(pattern)
    except ValueError as error:
        return 'poll_url_healthy_response is not RE2 syntax: %s' % error
    return None


def poll_url_refusal_at_validation(template):
    """Why template can never be fetched, whatever the server; or None.

    Syntax only (the scheme, the host's form, no credentials, no
    backslash or whitespace): which hosts are allowed is the engine's
    configuration, checked at each check.  The message shows the URL
    without credentials.
    """
    return guard.refusal_at_validation(template, _SAMPLE)


def poll_url_refusal_under_rules(template, allowed_hosts, networks):
    """Why the engine's rules would refuse template's every check, or None.

    :param networks: ``poll_url_allowed_networks`` entries, as configured
        (text).
    """
    return guard.refusal_under_rules(
        template.replace('{ip}', _SAMPLE['ip']).replace(
            '{name}', _SAMPLE['name']).replace('{id}', _SAMPLE['id']),
        _SAMPLE['ip'], allowed_hosts, guard.allowed_networks(networks))
