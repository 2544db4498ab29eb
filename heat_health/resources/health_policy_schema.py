"""OS::Heat::HealthPolicy's properties, attributes and their validation.

Properties keep the names of Senlin's health policy so its users can port
their policies; what a property means once stored is ``policy.spec``.
"""

import re
import string

from heat.common.i18n import _
from heat.engine import attributes
from heat.engine import constraints
from heat.engine import function
from heat.engine import properties
from oslo_config import cfg

from heat_health.common import config

from heat_health.policy import poll_url_guard
from heat_health.policy import poll_url_rules
from heat_health.policy import rung_params
from heat_health.policy import spec as policy_spec

POLL_URL_VARIABLES = ('ip', 'name', 'id')
LOAD_BALANCER_TYPE = 'OS::Heat::LoadBalancer'
LAUNCH_BEFORE_TERMINATE = 'launch_before_terminate'


class HealthPolicySchema(object):
    """The schema of OS::Heat::HealthPolicy, and what validation adds."""

    PROPERTIES = (
        TARGETS, DETECTION, RECOVERY, ENABLED,
    ) = (
        'targets', 'detection', 'recovery', 'enabled',
    )

    _DETECTION_KEYS = (
        INTERVAL, NODE_UPDATE_TIMEOUT, RECOVERY_CONDITIONAL, DETECTION_MODES,
    ) = (
        'interval', 'node_update_timeout', 'recovery_conditional',
        'detection_modes',
    )

    _MODE_KEYS = (
        MODE_TYPE, MODE_OPTIONS,
    ) = (
        'type', 'options',
    )

    _POLL_URL_OPTIONS = (
        POLL_URL, POLL_URL_SSL_VERIFY, POLL_URL_CONN_ERROR_AS_UNHEALTHY,
        POLL_URL_HEALTHY_RESPONSE, POLL_URL_RETRY_LIMIT,
        POLL_URL_RETRY_INTERVAL, POLL_URL_TIMEOUT, LOADBALANCER,
    ) = (
        'poll_url', 'poll_url_ssl_verify', 'poll_url_conn_error_as_unhealthy',
        'poll_url_healthy_response', 'poll_url_retry_limit',
        'poll_url_retry_interval', 'poll_url_timeout', 'loadbalancer',
    )

    DETECTION_TYPES = (
        NODE_STATUS_POLLING, NODE_STATUS_POLL_URL, LIFECYCLE_EVENTS,
        LB_STATUS_POLLING,
    ) = (
        'NODE_STATUS_POLLING', 'NODE_STATUS_POLL_URL', 'LIFECYCLE_EVENTS',
        'LB_STATUS_POLLING',
    )

    CONDITIONALS = (ANY_FAILED, ALL_FAILED) = ('ANY_FAILED', 'ALL_FAILED')

    _RECOVERY_KEYS = (
        RECOVERY_ACTIONS, FENCING, NODE_DELETE_TIMEOUT, NODE_FORCE_RECREATE,
        MAX_ATTEMPTS, ATTEMPT_WINDOW, HEALTHY_RESET, BACKOFF_INITIAL,
        BACKOFF_MAX, BACKOFF_JITTER, SUCCESS_THRESHOLD, MAX_CONCURRENT,
        MAX_UNHEALTHY_FRACTION, MODE, REPLACE, RESPECT_USER_ACTIONS,
    ) = (
        'actions', 'fencing', 'node_delete_timeout', 'node_force_recreate',
        'max_attempts', 'attempt_window', 'healthy_reset', 'backoff_initial',
        'backoff_max', 'backoff_jitter', 'success_threshold',
        'max_concurrent', 'max_unhealthy_fraction', 'mode', 'replace',
        'respect_user_actions',
    )

    _ACTION_KEYS = (ACTION_NAME, ACTION_TYPE, ACTION_URL, ACTION_PARAMS) = (
        'name', 'type', 'url', 'params')
    ACTION_TYPES = (MISTRAL_WORKFLOW, WEBHOOK) = (
        policy_spec.MISTRAL_WORKFLOW, policy_spec.WEBHOOK)
    REPLACE_SCOPES = (SERVER, MEMBER) = (policy_spec.SERVER,
                                         policy_spec.MEMBER)

    ACTION_NAMES = (REBOOT, REBUILD, START, UNPAUSE, RESUME, RECREATE,
                    EVACUATE) = (
        'REBOOT', 'REBUILD', 'START', 'UNPAUSE', 'RESUME', 'RECREATE',
        'EVACUATE')
    REBOOT_TYPES = ('SOFT', 'HARD')
    RECOVERY_MODES = (HEAL, OBSERVE) = ('HEAL', 'OBSERVE')
    FENCING_SERVICES = ('COMPUTE',)

    ATTRIBUTES = (STATUS_ATTR, MEMBERS_ATTR, WEBHOOK_SECRET_ATTR) = (
        'status', 'members', 'webhook_secret')

    _poll_url_options_schema = {
        POLL_URL: properties.Schema(
            properties.Schema.STRING,
            _('URL polled for each server; it may contain {ip}, {name} '
              'and {id}, replaced by the server\'s address, name and id. '
              'Required for NODE_STATUS_POLL_URL.'),
        ),
        POLL_URL_SSL_VERIFY: properties.Schema(
            properties.Schema.BOOLEAN,
            _('Whether to verify the TLS certificate of the poll URL.'),
            default=True,
        ),
        POLL_URL_CONN_ERROR_AS_UNHEALTHY: properties.Schema(
            properties.Schema.BOOLEAN,
            _('Whether a connection error to the poll URL counts as an '
              'unhealthy server (else as unknown).'),
            default=True,
        ),
        POLL_URL_HEALTHY_RESPONSE: properties.Schema(
            properties.Schema.STRING,
            _('Regular expression (RE2 syntax, matched in linear time) '
              'searched in the response body of a healthy server; '
              'without it any 2xx response is healthy.'),
        ),
        POLL_URL_RETRY_LIMIT: properties.Schema(
            properties.Schema.INTEGER,
            _('Retries of a failed poll before the server is unhealthy.'),
            default=3,
            constraints=[constraints.Range(0, 10)],
        ),
        POLL_URL_RETRY_INTERVAL: properties.Schema(
            properties.Schema.INTEGER,
            _('Seconds between retries of a failed poll.'),
            default=3,
            constraints=[constraints.Range(1, 60)],
        ),
        POLL_URL_TIMEOUT: properties.Schema(
            properties.Schema.NUMBER,
            _('Seconds one poll may take.'),
            default=5,
            constraints=[constraints.Range(1, 60)],
        ),
        LOADBALANCER: properties.Schema(
            properties.Schema.STRING,
            _('For LB_STATUS_POLLING: the OS::Heat::LoadBalancer of this '
              'stack whose pool is read; without it, every one of them.'),
        ),
    }

    properties_schema = {
        TARGETS: properties.Schema(
            properties.Schema.LIST,
            _('Names of resources of this stack to watch: OS::Nova::Server '
              'resources, or groups (OS::Heat::ResourceGroup, '
              'OS::Heat::AutoScalingGroup, OS::Heat::InstanceGroup) whose '
              'member servers are watched.'),
            required=True,
            update_allowed=True,
            schema=properties.Schema(properties.Schema.STRING),
            constraints=[constraints.Length(min=1)],
        ),
        DETECTION: properties.Schema(
            properties.Schema.MAP,
            _('How failures are detected.'),
            update_allowed=True,
            default={},
            schema={
                INTERVAL: properties.Schema(
                    properties.Schema.INTEGER,
                    _('Seconds between two checks of each server.'),
                    default=60,
                    constraints=[constraints.Range(5, 3600)],
                ),
                NODE_UPDATE_TIMEOUT: properties.Schema(
                    properties.Schema.INTEGER,
                    _('Grace in seconds after a server is created or '
                      'updated during which no failure is decided.'),
                    default=300,
                    constraints=[constraints.Range(0, 86400)],
                ),
                RECOVERY_CONDITIONAL: properties.Schema(
                    properties.Schema.STRING,
                    _('ANY_FAILED: one failing detection mode makes a '
                      'server unhealthy; ALL_FAILED: all modes must fail.'),
                    default=ANY_FAILED,
                    constraints=[constraints.AllowedValues(CONDITIONALS)],
                ),
                DETECTION_MODES: properties.Schema(
                    properties.Schema.LIST,
                    _('Detection modes, each type at most once.'),
                    default=[{MODE_TYPE: NODE_STATUS_POLLING}],
                    constraints=[constraints.Length(min=1)],
                    schema=properties.Schema(
                        properties.Schema.MAP,
                        schema={
                            MODE_TYPE: properties.Schema(
                                properties.Schema.STRING,
                                _('Type of failure detection.'),
                                required=True,
                                constraints=[constraints.AllowedValues(
                                    DETECTION_TYPES)],
                            ),
                            MODE_OPTIONS: properties.Schema(
                                properties.Schema.MAP,
                                _('Options of the mode (poll_url_* for '
                                  'NODE_STATUS_POLL_URL).'),
                                default={},
                                schema=_poll_url_options_schema,
                            ),
                        },
                    ),
                ),
            },
        ),
        RECOVERY: properties.Schema(
            properties.Schema.MAP,
            _('How unhealthy servers are recovered.'),
            update_allowed=True,
            default={},
            schema={
                RECOVERY_ACTIONS: properties.Schema(
                    properties.Schema.LIST,
                    _('Escalation ladder: actions tried in order, the next '
                      'one when a server is not healthy again within '
                      'node_update_timeout. REBOOT takes params {type: '
                      'SOFT|HARD}; RECREATE takes {launch_before_terminate: '
                      'true} to keep the server\'s load balancer members '
                      'serving until the new server replaces it (no '
                      'drain; not with fencing). EVACUATE has Nova '
                      'rebuild the server on another host, keeping its '
                      'id, ports and volumes (an admin action, asked as '
                      'heat-health-engine\'s own user): only for a server '
                      'whose compute host is forced down, which it takes '
                      'instead of RECREATE; other servers skip it, so an '
                      'action must follow it. Without it, the cheapest '
                      'action that fits the state Nova reports (paused: '
                      'UNPAUSE, '
                      'stopped: START, suspended: RESUME), then REBOOT, '
                      'then RECREATE. A rung may also be a Mistral '
                      'workflow ({name: <workflow>, type: '
                      'MISTRAL_WORKFLOW, params: {input...}}), run as the '
                      'stack\'s owner and followed to SUCCESS or ERROR '
                      'within node_update_timeout, or a signed webhook '
                      '({type: WEBHOOK, url: ..., params: {...}}) whose '
                      'answer must be 2xx. Their params may hold '
                      '{{ server.id }}, {{ server.name }}, {{ server.ip }}, '
                      '{{ server.addresses }}, {{ stack.id }}, '
                      '{{ resource.path }}, {{ resource.name }}, '
                      '{{ reason }} (and Senlin\'s {{ node.physicalid }}).'),
                    schema=properties.Schema(
                        properties.Schema.MAP,
                        schema={
                            ACTION_NAME: properties.Schema(
                                properties.Schema.STRING,
                                _('Name of the action (%s), or the name '
                                  'or id of the workflow of a '
                                  'MISTRAL_WORKFLOW.') %
                                ', '.join(ACTION_NAMES),
                            ),
                            ACTION_TYPE: properties.Schema(
                                properties.Schema.STRING,
                                _('MISTRAL_WORKFLOW or WEBHOOK for a rung '
                                  'outside Nova; none for a Nova or Heat '
                                  'action.'),
                                constraints=[constraints.AllowedValues(
                                    ACTION_TYPES)],
                            ),
                            ACTION_URL: properties.Schema(
                                properties.Schema.STRING,
                                _('Where a WEBHOOK rung POSTs its signed '
                                  'JSON body; the same network rules as '
                                  'poll URLs apply.'),
                            ),
                            ACTION_PARAMS: properties.Schema(
                                properties.Schema.MAP,
                                _('Parameters of the action.'),
                                default={},
                            ),
                        },
                    ),
                ),
                FENCING: properties.Schema(
                    properties.Schema.LIST,
                    _('Services fenced before recovery.'),
                    default=[],
                    schema=properties.Schema(
                        properties.Schema.STRING,
                        constraints=[constraints.AllowedValues(
                            FENCING_SERVICES)],
                    ),
                ),
                NODE_DELETE_TIMEOUT: properties.Schema(
                    properties.Schema.INTEGER,
                    _('Seconds to wait for a server to be deleted before '
                      'it is recreated.'),
                    default=20,
                    constraints=[constraints.Range(
                        1, policy_spec.MAX_NODE_DELETE_TIMEOUT)],
                ),
                NODE_FORCE_RECREATE: properties.Schema(
                    properties.Schema.BOOLEAN,
                    _('Whether to recreate a server whose deletion failed.'),
                    default=False,
                ),
                MAX_ATTEMPTS: properties.Schema(
                    properties.Schema.INTEGER,
                    _('Recovery attempts of one server within '
                      'attempt_window before it is given up (GAVE_UP).'),
                    default=5,
                    constraints=[constraints.Range(1, 100)],
                ),
                ATTEMPT_WINDOW: properties.Schema(
                    properties.Schema.INTEGER,
                    _('Seconds over which attempts are counted.'),
                    default=3600,
                    constraints=[constraints.Range(1, 604800)],
                ),
                HEALTHY_RESET: properties.Schema(
                    properties.Schema.INTEGER,
                    _('Seconds a server must stay healthy before its '
                      'attempts are forgotten.'),
                    default=600,
                    constraints=[constraints.Range(0, 86400)],
                ),
                BACKOFF_INITIAL: properties.Schema(
                    properties.Schema.INTEGER,
                    _('Seconds before the second recovery attempt of a '
                      'server; doubled for each further one.'),
                    default=10,
                    constraints=[constraints.Range(0, 86400)],
                ),
                BACKOFF_MAX: properties.Schema(
                    properties.Schema.INTEGER,
                    _('Longest wait between two recovery attempts.'),
                    default=300,
                    constraints=[constraints.Range(0, 86400)],
                ),
                BACKOFF_JITTER: properties.Schema(
                    properties.Schema.NUMBER,
                    _('Random noise added to each wait, as a fraction of '
                      'it, so that servers that failed together are not '
                      'recovered in lockstep.'),
                    default=0.2,
                    constraints=[constraints.Range(0, 1)],
                ),
                SUCCESS_THRESHOLD: properties.Schema(
                    properties.Schema.INTEGER,
                    _('Healthy verdicts, seen after an action, before the '
                      'server counts as recovered.'),
                    default=1,
                    constraints=[constraints.Range(1, 10)],
                ),
                MAX_CONCURRENT: properties.Schema(
                    properties.Schema.INTEGER,
                    _('Recoveries of this policy running at once.'),
                    default=1,
                    constraints=[constraints.Range(
                        1, policy_spec.MAX_CONCURRENT)],
                ),
                MAX_UNHEALTHY_FRACTION: properties.Schema(
                    properties.Schema.NUMBER,
                    _('Brake: no new recovery while at least this fraction '
                      'of the targets (three or more) is failing at once: a '
                      'mass failure is more likely a fault of the platform '
                      'or of the observers than of the servers.'),
                    default=0.55,
                    constraints=[constraints.Range(0, 1)],
                ),
                MODE: properties.Schema(
                    properties.Schema.STRING,
                    _('HEAL recovers; OBSERVE only detects and reports.'),
                    default=HEAL,
                    constraints=[constraints.AllowedValues(RECOVERY_MODES)],
                ),
                REPLACE: properties.Schema(
                    properties.Schema.STRING,
                    _('What RECREATE replaces. SERVER: the server '
                      'resource only; its ports, volumes and floating IP '
                      'stay and follow the new server. MEMBER: the group '
                      'member that holds the server (a provider template '
                      'or nested stack member of a group) is replaced '
                      'whole, with its ports, volumes and floating IP.'),
                    default=SERVER,
                    constraints=[constraints.AllowedValues(REPLACE_SCOPES)],
                ),
                RESPECT_USER_ACTIONS: properties.Schema(
                    properties.Schema.BOOLEAN,
                    _('A server its user (or an admin) stopped, paused, '
                      'suspended, shelved or deleted through Nova is not '
                      'healed: it is SUPPRESSED, with who asked and when, '
                      'until it runs again. Nova\'s instance actions tell '
                      'such a stop from one Nova made after the guest '
                      'shut down by itself, which is healed. False heals '
                      'whatever stopped the server.'),
                    default=True,
                ),
            },
        ),
        ENABLED: properties.Schema(
            properties.Schema.BOOLEAN,
            _('Whether the policy is active; false pauses detection and '
              'recovery (maintenance).'),
            default=True,
            update_allowed=True,
        ),
    }

    attributes_schema = {
        STATUS_ATTR: attributes.Schema(
            _('Summary: enabled, owning heat-health-engine, lease, when '
              'every target was last seen as stored, number of targets '
              'per state, and target names not found.'),
            type=attributes.Schema.MAP,
            cache_mode=attributes.Schema.CACHE_NONE,
        ),
        MEMBERS_ATTR: attributes.Schema(
            _('Health of each watched server: server_id, path, state, '
              'reason, source and observed_at of the last observation.'),
            type=attributes.Schema.LIST,
            cache_mode=attributes.Schema.CACHE_NONE,
        ),
        WEBHOOK_SECRET_ATTR: attributes.Schema(
            _('The key of the HMAC-SHA256 signature of the policy\'s '
              'WEBHOOK rungs (header X-Heat-Health-Signature), for the '
              'receiver to check.'),
            type=attributes.Schema.STRING,
        ),
    }

    # Validation

    def _validate_lb_polling(self, options, path):
        balancers = [r.name for r in self.stack.values()
                     if r.type() == LOAD_BALANCER_TYPE]
        named = options.get(self.LOADBALANCER)
        if named is not None and named not in balancers:
            self._invalid(_('loadbalancer "%s" is not an %s of this '
                            'stack') % (named, LOAD_BALANCER_TYPE),
                          *(path + (self.MODE_OPTIONS, self.LOADBALANCER)))
        if not balancers:
            self._invalid(_('LB_STATUS_POLLING reads the pool of an %s of '
                            'this stack, and this stack has none') %
                          LOAD_BALANCER_TYPE, *(path + (self.MODE_TYPE,)))

    def _validate_poll_url(self, options, path):
        url = options.get(self.POLL_URL)
        if not url:
            self._invalid(_('poll_url is required for detection mode '
                            'NODE_STATUS_POLL_URL'), *path)
        try:
            fields = [f for _text, f, _spec, _conv in
                      string.Formatter().parse(url) if f is not None]
        except ValueError as exc:
            self._invalid(_('poll_url "%(url)s" is not a valid template: '
                            '%(err)s') % {'url': url, 'err': exc},
                          *(path + (self.POLL_URL,)))
        unknown = sorted(set(fields) - set(POLL_URL_VARIABLES))
        if unknown:
            self._invalid(_('poll_url may only use the variables {ip}, '
                            '{name} and {id}, not %s') %
                          ', '.join('{%s}' % f for f in unknown),
                          *(path + (self.POLL_URL,)))
        if not re.match(r'^https?://', url):
            self._invalid(_('poll_url "%s" must be an http:// or https:// '
                            'URL') % url, *(path + (self.POLL_URL,)))
        refused = poll_url_rules.poll_url_refusal_at_validation(url)
        if refused:
            self._invalid(refused, *(path + (self.POLL_URL,)))
        # A URL no check of which the engine may make: the mode would be
        # blind for every server.
        group = cfg.CONF[config.GROUP]
        refused = poll_url_rules.poll_url_refusal_under_rules(
            url, group.poll_url_allowed_hosts,
            group.poll_url_allowed_networks)
        if refused:
            self._invalid(_('%s: no server could ever be checked') % refused,
                          *(path + (self.POLL_URL,)))
        pattern = options.get(self.POLL_URL_HEALTHY_RESPONSE)
        if pattern is not None:
            if not pattern:
                self._invalid(_('poll_url_healthy_response must not be '
                                'empty: an empty pattern matches any '
                                'response'),
                              *(path + (self.POLL_URL_HEALTHY_RESPONSE,)))
            # What the engine matches with: RE2, in linear time.
            try:
                poll_url_rules.healthy_pattern(pattern)
            except ValueError as exc:
                self._invalid(_('poll_url_healthy_response is not a pattern '
                                'RE2 can match in linear time (RE2 syntax; '
                                'backreferences and lookaround are not '
                                'supported): %s') % exc,
                              *(path + (self.POLL_URL_HEALTHY_RESPONSE,)))

    def _validate_detection(self):
        detection = self.properties[self.DETECTION]
        seen = set()
        for index, mode in enumerate(detection[self.DETECTION_MODES]):
            path = (self.DETECTION, self.DETECTION_MODES, index)
            mode_type = mode[self.MODE_TYPE]
            if mode_type in seen:
                self._invalid(_('detection mode %s is listed twice') %
                              mode_type, *path)
            seen.add(mode_type)
            options = mode.get(self.MODE_OPTIONS) or {}
            if mode_type == self.LB_STATUS_POLLING:
                self._validate_lb_polling(options, path)
            elif options.get(self.LOADBALANCER) is not None:
                self._invalid(_('the loadbalancer option applies only to '
                                'detection mode LB_STATUS_POLLING, not %s') %
                              mode_type, *path)
            if mode_type == self.NODE_STATUS_POLL_URL:
                self._validate_poll_url(options, path + (self.MODE_OPTIONS,))
            elif (options.get(self.POLL_URL) is not None or
                  options.get(self.POLL_URL_HEALTHY_RESPONSE) is not None):
                self._invalid(_('poll_url options apply only to detection '
                                'mode NODE_STATUS_POLL_URL, not %s') %
                              mode_type, *path)

    def _named_by_resources(self):
        """Indexes of the rungs whose value another resource gives.

        (``get_resource`` of an OS::Mistral::Workflow of the same
        template, say: before that one is created, the name read is the
        resource's own, not the workflow's.) None: all of them, as the
        ladder as a whole comes from a resource.
        """
        raw = self.properties.data.get(self.RECOVERY)

        def from_resources(snippet):
            return any(True for _r in function.dependencies(snippet))
        if isinstance(raw, function.Function):
            return None if from_resources(raw) else set()
        actions = (raw or {}).get(self.RECOVERY_ACTIONS)
        if isinstance(actions, function.Function):
            return None if from_resources(actions) else set()
        return {index for index, action in enumerate(actions or [])
                if from_resources(action)}

    def _validate_outside_rung(self, action, index, later=()):
        """A MISTRAL_WORKFLOW or WEBHOOK rung, as far as text can tell.

        :param later: indexes of rungs another resource gives, whose
            values are not known yet.
        """
        kind = action[self.ACTION_TYPE]
        path = (self.RECOVERY, self.RECOVERY_ACTIONS, index)
        if later is None or index in later:
            return
        if kind == self.MISTRAL_WORKFLOW:
            if not action.get(self.ACTION_NAME):
                self._invalid(_('a %s rung names its workflow (name)') %
                              kind, *path)
            if action.get(self.ACTION_URL) is not None:
                self._invalid(_('url is only for a %s rung') % self.WEBHOOK,
                              *(path + (self.ACTION_URL,)))
        else:
            url = action.get(self.ACTION_URL)
            if not url:
                self._invalid(_('a %s rung needs its url') % kind, *path)
            refused = poll_url_guard.refusal_at_validation(url, {})
            if refused:
                self._invalid(_('url of a %(kind)s rung: %(why)s') % {
                    'kind': kind, 'why': refused},
                    *(path + (self.ACTION_URL,)))
            if action.get(self.ACTION_NAME):
                self._invalid(_('a %s rung takes no name') % kind,
                              *(path + (self.ACTION_NAME,)))
        unknown = rung_params.unknown(action.get(self.ACTION_PARAMS) or {})
        if unknown:
            self._invalid(_('params use unknown variables %(bad)s; known: '
                            '%(known)s') % {
                'bad': ', '.join(unknown),
                'known': ', '.join(rung_params.VARIABLES)},
                *(path + (self.ACTION_PARAMS,)))

    def _validate_recovery(self):
        recovery = self.properties[self.RECOVERY]
        if recovery[self.BACKOFF_INITIAL] > recovery[self.BACKOFF_MAX]:
            self._invalid(_('backoff_initial (%(i)s) is larger than '
                            'backoff_max (%(m)s)') %
                          {'i': recovery[self.BACKOFF_INITIAL],
                           'm': recovery[self.BACKOFF_MAX]},
                          self.RECOVERY, self.BACKOFF_INITIAL)
        actions = recovery[self.RECOVERY_ACTIONS] or []
        later = self._named_by_resources()
        keys = [(a.get(self.ACTION_TYPE), a[self.ACTION_NAME],
                 a.get(self.ACTION_URL),
                 None if a.get(self.ACTION_TYPE) else
                 (a.get(self.ACTION_PARAMS) or {}).get('type'))
                for a in actions]
        if len(set(keys)) != len(keys):
            self._invalid(_('recovery actions must not repeat: %s') %
                          ', '.join(str(a[self.ACTION_NAME] or
                                        a[self.ACTION_URL])
                                    for a in actions),
                          self.RECOVERY, self.RECOVERY_ACTIONS)
        for index, action in enumerate(actions):
            params = action.get(self.ACTION_PARAMS) or {}
            path = (self.RECOVERY, self.RECOVERY_ACTIONS, index,
                    self.ACTION_PARAMS)
            if action.get(self.ACTION_TYPE):
                self._validate_outside_rung(action, index, later)
                continue
            if not action[self.ACTION_NAME]:
                self._invalid(_('an action needs a name (%s) or a type '
                                '(%s)') % (', '.join(self.ACTION_NAMES),
                                           ', '.join(self.ACTION_TYPES)),
                              self.RECOVERY, self.RECOVERY_ACTIONS, index)
            if action[self.ACTION_NAME] not in self.ACTION_NAMES:
                self._invalid(_('"%(name)s" is not an action (%(names)s); '
                                'a workflow needs type: %(wf)s') % {
                    'name': action[self.ACTION_NAME],
                    'names': ', '.join(self.ACTION_NAMES),
                    'wf': self.MISTRAL_WORKFLOW}, self.RECOVERY,
                    self.RECOVERY_ACTIONS, index, self.ACTION_NAME)
            if action.get(self.ACTION_URL) is not None:
                self._invalid(_('url is only for a %s rung') % self.WEBHOOK,
                              self.RECOVERY, self.RECOVERY_ACTIONS, index,
                              self.ACTION_URL)
            allowed = {self.REBOOT: {'type'},
                       self.RECREATE: {LAUNCH_BEFORE_TERMINATE}}.get(
                           action[self.ACTION_NAME], set())
            unknown = sorted(set(params) - allowed)
            if unknown:
                self._invalid(_('%(action)s takes no parameter %(p)s') % {
                    'action': action[self.ACTION_NAME],
                    'p': ', '.join(unknown)}, *path)
            if params.get('type', 'SOFT') not in self.REBOOT_TYPES:
                self._invalid(_('REBOOT type must be SOFT or HARD, not '
                                '%s') % params['type'], *path)
            early = params.get(LAUNCH_BEFORE_TERMINATE, False)
            if not isinstance(early, bool):
                self._invalid(_('%s must be true or false') %
                              LAUNCH_BEFORE_TERMINATE, *path)
            if (action[self.ACTION_NAME] == self.EVACUATE and
                    index == len(actions) - 1):
                self._invalid(_('EVACUATE heals only servers whose host is '
                                'down: an action must follow it for the '
                                'others'), self.RECOVERY,
                              self.RECOVERY_ACTIONS, index)
            if early and recovery[self.FENCING]:
                self._invalid(_('%s keeps the old server serving, which '
                                'fencing stops first: use one or the '
                                'other') % LAUNCH_BEFORE_TERMINATE, *path)
