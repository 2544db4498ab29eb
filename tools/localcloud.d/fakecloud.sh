# fakecloud for tools/localcloud: the Nova, Glance, Neutron and Cinder API
# simulator of tests/fakecloud, one process on 127.0.0.1 with the compute,
# image, network and volume APIs on one port and per-server health
# endpoints on another.  It validates tokens against the local Keystone as
# the service user "nova" and publishes Nova's notifications on the
# machine's RabbitMQ (exchange nova).  Keystone's catalog points compute,
# image, network and volumev3 at it.
#
# Sourced by tools/localcloud after its settings; defines functions only,
# plus the settings below.

FAKECLOUD_PORT=8774
FAKECLOUD_HEALTH_PORT=8775
FAKECLOUD_CONF=$ETC/fakecloud.conf
# Seconds a server spends in BUILD, REBOOT, deleting and the like.
FAKECLOUD_TASK_DELAY=${LOCALCLOUD_FAKECLOUD_TASK_DELAY:-1.0}
# versioned, unversioned or both (Nova's notification_format).
FAKECLOUD_NOTIFICATION_FORMAT=${LOCALCLOUD_FAKECLOUD_NOTIFICATIONS:-versioned}

# fakecloud_load_env: enable the service, export its URLs (from load_env)
fakecloud_load_env() {
    enable_service fakecloud
    export LC_FAKECLOUD_URL=http://$HOST:$FAKECLOUD_PORT
    export LC_FAKECLOUD_HEALTH_URL=http://$HOST:$FAKECLOUD_HEALTH_PORT
}

configure_fakecloud() {
    local conf=$FAKECLOUD_CONF
    iniset "$conf" DEFAULT debug "$DEBUG"
    iniset "$conf" DEFAULT api_port "$FAKECLOUD_PORT"
    iniset "$conf" DEFAULT health_port "$FAKECLOUD_HEALTH_PORT"
    iniset "$conf" DEFAULT task_delay "$FAKECLOUD_TASK_DELAY"
    iniset "$conf" DEFAULT notification_format "$FAKECLOUD_NOTIFICATION_FORMAT"
    iniset "$conf" DEFAULT transport_url "$TRANSPORT_URL"
    # When real Nova runs (nova.sh), the health endpoints of its servers
    # are answered by the computes' fault drivers: fakecloud asks them.
    iniset "$conf" DEFAULT fault_driver_file "$STATE/fault-driver.json"
    iniset "$conf" oslo_messaging_notifications driver messagingv2
    local section=keystone_authtoken
    iniset "$conf" $section www_authenticate_uri "$LC_KEYSTONE_URL"
    iniset "$conf" $section auth_url "http://$HOST:$KEYSTONE_PORT"
    iniset "$conf" $section auth_type password
    iniset "$conf" $section username nova
    iniset "$conf" $section password "$LC_SERVICE_PASSWORD"
    iniset "$conf" $section user_domain_name Default
    iniset "$conf" $section project_domain_name Default
    iniset "$conf" $section project_name service
    iniset "$conf" $section service_token_roles_required true
    chmod 600 "$conf"
}

# The package is imported from the checkout, whatever the caller's directory.
start_fakecloud() {
    run_process fakecloud \
        "$BIN/python -m tests.fakecloud --config-file $FAKECLOUD_CONF" \
        "" "" "PYTHONPATH=$ROOT"
}

# fakecloud_inputs_hash: of what fakecloud reads when it starts
fakecloud_inputs_hash() {
    cat "$FAKECLOUD_CONF" "$ROOT"/tests/fakecloud/*.py 2>/dev/null |
        sha256sum | cut -d' ' -f1
}
