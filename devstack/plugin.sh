#!/bin/bash
#
# devstack/plugin.sh - devstack plugin for heat-health
#
# Stages:
#   stack install      install_heat_health
#   stack post-config  configure_heat_health
#   stack extra        init_heat_health, start_heat_health
#   unstack            stop_heat_health
#   clean              cleanup_heat_health
#
# All work is in the functions, which tools/localcloud also calls (through a
# small stand-in for devstack's functions).  Each is safe to run again.

_XTRACE_HEAT_HEALTH=$(set +o | grep xtrace)
set +o xtrace

# Heat's own devstack library normally sets these; fall back to its defaults.
HEAT_CONF_DIR=${HEAT_CONF_DIR:-/etc/heat}
HEAT_CONF=${HEAT_CONF:-$HEAT_CONF_DIR/heat.conf}
HEAT_API_PASTE_FILE=${HEAT_API_PASTE_FILE:-$HEAT_CONF_DIR/api-paste.ini}
HEAT_HEALTH_BIN_DIR=${HEAT_HEALTH_BIN_DIR:-$(get_python_exec_prefix)}

HEAT_HEALTH_ETC_DIR=$HEAT_HEALTH_DIR/etc/heat-health
HEAT_HEALTH_SHIM=heat_health_shim.py
HEAT_HEALTH_PASTE_SNIPPET=$HEAT_HEALTH_ETC_DIR/api-paste-filter.ini
# Name of the filter in Heat's pipelines, as defined by the snippet.
HEAT_HEALTH_PASTE_FILTER=heat_health
# Paste section holding Heat's API pipelines, one key per flavor.
HEAT_HEALTH_PASTE_COMPOSITE=composite:api
# Filters of those pipelines that authenticate the request.  The filter goes
# after the last of these, "context" and "faultwrap": it must see only
# authenticated requests, and faultwrap must render its errors.
HEAT_HEALTH_PASTE_AUTH_FILTERS="authtoken authpassword custombackendauth noauth"


# Helpers
# -------

# _heat_health_trim <text>: without surrounding blanks
function _heat_health_trim {
    local text=$1
    text=${text#"${text%%[![:space:]]*}"}
    echo "${text%"${text##*[![:space:]]}"}"
}

# _heat_health_pipeline_flavors: the flavors of Heat's API pipelines (the
# keys of their composite but paste's own, such as paste.composite_factory)
function _heat_health_pipeline_flavors {
    local key
    for key in $(_heat_health_ini_keys "$HEAT_API_PASTE_FILE" "$HEAT_HEALTH_PASTE_COMPOSITE"); do
        [[ $key == *.* || $key == use ]] || echo "$key"
    done
}

# _heat_health_ini_keys <file> <section>: the option names of a section
function _heat_health_ini_keys {
    INI_S=$2 awk '
        /^[ \t]*\[.*\][ \t]*$/ {
            cur = $0; gsub(/^[ \t]*\[|\][ \t]*$/, "", cur); next
        }
        cur == ENVIRON["INI_S"] && $0 ~ /^[ \t]*[^#; \t][^=]*=/ {
            k = $0; sub(/=.*/, "", k); gsub(/^[ \t]+|[ \t]+$/, "", k); print k
        }' "$1"
}

# _heat_health_ini_drop_section <file> <section>
function _heat_health_ini_drop_section {
    local file=$1 tmp
    tmp=$(mktemp "$file.XXXXXX")
    INI_S=$2 awk '
        /^[ \t]*\[.*\][ \t]*$/ {
            cur = $0; gsub(/^[ \t]*\[|\][ \t]*$/, "", cur)
        }
        /^[ \t]*$/ { blank = blank $0 "\n"; next }
        cur != ENVIRON["INI_S"] { printf "%s", blank; print }
        { blank = "" }' "$file" >"$tmp"
    cat "$tmp" >"$file"
    rm -f "$tmp"
}

# _heat_health_snippet_sections: the sections the paste snippet defines
function _heat_health_snippet_sections {
    sed -n 's/^[[:space:]]*\[\(.*\)\][[:space:]]*$/\1/p' "$HEAT_HEALTH_PASTE_SNIPPET"
}

# _heat_health_paste_place <pipeline>: the pipeline with the filter right
# after the last of faultwrap, context and the authentication filter; fails,
# printing the pipeline without the filter, when one of them is missing
function _heat_health_paste_place {
    local word after=0 auth="" context="" faultwrap="" words=() placed
    for word in $1; do
        [[ $word == "$HEAT_HEALTH_PASTE_FILTER" ]] && continue
        words+=("$word")
        case " $HEAT_HEALTH_PASTE_AUTH_FILTERS " in
            *" $word "*) auth=1; after=${#words[@]} ;;
        esac
        case $word in
            context) context=1; after=${#words[@]} ;;
            faultwrap) faultwrap=1; after=${#words[@]} ;;
        esac
    done
    if [[ -z $auth || -z $context || -z $faultwrap ]]; then
        echo "${words[*]}"
        return 1
    fi
    placed=("${words[@]:0:after}" "$HEAT_HEALTH_PASTE_FILTER" "${words[@]:after}")
    echo "${placed[*]}"
}

# _heat_health_paste_insert: define the filter and place it in every pipeline
# of Heat's API that authenticates, sets a context and wraps faults (moved
# there if an earlier version placed it elsewhere)
function _heat_health_paste_insert {
    local section="" line key value flavor pipeline new
    while IFS= read -r line || [[ -n $line ]]; do
        [[ $line =~ ^[[:space:]]*([#\;]|$) ]] && continue
        if [[ $line =~ ^[[:space:]]*\[(.*)\][[:space:]]*$ ]]; then
            section=${BASH_REMATCH[1]}
            continue
        fi
        key=$(_heat_health_trim "${line%%=*}")
        value=$(_heat_health_trim "${line#*=}")
        iniset "$HEAT_API_PASTE_FILE" "$section" "$key" "$value"
    done <"$HEAT_HEALTH_PASTE_SNIPPET"

    for flavor in $(_heat_health_pipeline_flavors); do
        pipeline=$(iniget "$HEAT_API_PASTE_FILE" "$HEAT_HEALTH_PASTE_COMPOSITE" "$flavor")
        if ! new=$(_heat_health_paste_place "$pipeline"); then
            warn $LINENO "heat-health: the $flavor pipeline of $HEAT_API_PASTE_FILE lacks faultwrap, context or an authentication filter: heat_health left out of it"
        fi
        [[ $new == "$pipeline" ]] && continue
        iniset "$HEAT_API_PASTE_FILE" "$HEAT_HEALTH_PASTE_COMPOSITE" "$flavor" "$new"
    done
}

# _heat_health_paste_remove: undo _heat_health_paste_insert
function _heat_health_paste_remove {
    [[ -f $HEAT_API_PASTE_FILE ]] || return 0
    local flavor pipeline word new section
    for flavor in $(_heat_health_pipeline_flavors); do
        pipeline=" $(iniget "$HEAT_API_PASTE_FILE" "$HEAT_HEALTH_PASTE_COMPOSITE" "$flavor") "
        [[ $pipeline == *" $HEAT_HEALTH_PASTE_FILTER "* ]] || continue
        new=""
        for word in $pipeline; do
            [[ $word == "$HEAT_HEALTH_PASTE_FILTER" ]] || new+=" $word"
        done
        iniset "$HEAT_API_PASTE_FILE" "$HEAT_HEALTH_PASTE_COMPOSITE" "$flavor" "${new# }"
    done
    for section in $(_heat_health_snippet_sections); do
        _heat_health_ini_drop_section "$HEAT_API_PASTE_FILE" "$section"
    done
}

# _heat_health_plugin_dirs: heat.conf plugin_dirs, or Heat's default
function _heat_health_plugin_dirs {
    if ini_has_option "$HEAT_CONF" DEFAULT plugin_dirs; then
        iniget "$HEAT_CONF" DEFAULT plugin_dirs
    else
        echo "$HEAT_HEALTH_HEAT_PLUGIN_DIRS"
    fi
}


# Entry points
# ------------

# _heat_health_poll_networks: where poll URLs may reach, by default the
# tenant subnets devstack creates
function _heat_health_poll_networks {
    if [[ -n $HEAT_HEALTH_POLL_URL_ALLOWED_NETWORKS ]]; then
        echo "$HEAT_HEALTH_POLL_URL_ALLOWED_NETWORKS"
        return
    fi
    local v4=${IPV4_ADDRS_SAFE_TO_USE:-${FIXED_RANGE:-}}
    local v6=${IPV6_ADDRS_SAFE_TO_USE:-${FIXED_RANGE_V6:-}}
    local networks=$v4
    if [[ -n $v6 ]]; then
        networks=${networks:+$networks,}$v6
    fi
    echo "$networks"
}

# install_heat_health() - install the package into Heat's python environment
function install_heat_health {
    setup_develop "$HEAT_HEALTH_DIR"
}

# configure_heat_health() - plugin shim, plugin_dirs, paste filter, options
function configure_heat_health {
    sudo install -d -o "$STACK_USER" "$HEAT_HEALTH_PLUGIN_DIR"
    install -m 0644 "$HEAT_HEALTH_ETC_DIR/$HEAT_HEALTH_SHIM" \
        "$HEAT_HEALTH_PLUGIN_DIR/$HEAT_HEALTH_SHIM"

    local dirs
    dirs=$(_heat_health_plugin_dirs)
    if [[ ",${dirs// /}," != *",$HEAT_HEALTH_PLUGIN_DIR,"* ]]; then
        iniset "$HEAT_CONF" DEFAULT plugin_dirs "${dirs:+$dirs,}$HEAT_HEALTH_PLUGIN_DIR"
    fi

    if [[ $HEAT_HEALTH_FILTER == True ]]; then
        _heat_health_paste_insert
    else
        _heat_health_paste_remove
    fi

    iniset "$HEAT_CONF" heat_health topic "$HEAT_HEALTH_TOPIC"
    iniset "$HEAT_CONF" heat_health poll_url_allowed_networks \
        "$(_heat_health_poll_networks)"
    # Several engines split the policies through tooz: devstack's etcd
    # unless another backend is given.
    local coordination=$HEAT_HEALTH_COORDINATION_URL
    if [[ -z $coordination ]] && is_service_enabled etcd3; then
        coordination="etcd3+http://${SERVICE_HOST}:${ETCD_PORT:-2379}"
    fi
    if [[ -n $coordination ]]; then
        iniset "$HEAT_CONF" coordination backend_url "$coordination"
    fi
}

# init_heat_health() - create or upgrade the heat-health tables in Heat's DB
function init_heat_health {
    if is_service_enabled heat-health-engine; then
        "$HEAT_HEALTH_BIN_DIR/heat-health-manage" --config-file "$HEAT_CONF" db_sync ||
            die $LINENO "heat-health-manage db_sync failed"
    fi
}

# start_heat_health() - start heat-health-engine
function start_heat_health {
    run_process heat-health-engine \
        "$HEAT_HEALTH_BIN_DIR/heat-health-engine --config-file=$HEAT_CONF"
}

# stop_heat_health() - stop heat-health-engine
function stop_heat_health {
    stop_process heat-health-engine
}

# cleanup_heat_health() - remove the shim, the plugin dir entry and the
# paste filter
function cleanup_heat_health {
    sudo rm -rf "$HEAT_HEALTH_PLUGIN_DIR/$HEAT_HEALTH_SHIM" \
        "$HEAT_HEALTH_PLUGIN_DIR/__pycache__"
    sudo rmdir "$HEAT_HEALTH_PLUGIN_DIR" 2>/dev/null || true
    if [[ -f $HEAT_CONF ]] && ini_has_option "$HEAT_CONF" DEFAULT plugin_dirs; then
        local dir dirs kept=""
        IFS=, read -ra dirs <<<"$(iniget "$HEAT_CONF" DEFAULT plugin_dirs)"
        for dir in "${dirs[@]}"; do
            dir=$(_heat_health_trim "$dir")
            if [[ -n $dir && $dir != "$HEAT_HEALTH_PLUGIN_DIR" ]]; then
                kept+=",$dir"
            fi
        done
        if [[ -n $kept && ${kept#,} != "$HEAT_HEALTH_HEAT_PLUGIN_DIRS" ]]; then
            iniset "$HEAT_CONF" DEFAULT plugin_dirs "${kept#,}"
        else
            inidelete "$HEAT_CONF" DEFAULT plugin_dirs
        fi
    fi
    _heat_health_paste_remove
}


# Dispatch
# --------

if is_service_enabled heat-health-engine; then
    if [[ "${1:-}" == "stack" && "${2:-}" == "install" ]]; then
        echo_summary "Installing heat-health"
        install_heat_health
    elif [[ "${1:-}" == "stack" && "${2:-}" == "post-config" ]]; then
        echo_summary "Configuring heat-health"
        configure_heat_health
    elif [[ "${1:-}" == "stack" && "${2:-}" == "extra" ]]; then
        echo_summary "Initialising and starting heat-health"
        init_heat_health
        start_heat_health
    fi

    if [[ "${1:-}" == "unstack" ]]; then
        stop_heat_health
    fi

    if [[ "${1:-}" == "clean" ]]; then
        cleanup_heat_health
    fi
fi

# Restore xtrace
$_XTRACE_HEAT_HEALTH
