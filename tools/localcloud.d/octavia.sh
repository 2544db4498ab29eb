# Octavia for tools/localcloud: octavia-api (uwsgi) and octavia-worker with
# the amphora provider on Octavia's noop amphora, compute, network, image and
# volume drivers.  Load balancers and their children go through Octavia's
# real API, database, message bus and worker flows and reach ACTIVE; nothing
# is booted.  No health manager runs, so operating statuses stay where the
# worker leaves them until "tools/localcloud fault member" sets them the way
# the health manager would.  Both run through octavia_noop.py, which only
# makes the noop network driver answer the same network for a subnet in
# every process (see there why Heat needs it).
#
# Sourced by tools/localcloud after its settings; defines functions only,
# plus the settings below.  LOCALCLOUD_OCTAVIA=0 leaves Octavia out.

OCTAVIA_API_PORT=9876
OCTAVIA_ETC=$ETC/octavia
OCTAVIA_CONF=$OCTAVIA_ETC/octavia.conf
OCTAVIA_CERTS=$OCTAVIA_ETC/certs
OCTAVIA_WORKER_READY_PATTERN="Starting V2 consumer"
OCTAVIA_MEMBER_STATUSES="ERROR ONLINE OFFLINE NO_MONITOR DRAINING"

octavia_enabled() {
    is_service_enabled octavia-api
}

# octavia_load_env: enable the services and load their secrets (from load_env)
octavia_load_env() {
    [[ ${LOCALCLOUD_OCTAVIA:-1} =~ ^(0|[Ff]alse|no)$ ]] && return 0
    enable_service octavia-api octavia-worker
    export LC_OCTAVIA_URL=http://$HOST:$OCTAVIA_API_PORT
    local file=$STATE/secrets name
    (
        umask 077
        for name in LC_OCTAVIA_DB_PASSWORD LC_OCTAVIA_CA_PASSPHRASE \
                    LC_OCTAVIA_CERTS_PASSPHRASE; do
            # 16 random bytes in hex: the 32 characters Octavia wants for
            # server_certs_key_passphrase.
            if ! grep -qs "^$name=" "$file"; then
                echo "$name=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')" >>"$file"
            fi
        done
    )
    source "$file"
}

# Databases
# ---------

# octavia_setup_databases: after choose_db_backend and setup_databases.
# MariaDB: databases octavia and octavia_persistence, each with its own user
# of the same name, marked as localcloud's.  Octavia's migrations do not run
# on sqlite (they alter constraints): there the schema is made from Octavia's
# models, as Octavia's own functional tests do.
octavia_setup_databases() {
    octavia_enabled || return 0
    if [[ $DB_BACKEND == mariadb ]]; then
        OCTAVIA_DB_URL="mysql+pymysql://octavia:$LC_OCTAVIA_DB_PASSWORD@$HOST:$MYSQL_PORT/octavia?charset=utf8mb4"
        OCTAVIA_PERSISTENCE_DB_URL="mysql+pymysql://octavia_persistence:$LC_OCTAVIA_DB_PASSWORD@$HOST:$MYSQL_PORT/octavia_persistence?charset=utf8mb4"
        local fresh=0
        stamp_ok octavia-mysql "$LC_OCTAVIA_DB_PASSWORD" && return 0
        [[ -f $STATE/octavia-mysql.stamp ]] || fresh=1
        mysql_database octavia "$LC_OCTAVIA_DB_PASSWORD" "$fresh"
        mysql_database octavia_persistence "$LC_OCTAVIA_DB_PASSWORD" "$fresh"
        stamp_set octavia-mysql "$LC_OCTAVIA_DB_PASSWORD"
    else
        OCTAVIA_DB_URL="sqlite:///$DATA/octavia.sqlite"
        OCTAVIA_PERSISTENCE_DB_URL="sqlite:///$DATA/octavia_persistence.sqlite"
    fi
}

# octavia_drop_databases: for down --purge, what octavia_setup_databases made
octavia_drop_databases() {
    drop_marked_databases octavia octavia_persistence
}

# Runs in the background while Keystone is set up.
init_octavia() {
    local version want
    version=$(cd "$VENV" && echo lib/python3*/site-packages/octavia-*.dist-info)
    want="$version $OCTAVIA_DB_URL $OCTAVIA_PERSISTENCE_DB_URL"
    stamp_ok octavia-db "$want" && return 0
    say "octavia: database schema"
    if [[ $DB_BACKEND == mariadb ]]; then
        "$BIN/octavia-db-manage" --config-file "$OCTAVIA_CONF" upgrade head ||
            fail "octavia-db-manage upgrade head failed"
    else
        "$BIN/python" "$HELPERS/octavia_db.py" "$OCTAVIA_CONF" sqlite-schema ||
            fail "creating Octavia's sqlite schema failed"
    fi
    "$BIN/octavia-db-manage" --config-file "$OCTAVIA_CONF" upgrade_persistence ||
        fail "octavia-db-manage upgrade_persistence failed"
    stamp_set octavia-db "$want"
}

# Configuration
# -------------

# octavia_certs: a CA whose key is encrypted (Octavia refuses a plain one)
# and a controller client certificate it signed, made once
octavia_certs() {
    local want pass=env:LC_OCTAVIA_CA_PASSPHRASE
    want=$(echo "$LC_OCTAVIA_CA_PASSPHRASE" | sha256sum | cut -d' ' -f1)
    if stamp_ok octavia-certs "$want" && [[ -f $OCTAVIA_CERTS/ca.pem && -f $OCTAVIA_CERTS/client.pem ]]; then
        return 0
    fi
    say "octavia: certificates"
    rm -rf "$OCTAVIA_CERTS"
    mkdir -p "$OCTAVIA_CERTS"
    (
        umask 077
        cd "$OCTAVIA_CERTS"
        # The passphrase reaches openssl through its environment only.
        export LC_OCTAVIA_CA_PASSPHRASE
        openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 \
            -aes-256-cbc -pass "$pass" -out ca.key &&
        openssl req -x509 -new -key ca.key -passin "$pass" -sha256 -days 3650 \
            -subj "/CN=localcloud Octavia CA" -out ca.pem &&
        openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 \
            -out client.key &&
        openssl req -new -key client.key -subj "/CN=localcloud Octavia controller" \
            -out client.csr &&
        openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -passin "$pass" \
            -CAcreateserial -sha256 -days 3650 -out client.crt &&
        cat client.crt client.key >client.pem &&
        rm -f client.csr
    ) >>"$SETUP_LOG" 2>&1 || fail "making Octavia's certificates failed" "$SETUP_LOG"
    stamp_set octavia-certs "$want"
}

configure_octavia() {
    octavia_enabled || return 0
    if ! _service_pid octavia-api >/dev/null && port_answers "$OCTAVIA_API_PORT"; then
        fail "$HOST:$OCTAVIA_API_PORT is taken by a process this localcloud did not start (another checkout's localcloud?)"
    fi
    mkdir -p "$OCTAVIA_ETC"
    octavia_certs
    local conf=$OCTAVIA_CONF section
    iniset "$conf" DEFAULT debug "$DEBUG"
    iniset "$conf" DEFAULT transport_url "$TRANSPORT_URL"
    iniset "$conf" api_settings bind_host "$HOST"
    iniset "$conf" api_settings bind_port "$OCTAVIA_API_PORT"
    iniset "$conf" api_settings auth_strategy keystone
    iniset "$conf" api_settings enabled_provider_drivers "amphora:The Octavia Amphora driver (noop drivers)"
    iniset "$conf" api_settings default_provider_driver amphora
    iniset "$conf" DEFAULT graceful_shutdown_timeout 10
    iniset "$conf" database connection "$OCTAVIA_DB_URL"
    if [[ $DB_BACKEND == sqlite ]]; then
        # Empty: sqlite's pool takes no pool_timeout (Octavia sets 10).
        iniset "$conf" database pool_timeout ""
    else
        inidelete "$conf" database pool_timeout
    fi
    iniset "$conf" task_flow persistence_connection "$OCTAVIA_PERSISTENCE_DB_URL"
    iniset "$conf" task_flow jobboard_enabled False
    iniset "$conf" oslo_messaging topic octavia_prov
    iniset "$conf" oslo_concurrency lock_path "$DATA/lock"
    for section in keystone_authtoken service_auth; do
        iniset "$conf" "$section" auth_type password
        iniset "$conf" "$section" auth_url "http://$HOST:$KEYSTONE_PORT"
        iniset "$conf" "$section" username octavia
        iniset "$conf" "$section" password "$LC_SERVICE_PASSWORD"
        iniset "$conf" "$section" user_domain_name Default
        iniset "$conf" "$section" project_domain_name Default
        iniset "$conf" "$section" project_name service
    done
    iniset "$conf" keystone_authtoken www_authenticate_uri "$LC_KEYSTONE_URL"
    iniset "$conf" keystone_authtoken service_token_roles_required true
    iniset "$conf" service_auth region_name "$REGION"

    iniset "$conf" controller_worker workers 1
    iniset "$conf" controller_worker amphora_driver amphora_noop_driver
    iniset "$conf" controller_worker compute_driver compute_noop_driver
    iniset "$conf" controller_worker network_driver network_noop_driver
    iniset "$conf" controller_worker image_driver image_noop_driver
    iniset "$conf" controller_worker volume_driver volume_noop_driver
    iniset "$conf" controller_worker loadbalancer_topology SINGLE
    iniset "$conf" controller_worker amp_image_tag amphora
    iniset "$conf" controller_worker amp_flavor_id noop
    iniset "$conf" controller_worker amp_boot_network_list 00000000-0000-0000-0000-000000000001
    iniset "$conf" controller_worker client_ca "$OCTAVIA_CERTS/ca.pem"
    iniset "$conf" certificates ca_certificate "$OCTAVIA_CERTS/ca.pem"
    iniset "$conf" certificates ca_private_key "$OCTAVIA_CERTS/ca.key"
    iniset "$conf" certificates ca_private_key_passphrase "$LC_OCTAVIA_CA_PASSPHRASE"
    iniset "$conf" certificates server_certs_key_passphrase "$LC_OCTAVIA_CERTS_PASSPHRASE"
    iniset "$conf" haproxy_amphora server_ca "$OCTAVIA_CERTS/ca.pem"
    iniset "$conf" haproxy_amphora client_cert "$OCTAVIA_CERTS/client.pem"
    chmod 600 "$conf"

    # octavia_noop.py: Octavia's own API and worker, with the noop network
    # driver's subnets kept in one network across processes.
    write_uwsgi_ini "$OCTAVIA_ETC/octavia-api-uwsgi.ini" "$OCTAVIA_API_PORT" \
        octavia_noop:application "pythonpath = $HELPERS" \
        "pyargv = --config-file $OCTAVIA_CONF"
}

# Starting and checking
# ---------------------

start_octavia_api() {
    run_process octavia-api "$BIN/uwsgi --ini $OCTAVIA_ETC/octavia-api-uwsgi.ini"
}

start_octavia_worker() {
    run_process octavia-worker \
        "$BIN/python $HELPERS/octavia_noop.py worker --config-file $OCTAVIA_CONF"
}

# octavia_inputs_hash <service>: what the service reads when it starts
octavia_inputs_hash() {
    local files=("$OCTAVIA_CONF" "$HELPERS/octavia_noop.py")
    [[ $1 == octavia-api ]] && files+=("$OCTAVIA_ETC/octavia-api-uwsgi.ini")
    cat "${files[@]}" 2>/dev/null | sha256sum | cut -d' ' -f1
}

# octavia_api_answers: GET / lists Octavia's API versions
octavia_api_answers() {
    local reply status
    reply=$(timeout 5 bash -c '
        exec 3<>"/dev/tcp/$0/$1" || exit 1
        printf "GET / HTTP/1.0\r\nHost: %s:%s\r\nAccept: application/json\r\n\r\n" "$0" "$1" >&3
        cat <&3' "$HOST" "$OCTAVIA_API_PORT" 2>/dev/null) || true
    status=$(head -n 1 <<<"$reply" | cut -d' ' -f2)
    if [[ $status != 200 ]] || ! grep -q '"versions"' <<<"$reply"; then
        echo "GET / on $HOST:$OCTAVIA_API_PORT answered ${status:-nothing}"
        return 1
    fi
    echo "GET / answered 200 with the API versions"
}

# octavia_worker_ready: running, and its log since the last start says its
# consumer started
octavia_worker_ready() {
    if ! awk -v p="$OCTAVIA_WORKER_READY_PATTERN" '
            /^---- localcloud: starting / { ready = 0; next }
            index($0, p) { ready = 1 }
            END { exit !ready }' "$LOCALCLOUD_LOGS/octavia-worker.log" 2>/dev/null; then
        echo "running; its log does not say \"$OCTAVIA_WORKER_READY_PATTERN\" yet"
        return 1
    fi
    echo "running, log says its consumer started"
}

# octavia_check <service>: one line, status 0 if the service is up
octavia_check() {
    if ! _service_pid "$1" >/dev/null; then
        echo "not running"
        return 1
    fi
    case $1 in
        octavia-api) octavia_api_answers ;;
        octavia-worker) octavia_worker_ready ;;
    esac
}

# Faults
# ------

# octavia_fault_member <member_id>... <status>: set the members' operating
# status, and their pools', listeners' and load balancers' after them, in
# Octavia's database as the health manager would after one heartbeat
octavia_fault_member() {
    local usage="usage: tools/localcloud fault member <member_id>... ${OCTAVIA_MEMBER_STATUSES// /|}"
    (($# >= 2)) || fail "$usage"
    [[ " $OCTAVIA_MEMBER_STATUSES " == *" ${!#} "* ]] || fail "$usage"
    octavia_enabled || fail "Octavia is not enabled (LOCALCLOUD_OCTAVIA=0)"
    [[ -f $OCTAVIA_CONF ]] || fail "Octavia is not set up: run tools/localcloud up"
    "$BIN/python" "$HELPERS/octavia_db.py" "$OCTAVIA_CONF" fault-member "$@"
}
