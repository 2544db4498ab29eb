"""Nova's server lists: scoping, filters, changes-since, sorting and
limit/marker paging with servers_links, over the store's indexes."""

import json
import urllib.parse

from tests.fakecloud import compute_base as base
from tests.fakecloud import http


class ServerLists(object):
    """Mixed into ComputeAPI: GET /servers and /servers/detail."""

    def _limit(self, req):
        text = req.GET.get('limit')
        if text is None:
            return self.max_limit
        try:
            limit = int(text)
        except ValueError:
            raise base.bad_request("Invalid input for query parameters limit. "
                                   "Value: %s." % text)
        if limit < 0:
            raise base.bad_request('limit must be >= 0')
        return min(limit, self.max_limit)

    def _candidates(self, req, ctx):
        """The servers a list may show, most recently created first."""
        opts = req.GET
        all_tenants = opts.get('all_tenants')
        all_tenants = all_tenants is not None and (
            all_tenants == '' or all_tenants.lower() not in (
                '0', 'false', 'off', 'no', 'n', 'f'))
        if all_tenants:
            self._admin_only(ctx, 'os_compute_api:servers:detail:'
                                  'get_all_tenants')
        project = opts.get('project_id') or opts.get('tenant_id')
        if not all_tenants:
            project = ctx.project_id
        elif project is not None and not ctx.is_admin:
            project = ctx.project_id
        since = before = None
        if 'changes-since' in opts:
            since = base.parse_time(opts['changes-since'], 'changes-since')
        if 'changes-before' in opts:
            before = base.parse_time(opts['changes-before'], 'changes-before')
            if since is not None and since > before:
                raise base.bad_request('The value of changes-since must be '
                                       'less than or equal to changes-before.')
        deleted = (opts.get('deleted', '').lower() in ('true', '1', 'yes')
                   and ctx.is_admin)
        if since is not None:
            servers = self.store.changed_since(since)
            servers.sort(key=lambda s: s.seq, reverse=True)
        elif deleted:
            servers = reversed(self.store.deleted_servers.values())
        elif project is not None:
            servers = reversed(self.store.servers_by_project.get(
                project, {}).values())
        else:
            servers = reversed(self.store.servers.values())
        if project is not None and (since is not None or deleted):
            servers = (s for s in servers if s.project_id == project)
        if before is not None:
            servers = (s for s in servers if s.updated_at <= before)
        if deleted:
            servers = (s for s in servers if s.deleted)
        return servers

    def _filters(self, req, ctx):
        """Predicates for Nova's filters that the request names."""
        opts = req.GET
        tests = []
        if 'name' in opts:
            name = base.regex(opts['name'])
            tests.append(lambda s: name.search(s.name))
        statuses = set(v.upper() for v in opts.getall('status'))
        if statuses:
            tests.append(lambda s: s.status in statuses)
        # As Nova's: one uuid filter, the last one given.
        uuids = set(opts.getall('uuid')[-1:])
        if uuids:
            tests.append(lambda s: s.id in uuids)
        for key, attribute in (('image', 'image_id'), ('user_id', 'user_id'),
                               ('reservation_id', 'reservation_id'),
                               ('availability_zone', 'availability_zone')):
            if key in opts:
                value = opts[key].rsplit('/', 1)[-1]
                tests.append(lambda s, a=attribute, v=value:
                             getattr(s, a) == v)
        if 'flavor' in opts:
            flavor_id = opts['flavor'].rsplit('/', 1)[-1]
            tests.append(lambda s: s.flavor['id'] == flavor_id)
        if 'host' in opts and ctx.is_admin:
            tests.append(lambda s, h=opts['host']: s.host == h)
        if 'ip' in opts:
            ip = base.regex(opts['ip'])
            tests.append(lambda s: any(
                ip.match(fixed['ip_address'])
                for port in self.store.ports_of(s.id)
                for fixed in port['fixed_ips']))
        return tests

    def _sorted(self, req, servers):
        keys = req.GET.getall('sort_key')
        if not keys or keys == ['created_at']:
            if req.GET.get('sort_dir', 'desc') == 'asc':
                return sorted(servers, key=lambda s: s.seq)
            return servers
        fields = {'created_at': 'seq', 'updated_at': 'updated_at',
                  'display_name': 'name', 'uuid': 'id',
                  'vm_state': 'vm_state', 'task_state': 'task_state'}
        key = fields.get(keys[0])
        if key is None:
            raise base.bad_request('Invalid sort key %s' % keys[0])
        reverse = req.GET.get('sort_dir', 'desc') != 'asc'
        return sorted(servers, key=lambda s: (getattr(s, key) or '', s.seq),
                      reverse=reverse)

    def _page(self, req, ctx):
        """The servers of one answer, and whether a next page may exist."""
        limit = self._limit(req)
        servers = self._sorted(req, self._candidates(req, ctx))
        tests = self._filters(req, ctx)
        marker = req.GET.get('marker')
        found = marker is None
        if marker is not None and self.store.find_server(
                marker, deleted=True) is None:
            raise base.bad_request('marker [%s] not found' % marker)
        page = []
        if limit == 0:
            return page, False
        for server in servers:
            if not found:
                found = server.id == marker
                continue
            if all(test(server) for test in tests):
                page.append(server)
                if len(page) == limit:
                    return page, True
        if not found:
            raise base.bad_request('marker [%s] not found' % marker)
        return page, False

    def _next_link(self, req, page, detail):
        query = [(k, v) for k, v in req.GET.items() if k != 'marker']
        query.append(('marker', page[-1].id))
        return [{'rel': 'next', 'href': '%s/v2.1/servers%s?%s' % (
            self.base, '/detail' if detail else '',
            urllib.parse.urlencode(query))}]

    def list_servers(self, req, ctx):
        page, more = self._page(req, ctx)
        body = {'servers': [self.views.server_summary(s) for s in page]}
        if more:
            body['servers_links'] = self._next_link(req, page, False)
        return http.Reply(200, body)

    def list_servers_detail(self, req, ctx):
        page, more = self._page(req, ctx)
        parts = [self.views.server_json(s, ctx.is_admin, req.version)
                 for s in page]
        text = '{"servers": [%s]' % ', '.join(parts)
        if more:
            text += ', "servers_links": %s' % json.dumps(
                self._next_link(req, page, True))
        return http.Reply(200, text + '}')
