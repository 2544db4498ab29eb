# Real Nova for tools/localcloud: Placement's API and nova-api (uwsgi),
# nova-conductor, nova-scheduler and two nova-compute services (hosts
# compute1 and compute2), cells v2, on the machine's MariaDB and RabbitMQ.
# The computes run the fault driver of tests/fault_driver (a subclass of
# Nova's fake driver), loaded through a one-line shim module placed in
# nova.virt; each serves its control API on 127.0.0.1 (FAULT_DRIVER_PORTS).
# Glance and Neutron stay fakecloud's simulated ones, which answer Nova's
# calls; the catalog's compute entry points at nova-api.
#
# Sourced by tools/localcloud after its settings; defines functions only,
# plus the settings below.  LOCALCLOUD_NOVA=real turns it on (fakecloud's
# simulated Nova otherwise); the choice is kept for the next "up", and
# "tools/localcloud nova real|fake" changes it on a running deployment.

NOVA_API_PORT=8764
PLACEMENT_PORT=8778
NOVA_ETC=$ETC/nova
NOVA_CONF=$NOVA_ETC/nova.conf
PLACEMENT_CONF=$NOVA_ETC/placement.conf
NOVA_COMPUTE_HOSTS=(compute1 compute2)
FAULT_DRIVER_PORTS=(8791 8792)
NOVA_DRIVER_SHIM=heat_health_fault_driver
NOVA_SERVICES=(placement-api nova-api nova-conductor nova-scheduler nova-compute-1 nova-compute-2)
# Seconds between Nova's own power state syncs (600 by default): a guest
# lost from the hypervisor shows only after one. Shorter here so tests
# see it within their time; the README says so.
NOVA_SYNC_POWER_STATE_INTERVAL=${LOCALCLOUD_NOVA_SYNC_INTERVAL:-10}

nova_enabled() {
    is_service_enabled nova-api
}

# nova_load_env: enable the services and load their secrets (from load_env)
nova_load_env() {
    NOVA_MODE=${LOCALCLOUD_NOVA:-$(cat "$STATE/nova-mode" 2>/dev/null || echo fake)}
    [[ $NOVA_MODE == real || $NOVA_MODE == fake ]] ||
        fail "LOCALCLOUD_NOVA must be real or fake, not $NOVA_MODE"
    echo "$NOVA_MODE" >"$STATE/nova-mode"
    [[ $NOVA_MODE == real ]] || return 0
    enable_service "${NOVA_SERVICES[@]}"
    export LC_NOVA_URL=http://$HOST:$NOVA_API_PORT
    export LC_PLACEMENT_URL=http://$HOST:$PLACEMENT_PORT
    local file=$STATE/secrets
    if ! grep -qs "^LC_NOVA_DB_PASSWORD=" "$file"; then
        (umask 077; echo "LC_NOVA_DB_PASSWORD=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')" >>"$file")
    fi
    source "$file"
}

# nova_setup_databases: placement, nova_api, nova and nova_cell0, each with
# its own user; MariaDB only (Nova's migrations do not run on sqlite)
nova_setup_databases() {
    nova_enabled || return 0
    [[ $DB_BACKEND == mariadb ]] || fail "real Nova needs MariaDB (LOCALCLOUD_DB=sqlite is for fakecloud only)"
    local name fresh=0
    NOVA_DB_BASE="mysql+pymysql://%s:$LC_NOVA_DB_PASSWORD@$HOST:$MYSQL_PORT/%s?charset=utf8mb4"
    stamp_ok nova-mysql "$LC_NOVA_DB_PASSWORD" && return 0
    [[ -f $STATE/nova-mysql.stamp ]] || fresh=1
    for name in placement nova_api nova nova_cell0; do
        mysql_database "$name" "$LC_NOVA_DB_PASSWORD" "$fresh"
    done
    stamp_set nova-mysql "$LC_NOVA_DB_PASSWORD"
}

nova_db_url() {
    # shellcheck disable=SC2059
    printf "$NOVA_DB_BASE" "$1" "$1"
}

# nova_drop_databases: for down --purge, what nova_setup_databases made
nova_drop_databases() {
    drop_marked_databases placement nova_api nova nova_cell0
}

# Configuration
# -------------

# nova_service_auth <conf> <section> <user>: password auth as a service user
nova_service_auth() {
    local conf=$1 section=$2 user=$3
    iniset "$conf" "$section" auth_type password
    iniset "$conf" "$section" auth_url "http://$HOST:$KEYSTONE_PORT"
    iniset "$conf" "$section" username "$user"
    iniset "$conf" "$section" password "$LC_SERVICE_PASSWORD"
    iniset "$conf" "$section" user_domain_name Default
    iniset "$conf" "$section" project_domain_name Default
    iniset "$conf" "$section" project_name service
}

configure_nova() {
    nova_enabled || return 0
    local conf=$NOVA_CONF section i host
    mkdir -p "$NOVA_ETC" "$DATA/nova"
    iniset "$PLACEMENT_CONF" DEFAULT debug "$DEBUG"
    iniset "$PLACEMENT_CONF" placement_database connection "$(nova_db_url placement)"
    iniset "$PLACEMENT_CONF" api auth_strategy keystone
    nova_service_auth "$PLACEMENT_CONF" keystone_authtoken placement
    iniset "$PLACEMENT_CONF" keystone_authtoken www_authenticate_uri "$LC_KEYSTONE_URL"
    iniset "$PLACEMENT_CONF" keystone_authtoken service_token_roles_required true
    chmod 600 "$PLACEMENT_CONF"
    write_uwsgi_ini "$NOVA_ETC/placement-uwsgi.ini" "$PLACEMENT_PORT" \
        placement.wsgi.api:application "env = OS_PLACEMENT_CONFIG_DIR=$NOVA_ETC"

    iniset "$conf" DEFAULT debug "$DEBUG"
    iniset "$conf" DEFAULT transport_url "$TRANSPORT_URL"
    iniset "$conf" DEFAULT my_ip "$HOST"
    iniset "$conf" DEFAULT state_path "$DATA/nova"
    iniset "$conf" DEFAULT compute_driver "$NOVA_DRIVER_SHIM.FaultDriver"
    iniset "$conf" DEFAULT sync_power_state_interval "$NOVA_SYNC_POWER_STATE_INTERVAL"
    iniset "$conf" DEFAULT graceful_shutdown_timeout 5
    # A compute that stops reporting shows as down (host_status UNKNOWN)
    # after 10 s rather than 60 s, so host tests run within their time.
    iniset "$conf" DEFAULT report_interval 2
    iniset "$conf" DEFAULT service_down_time 10
    iniset "$conf" DEFAULT instance_name_template "instance-%08x"
    iniset "$conf" api auth_strategy keystone
    iniset "$conf" api_database connection "$(nova_db_url nova_api)"
    iniset "$conf" database connection "$(nova_db_url nova)"
    iniset "$conf" conductor workers 1
    iniset "$conf" scheduler workers 1
    iniset "$conf" scheduler discover_hosts_in_cells_interval -1
    iniset "$conf" quota driver nova.quota.NoopQuotaDriver
    iniset "$conf" notifications notification_format versioned
    iniset "$conf" notifications notify_on_state_change vm_and_task_state
    iniset "$conf" oslo_messaging_notifications driver messagingv2
    iniset "$conf" oslo_concurrency lock_path "$DATA/nova/lock"
    iniset "$conf" wsgi api_paste_config "$NOVA_ETC/api-paste.ini"
    nova_service_auth "$conf" keystone_authtoken nova
    iniset "$conf" keystone_authtoken www_authenticate_uri "$LC_KEYSTONE_URL"
    iniset "$conf" keystone_authtoken service_token_roles_required true
    for section in placement neutron glance; do
        nova_service_auth "$conf" "$section" nova
        iniset "$conf" "$section" region_name "$REGION"
    done
    iniset "$conf" neutron valid_interfaces public
    iniset "$conf" glance valid_interfaces public
    chmod 600 "$conf"
    cp "$VENV/etc/nova/api-paste.ini" "$NOVA_ETC/api-paste.ini"
    write_uwsgi_ini "$NOVA_ETC/nova-api-uwsgi.ini" "$NOVA_API_PORT" \
        nova.wsgi.osapi_compute:application "env = OS_NOVA_CONFIG_DIR=$NOVA_ETC"

    # One directory per compute: its host name and state (guests and the
    # node identity Nova keeps in compute_id) apart from the other's; and
    # where the tests find each compute's fault control API.
    local where=()
    for i in "${!NOVA_COMPUTE_HOSTS[@]}"; do
        host=${NOVA_COMPUTE_HOSTS[i]}
        mkdir -p "$NOVA_ETC/$host" "$DATA/nova/$host"
        iniset "$NOVA_ETC/$host/nova-compute.conf" DEFAULT host "$host"
        iniset "$NOVA_ETC/$host/nova-compute.conf" DEFAULT state_path "$DATA/nova/$host"
        where+=("\"$host\": \"http://$HOST:${FAULT_DRIVER_PORTS[i]}\"")
    done
    (IFS=,; echo "{${where[*]}}") >"$STATE/fault-driver.json"

    # compute_driver names a module of nova.virt: a shim there loads the
    # fault driver from this checkout.
    local shim
    shim=$(cd "$VENV" && echo lib/python3*/site-packages/nova/virt)/$NOVA_DRIVER_SHIM.py
    printf '"""Loads heat-health'"'"'s fault driver for the local deployment."""\nfrom tests.fault_driver.driver import FaultDriver  # noqa: F401\n' \
        >"$VENV/$shim"
}

# Runs after Keystone's accounts exist: schemas and cells, made once.
init_nova() {
    local version want
    version=$(cd "$VENV" && echo lib/python3*/site-packages/nova-*.dist-info lib/python3*/site-packages/openstack_placement-*.dist-info)
    want="$version $(nova_db_url nova)"
    stamp_ok nova-db "$want" && return 0
    say "nova: placement and nova schemas, cells"
    "$BIN/placement-manage" --config-file "$PLACEMENT_CONF" db sync ||
        fail "placement-manage db sync failed"
    local manage=("$BIN/nova-manage" --config-file "$NOVA_CONF")
    "${manage[@]}" api_db sync || fail "nova-manage api_db sync failed"
    "${manage[@]}" cell_v2 map_cell0 --database_connection "$(nova_db_url nova_cell0)" ||
        fail "nova-manage cell_v2 map_cell0 failed"
    "${manage[@]}" cell_v2 list_cells | grep -q ' cell1 ' ||
        "${manage[@]}" cell_v2 create_cell --name cell1 ||
        fail "nova-manage cell_v2 create_cell failed"
    "${manage[@]}" db sync || fail "nova-manage db sync failed"
    stamp_set nova-db "$want"
}

# Starting and checking
# ---------------------

start_placement_api() {
    run_process placement-api "$BIN/uwsgi --ini $NOVA_ETC/placement-uwsgi.ini"
}

start_nova_api() {
    run_process nova-api "$BIN/uwsgi --ini $NOVA_ETC/nova-api-uwsgi.ini"
}

start_nova_conductor() {
    run_process nova-conductor "$BIN/nova-conductor --config-file $NOVA_CONF"
}

start_nova_scheduler() {
    run_process nova-scheduler "$BIN/nova-scheduler --config-file $NOVA_CONF"
}

# start_nova_compute <n>: compute n (1-based) of NOVA_COMPUTE_HOSTS
start_nova_compute() {
    local n=$1 host=${NOVA_COMPUTE_HOSTS[$1 - 1]}
    run_process "nova-compute-$n" \
        "$BIN/nova-compute --config-file $NOVA_CONF --config-file $NOVA_ETC/$host/nova-compute.conf" \
        "" "" "PYTHONPATH=$ROOT FAULT_DRIVER_PORT=${FAULT_DRIVER_PORTS[$n - 1]}"
}

start_nova() {
    start_service placement-api start_placement_api
    start_service nova-api start_nova_api
    start_service nova-conductor start_nova_conductor
    start_service nova-scheduler start_nova_scheduler
    start_service nova-compute-1 start_nova_compute 1
    start_service nova-compute-2 start_nova_compute 2
}

# wait_for_nova: every service up, both computes mapped to cell1, flavors
wait_for_nova() {
    local service
    for service in "${NOVA_SERVICES[@]}"; do
        wait_for "$service"
    done
    "$BIN/nova-manage" --config-file "$NOVA_CONF" cell_v2 discover_hosts >>"$SETUP_LOG" 2>&1 ||
        fail "nova-manage cell_v2 discover_hosts failed" "$SETUP_LOG"
    helper nova_setup.py >>"$SETUP_LOG" 2>&1 ||
        fail "creating Nova's flavors failed" "$SETUP_LOG"
}

# nova_inputs_hash <service>: what the service reads when it starts
nova_inputs_hash() {
    local files=("$NOVA_CONF")
    case $1 in
        placement-api) files=("$PLACEMENT_CONF" "$NOVA_ETC/placement-uwsgi.ini") ;;
        nova-api) files+=("$NOVA_ETC/nova-api-uwsgi.ini") ;;
        nova-compute-*) files+=("$ROOT"/tests/fault_driver/*.py) ;;
    esac
    cat "${files[@]}" 2>/dev/null | sha256sum | cut -d' ' -f1
}

# nova_check <service>: one line, status 0 if the service is up
nova_check() {
    _service_pid "$1" >/dev/null || { echo "not running"; return 1; }
    case $1 in
        placement-api) probe http "http://$HOST:$PLACEMENT_PORT/" ;;
        nova-api) probe http "http://$HOST:$NOVA_API_PORT/" ;;
        nova-compute-*) probe nova-service nova-compute "${NOVA_COMPUTE_HOSTS[${1#nova-compute-} - 1]}" ;;
        nova-conductor|nova-scheduler) probe nova-service "$1" ;;
    esac
}
