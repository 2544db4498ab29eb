# Mistral for tools/localcloud: the workflow service's API, engine and
# executor in one process (mistral_server.py; the service is named
# "mistral"), with one worker each, on the machine's MariaDB (sqlite when
# the deployment uses it) and RabbitMQ, its API on 127.0.0.1:8989 behind
# the local Keystone.  Mistral's standard actions (std.echo, std.http,
# std.fail, std.noop...) are there; no OpenStack actions (mistral-extra).
# std.http may reach 127.0.0.1 (or localhost) and nothing else: Mistral
# denies loopback by default, and this machine has nothing else to reach.
# No cron triggers fire (none are needed, and their loop would read the
# database every second).
#
# Sourced by tools/localcloud after its settings; defines functions only,
# plus the settings below.  On with LOCALCLOUD_MISTRAL=1 (tools/run-tests
# and tools/quickstart turn it on), off with LOCALCLOUD_MISTRAL=0; unset,
# as the last "up" left it (off for a new deployment). Off, "up" stops
# Mistral and takes it out of the catalog, its database being kept until
# down --purge.

MISTRAL_PORT=8989
MISTRAL_ETC=$ETC/mistral
MISTRAL_CONF=$MISTRAL_ETC/mistral.conf
MISTRAL_READY_PATTERNS=("Engine server started." "Executor server started."
                        "api, engine and executor started")

mistral_enabled() {
    is_service_enabled mistral
}

# mistral_load_env: enable the service and load its secret (from load_env)
mistral_load_env() {
    # Unset: as the last "up" left it (off for a new deployment), so a
    # service brought up again by a test keeps Mistral.
    local wanted=${LOCALCLOUD_MISTRAL:-$(cat "$STATE/mistral-mode" 2>/dev/null || echo off)}
    [[ $wanted =~ ^(1|[Tt]rue|yes|on)$ ]] || return 0
    enable_service mistral
    export LC_MISTRAL_URL=http://$HOST:$MISTRAL_PORT/v2
    local file=$STATE/secrets
    if ! grep -qs "^LC_MISTRAL_DB_PASSWORD=" "$file"; then
        (umask 077; echo "LC_MISTRAL_DB_PASSWORD=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')" >>"$file")
    fi
    source "$file"
}

# mistral_catalog_changed: whether the catalog is to gain or lose Mistral
# since the last "up" (a deployment that never recorded it had none);
# remembers the new state
mistral_catalog_changed() {
    local file=$STATE/mistral-mode now last
    now=$(mistral_enabled && echo on || echo off)
    last=$(cat "$file" 2>/dev/null || echo off)
    echo "$now" >"$file"
    [[ $now != "$last" ]]
}

# Databases
# ---------

# mistral_setup_databases: after choose_db_backend and setup_databases.
# MariaDB: database mistral with its own user of the same name, marked as
# localcloud's; else an sqlite file beside the others.
mistral_setup_databases() {
    mistral_enabled || return 0
    if [[ $DB_BACKEND == mariadb ]]; then
        MISTRAL_DB_URL="mysql+pymysql://mistral:$LC_MISTRAL_DB_PASSWORD@$HOST:$MYSQL_PORT/mistral?charset=utf8mb4"
        local fresh=0
        stamp_ok mistral-mysql "$LC_MISTRAL_DB_PASSWORD" && return 0
        [[ -f $STATE/mistral-mysql.stamp ]] || fresh=1
        mysql_database mistral "$LC_MISTRAL_DB_PASSWORD" "$fresh"
        stamp_set mistral-mysql "$LC_MISTRAL_DB_PASSWORD"
    else
        MISTRAL_DB_URL="sqlite:///$DATA/mistral.sqlite"
    fi
}

# mistral_drop_databases: for down --purge, what mistral_setup_databases made
mistral_drop_databases() {
    drop_marked_databases mistral
}

# Runs in the background while Keystone is set up: the schema (made from
# Mistral's models on sqlite, mistral_db.py), then the actions and standard
# workflows Mistral keeps in its database.
init_mistral() {
    local version want
    version=$(cd "$VENV" && echo lib/python3*/site-packages/mistral-*.dist-info)
    want="$version $MISTRAL_DB_URL"
    stamp_ok mistral-db "$want" && return 0
    say "mistral: database schema and standard actions"
    if [[ $DB_BACKEND == sqlite ]]; then
        # Mistral's migrations alter constraints, which sqlite cannot.
        "$BIN/python" "$HELPERS/mistral_db.py" --config-file "$MISTRAL_CONF" ||
            fail "creating Mistral's sqlite schema failed"
        "$BIN/mistral-db-manage" --config-file "$MISTRAL_CONF" stamp head ||
            fail "mistral-db-manage stamp head failed"
    fi
    "$BIN/mistral-db-manage" --config-file "$MISTRAL_CONF" upgrade head ||
        fail "mistral-db-manage upgrade head failed"
    "$BIN/mistral-db-manage" --config-file "$MISTRAL_CONF" populate ||
        fail "mistral-db-manage populate failed"
    stamp_set mistral-db "$want"
}

# Configuration
# -------------

configure_mistral() {
    mistral_enabled || return 0
    if ! _service_pid mistral >/dev/null && port_answers "$MISTRAL_PORT"; then
        fail "$HOST:$MISTRAL_PORT is taken by a process this localcloud did not start (another checkout's localcloud?)"
    fi
    mkdir -p "$MISTRAL_ETC"
    local conf=$MISTRAL_CONF section=keystone_authtoken
    iniset "$conf" DEFAULT debug "$DEBUG"
    iniset "$conf" DEFAULT transport_url "$TRANSPORT_URL"
    iniset "$conf" database connection "$MISTRAL_DB_URL"
    iniset "$conf" api host "$HOST"
    iniset "$conf" api port "$MISTRAL_PORT"
    iniset "$conf" pecan auth_enable True
    iniset "$conf" oslo_concurrency lock_path "$DATA/lock"
    iniset "$conf" cron_trigger enabled False
    iniset "$conf" $section www_authenticate_uri "$LC_KEYSTONE_URL"
    iniset "$conf" $section auth_url "http://$HOST:$KEYSTONE_PORT"
    iniset "$conf" $section auth_type password
    iniset "$conf" $section username mistral
    iniset "$conf" $section password "$LC_SERVICE_PASSWORD"
    iniset "$conf" $section user_domain_name Default
    iniset "$conf" $section project_domain_name Default
    iniset "$conf" $section project_name service
    iniset "$conf" $section region_name "$REGION"
    iniset "$conf" $section service_token_roles_required true
    # Workflows here call only this machine: the loopback address, which
    # Mistral's egress policy refuses by default, and no other host; the
    # link-local ranges stay denied.
    iniset "$conf" action_std_http allowed_hosts "$HOST,localhost"
    iniset "$conf" action_std_http denied_cidrs "169.254.0.0/16,fe80::/10"
    chmod 600 "$conf"
}

# Starting and checking
# ---------------------

start_mistral() {
    run_process mistral \
        "$BIN/python $HELPERS/mistral_server.py --config-file $MISTRAL_CONF"
}

# mistral_stop_disabled: a Mistral left running by an "up" with the switch
# on goes when it is off
mistral_stop_disabled() {
    mistral_enabled && return 0
    _service_pid mistral >/dev/null || return 0
    stop_services mistral
}

# mistral_inputs_hash: what the process reads when it starts
mistral_inputs_hash() {
    cat "$MISTRAL_CONF" "$HELPERS/mistral_server.py" 2>/dev/null |
        sha256sum | cut -d' ' -f1
}

# mistral_api_answers: GET / lists Mistral's API versions
mistral_api_answers() {
    local reply status
    reply=$(timeout 5 bash -c '
        exec 3<>"/dev/tcp/$0/$1" || exit 1
        printf "GET / HTTP/1.0\r\nHost: %s:%s\r\nAccept: application/json\r\n\r\n" "$0" "$1" >&3
        cat <&3' "$HOST" "$MISTRAL_PORT" 2>/dev/null) || true
    status=$(head -n 1 <<<"$reply" | cut -d' ' -f2)
    if [[ $status != 200 ]] || ! grep -q '"versions"' <<<"$reply"; then
        echo "GET / on $HOST:$MISTRAL_PORT answered ${status:-nothing}"
        return 1
    fi
}

# mistral_check: one line, status 0 if the API answers and the log since
# the last start says the engine and the executor started
mistral_check() {
    local pattern
    if ! _service_pid mistral >/dev/null; then
        echo "not running"
        return 1
    fi
    for pattern in "${MISTRAL_READY_PATTERNS[@]}"; do
        if ! awk -v p="$pattern" '
                /^---- localcloud: starting / { ready = 0; next }
                index($0, p) { ready = 1 }
                END { exit !ready }' "$LOCALCLOUD_LOGS/mistral.log" 2>/dev/null; then
            echo "running; its log does not say \"$pattern\" yet"
            return 1
        fi
    done
    mistral_api_answers || return 1
    echo "GET / answered 200; engine and executor started"
}
