"""Which address a tenant's poll URL may reach, decided once.

The engine sits in the control plane and fetches URLs that tenants write.
Two parsers that read one URL differently (``\\@``, userinfo, odd IPv4
forms) let a check approve one host while the fetch goes to another, so a
URL is parsed here once, strictly, into a ``Destination``: the one IP
address and port that were checked, which the fetch connects to, and the
Host header it sends.  Anything this parser might read differently from
another is refused rather than interpreted.

Reasons and log lines show URLs through ``redacted`` only: userinfo and
query values may be credentials, and reasons reach reports, Heat events
and notifications.
"""

import collections
import ipaddress
import re
import socket
from urllib.parse import quote

Destination = collections.namedtuple(
    'Destination', ['scheme', 'host', 'ip', 'port', 'target', 'host_header'])
"""A checked poll URL: connect to ``ip``:``port``; ``host`` is what the URL
named (for TLS server name and certificate), ``target`` the request target
(path and query), ``host_header`` the Host header to send."""


class Refused(Exception):
    """The URL must not be fetched; the message says why (redacted)."""


_URL = re.compile(r'(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://'
                  r'(?P<authority>[^/?#]*)(?P<rest>[/?#].*)?\Z', re.S)
_BRACKETED = re.compile(r'\[(?P<ip>[^\]]*)\](?::(?P<port>[^:]*))?\Z')
_PLAIN = re.compile(r'(?P<host>[^:]*)(?::(?P<port>[^:]*))?\Z')
_LABEL = re.compile(r'[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\Z')
# A last label that is all digits or hex (0x7f) is an IPv4 address to
# inet_aton and to browsers, whatever else it looks like.
_NUMERIC_LABEL = re.compile(r'(0x[0-9a-f]*|[0-9]+)\Z', re.I)
_PORT = re.compile(r'[0-9]{1,5}\Z')
DEFAULT_PORTS = {'http': 80, 'https': 443}

# Never polled, whatever is configured: no server answers there.
_NEVER = tuple(ipaddress.ip_network(n) for n in (
    '0.0.0.0/32', '224.0.0.0/4', '240.0.0.0/4',
    '::/128', 'ff00::/8'))
# The engine's own host, metadata services, and IPv6 forms that carry an
# IPv4 address elsewhere: polled only through an entry of
# poll_url_allowed_networks that lies within the range (127.0.0.1:8775,
# not 0.0.0.0/0).
SPECIAL = tuple((ipaddress.ip_network(n), what) for n, what in (
    ('0.0.0.0/8', 'this-network'),
    ('127.0.0.0/8', 'loopback'),
    ('169.254.0.0/16', 'link-local (metadata)'),
    ('192.0.0.0/24', 'IETF protocol assignments'),
    ('::1/128', 'loopback'),
    ('::/96', 'IPv4-compatible'),
    ('::ffff:0:0:0/96', 'IPv4-translated'),
    ('64:ff9b::/96', 'NAT64'),
    ('64:ff9b:1::/48', 'NAT64'),
    ('100::/64', 'discard'),
    ('2001::/32', 'Teredo'),
    ('2002::/16', '6to4'),
    ('fe80::/10', 'link-local (metadata)'),
    ('fec0::/10', 'site-local'),
    ('fd00:ec2::254/128', 'metadata'),
))

Allowed = collections.namedtuple('Allowed', ['network', 'port'])
"""An entry of poll_url_allowed_networks: a network, and a port or None."""


def allowed_networks(entries):
    """The entries of ``poll_url_allowed_networks``, parsed.

    An entry is a network (``10.0.0.0/16``, ``fd00::/64``) or an address,
    either optionally with a port (``127.0.0.1:8775``,
    ``[::1]:8775``, ``10.0.0.0/16:8080``).

    :raises ValueError: an entry is neither; the message names it.
    """
    parsed = []
    for entry in entries:
        entry = entry.strip()
        found = _BRACKETED.match(entry)
        network, port = (found.group('ip'), found.group('port')) if found \
            else (entry, None)
        if not found and entry.count(':') == 1:
            network, port = entry.split(':')
        try:
            if port is not None and not _PORT.match(port):
                raise ValueError(port)
            port = None if port is None else int(port)
            if port is not None and not 0 < port < 65536:
                raise ValueError(port)
            parsed.append(Allowed(
                ipaddress.ip_network(network, strict=False), port))
        except ValueError:
            raise ValueError('poll_url_allowed_networks entry %r is not a '
                             'network or address, with an optional port'
                             % entry)
    return parsed


def _unmapped(ip):
    """An IPv4-mapped IPv6 address is that IPv4 address on the wire."""
    return getattr(ip, 'ipv4_mapped', None) or ip


def ip_of(text):
    """text as an IP address (IPv4-mapped ones as IPv4), or None."""
    try:
        return _unmapped(ipaddress.ip_address(str(text).strip('[]')))
    except ValueError:
        return None


def address_refusal(ip, port, networks):
    """Why ip:port must not be connected to, or None if it may be.

    :param networks: ``Allowed`` entries; none allows nothing at all.
    """
    ip = _unmapped(ip)
    for never in _NEVER:
        if ip.version == never.version and ip in never:
            return 'address %s is never polled (%s)' % (
                ip, 'unspecified' if never.num_addresses == 1 else
                'multicast or reserved')
    if ip.version == 4 and ip == ipaddress.IPv4Address('255.255.255.255'):
        return 'address %s is never polled (broadcast)' % ip
    if not networks:
        return ('no [heat_health] poll_url_allowed_networks is configured, '
                'so no address is polled')
    matching = [a.network for a in networks
                if a.network.version == ip.version and ip in a.network and
                a.port in (None, port)]
    if not matching:
        return ('address %s port %d is not in [heat_health] '
                'poll_url_allowed_networks' % (ip, port))
    for special, what in SPECIAL:
        if special.version == ip.version and ip in special and not any(
                n.subnet_of(special) for n in matching):
            return ('address %s is %s: polled only where [heat_health] '
                    'poll_url_allowed_networks names it specifically'
                    % (ip, what))
    return None


def _strict_port(text, scheme):
    if text is None:
        return DEFAULT_PORTS[scheme]
    if not _PORT.match(text) or not 0 < int(text) < 65536:
        raise Refused('poll URL port %r is not a number from 1 to 65535'
                      % text)
    return int(text)


def _host_name(text):
    """text as a host name (lower case, no trailing dot), or Refused."""
    name = text.lower()
    if name.endswith('.'):
        name = name[:-1]
    labels = name.split('.')
    if not name or len(name) > 253 or not all(
            _LABEL.match(label) for label in labels):
        raise Refused('poll URL host %r is neither an IP address nor a '
                      'host name' % text)
    if _NUMERIC_LABEL.match(labels[-1]):
        raise Refused('poll URL host %r is not an IPv4 address in dotted '
                      'decimal (a.b.c.d, no leading zeros)' % text)
    return name


def parse(url):
    """url split strictly: (scheme, host, ip or None, port, target).

    :raises Refused: url is not an http(s) URL this parser reads the one
        way any other would, or carries credentials.
    """
    if not isinstance(url, str) or not url:
        raise Refused('no poll URL')
    shown = redacted(url)
    if any(not 0x20 < ord(c) < 0x7f for c in url):
        raise Refused('poll URL %s contains whitespace, control or '
                      'non-ASCII characters (percent-encode them)' % shown)
    if '\\' in url:
        raise Refused('poll URL %s contains a backslash' % shown)
    found = _URL.match(url)
    if not found:
        raise Refused('poll URL %s is not scheme://host/path' % shown)
    scheme = found.group('scheme').lower()
    if scheme not in DEFAULT_PORTS:
        raise Refused('poll URL %s is not http or https' % shown)
    authority = found.group('authority')
    if '@' in authority:
        raise Refused('poll URL %s carries credentials (user@host): they '
                      'are not sent' % shown)
    target = (found.group('rest') or '/').split('#', 1)[0] or '/'
    if not target.startswith('/'):
        target = '/' + target
    bracketed = _BRACKETED.match(authority)
    if bracketed:
        literal = bracketed.group('ip')
        if '%' in literal:
            raise Refused('poll URL %s names an IPv6 zone: not supported'
                          % shown)
        try:
            ip = ipaddress.IPv6Address(literal)
        except ValueError:
            raise Refused('poll URL %s has no valid IPv6 address in '
                          'brackets' % shown)
        return (scheme, literal.lower(), _unmapped(ip),
                _strict_port(bracketed.group('port'), scheme), target)
    plain = _PLAIN.match(authority)
    if not plain or '[' in authority or ']' in authority:
        raise Refused('poll URL %s has a malformed host' % shown)
    host = plain.group('host')
    port = _strict_port(plain.group('port'), scheme)
    if not host:
        raise Refused('poll URL %s names no host' % shown)
    try:
        ip = ipaddress.IPv4Address(host)
    except ValueError:
        return scheme, _host_name(host), None, port, target
    return scheme, host, ip, port, target


def destination(url, own_addresses, allowed_hosts, networks,
                resolve=None):
    """The checked Destination of url, or Refused.

    The host must be one of ``own_addresses`` (the server's) or of
    ``allowed_hosts``; a name is only accepted from ``allowed_hosts`` and
    is resolved here, once: every address it resolves to must be allowed,
    and the fetch connects to the first.  The address must then pass
    ``address_refusal``.
    """
    scheme, host, ip, port, target = parse(url)
    own = {ip_of(a) for a in own_addresses} - {None}
    allowed_ips = {ip_of(h) for h in allowed_hosts} - {None}
    allowed_names = {str(h).lower().rstrip('.') for h in allowed_hosts
                     if ip_of(h) is None}
    if ip is not None:
        if ip not in own and ip not in allowed_ips:
            raise Refused('poll URL host %s is neither an address of the '
                          'server nor in [heat_health] '
                          'poll_url_allowed_hosts' % host)
        addresses = [ip]
    else:
        if host not in allowed_names:
            raise Refused('poll URL host %s is a name that is not in '
                          '[heat_health] poll_url_allowed_hosts (use the '
                          'server\'s address, e.g. {ip})' % host)
        try:
            found = (resolve or socket.getaddrinfo)(
                host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as error:
            raise Refused('poll URL host %s does not resolve (%s)'
                          % (host, error))
        addresses = []
        for _f, _t, _p, _c, sockaddr in found:
            address = ip_of(sockaddr[0].split('%')[0])
            if address is not None and address not in addresses:
                addresses.append(address)
        if not addresses:
            raise Refused('poll URL host %s resolves to no address' % host)
    for address in addresses:
        refused = address_refusal(address, port, networks)
        if refused:
            raise Refused('poll URL host %s: %s' % (host, refused))
    shown_host = '[%s]' % host if ':' in host else host
    host_header = shown_host if port == DEFAULT_PORTS[scheme] else (
        '%s:%d' % (shown_host, port))
    return Destination(scheme, host, addresses[0], port, target,
                       host_header)


_AUTHORITY = re.compile(r'(?P<head>^[^:/?#]*://)(?P<authority>[^/?#]*)')


def redacted(url):
    """url as it may be shown: userinfo, query values, fragment masked.

    Works on malformed URLs too: it never raises.
    """
    text = str(url)
    text = ''.join(c if 0x20 < ord(c) < 0x7f else quote(c, safe='')
                   for c in text)

    def strip_userinfo(found):
        authority = found.group('authority')
        if '@' in authority:
            authority = '***@' + authority.rsplit('@', 1)[1]
        return found.group('head') + authority

    text = _AUTHORITY.sub(strip_userinfo, text, count=1)
    text, hash_, fragment = text.partition('#')
    head, question, query = text.partition('?')
    if question:
        masked = []
        for item in query.split('&'):
            key, equals, _value = item.partition('=')
            masked.append(key + '=***' if equals else ('***' if key else ''))
        head += '?' + '&'.join(masked)
    return head + ('#***' if hash_ else '')


def refusal_at_validation(template, variables):
    """Why template can never be a poll URL, or None (syntax only).

    :param variables: {name: a value to expand it with}, such that any
        server's value gives the same outcome.
    """
    url = template
    for name, value in variables.items():
        url = url.replace('{%s}' % name, value)
    try:
        parse(url)
    except Refused as error:
        return str(error)
    return None


def refusal_under_rules(template, own_ip, allowed_hosts, networks):
    """Why the engine's rules refuse template for every server, or None.

    What is knowable before any server exists: a host that is the
    server's own address (``own_ip``, what ``{ip}`` was expanded with)
    needs some ``poll_url_allowed_networks``; a name must be one of
    ``poll_url_allowed_hosts``; a literal address must lie in the
    allowed networks. Syntax is ``refusal_at_validation``'s.
    """
    try:
        _scheme, host, ip, port, _target = parse(template)
    except Refused:
        return None
    if ip is not None and ip == ip_of(own_ip):
        if networks:
            return None
        return ('poll URL host {ip} is the server\'s own address, but no '
                '[heat_health] poll_url_allowed_networks is configured: '
                'the engine polls no server\'s address')
    if ip is None:
        names = {str(h).lower().rstrip('.') for h in allowed_hosts
                 if ip_of(h) is None}
        if host in names:
            return None
        return ('poll URL host %s is a name that is not in [heat_health] '
                'poll_url_allowed_hosts' % host)
    refused = address_refusal(ip, port, networks)
    return refused and 'poll URL host %s: %s' % (host, refused)
