# The database account of oslo.db's opportunistic tests, for tools/localcloud.
#
# The migration tests (tests/unit/test_migrations.py) run the alembic history
# on every database they can reach as oslo.db's conventional account: user
# openstack_citest, password openstack_citest, on localhost.  This makes that
# account on the machine's MariaDB and PostgreSQL, whichever answers, and
# leaves it there: it is the machine's, shared with any OpenStack project's
# tests, so down --purge keeps it.  A server that does not answer is only
# reported; the tests then skip on it and say why.
#
# Sourced by tools/localcloud after its settings; defines functions only,
# plus the settings below.

CITEST_NAME=openstack_citest
POSTGRES_PORT=5432

# citest_setup_databases: idempotent, cheap enough to run at every up.
citest_setup_databases() {
    citest_mysql
    citest_postgres
}

# MariaDB: the user at both names of loopback (the server may skip name
# resolution), its database, and the databases oslo.db makes for each test.
# Those are named by ten random lowercase letters: the grant is on that
# pattern ("_" matches one character), so an account whose password every
# OpenStack developer knows cannot read Heat's or Keystone's databases.
citest_mysql() {
    local host
    if ! command -v mysql >/dev/null || ! mysql_root -e 'SELECT 1' >/dev/null 2>&1; then
        say "MariaDB does not answer on $HOST:$MYSQL_PORT: its migration tests will skip"
        return 0
    fi
    mysql_root -e "CREATE DATABASE IF NOT EXISTS \`$CITEST_NAME\` CHARACTER SET utf8mb4" ||
        fail "creating the MariaDB database $CITEST_NAME failed"
    for host in 127.0.0.1 localhost; do
        mysql_root -e "CREATE USER IF NOT EXISTS '$CITEST_NAME'@'$host' IDENTIFIED BY '$CITEST_NAME';
                       ALTER USER '$CITEST_NAME'@'$host' IDENTIFIED BY '$CITEST_NAME';
                       GRANT ALL PRIVILEGES ON \`$CITEST_NAME\`.* TO '$CITEST_NAME'@'$host';
                       GRANT ALL PRIVILEGES ON \`__________\`.* TO '$CITEST_NAME'@'$host';" ||
            fail "creating the MariaDB user $CITEST_NAME failed"
    done
}

# postgres_admin <psql arguments>: psql as the server's superuser, over TCP
# (POSTGRES_ADMIN_USER, default postgres; PGPASSWORD if the server asks), or
# as the postgres system user on the local socket when root can be it.
postgres_admin() {
    local psql=(psql -X -q -At -v ON_ERROR_STOP=1 -d postgres)
    if PGCONNECT_TIMEOUT=3 "${psql[@]}" -h "$HOST" -p "$POSTGRES_PORT" \
            -U "${POSTGRES_ADMIN_USER:-postgres}" -c 'SELECT 1' >/dev/null 2>&1; then
        PGCONNECT_TIMEOUT=3 "${psql[@]}" -h "$HOST" -p "$POSTGRES_PORT" \
            -U "${POSTGRES_ADMIN_USER:-postgres}" "$@"
    elif [[ $(id -u) == 0 ]] && id postgres >/dev/null 2>&1 &&
            runuser -u postgres -- "${psql[@]}" -p "$POSTGRES_PORT" -c 'SELECT 1' >/dev/null 2>&1; then
        runuser -u postgres -- "${psql[@]}" -p "$POSTGRES_PORT" "$@"
    else
        return 1
    fi
}

# PostgreSQL: a role that may log in and create (thus own and drop) the
# databases oslo.db makes for each test, and its own database.
citest_postgres() {
    if ! command -v psql >/dev/null || ! postgres_admin -c 'SELECT 1' >/dev/null 2>&1; then
        say "PostgreSQL does not answer on $HOST:$POSTGRES_PORT: its migration tests will skip"
        return 0
    fi
    if [[ -z $(postgres_admin -c "SELECT 1 FROM pg_roles WHERE rolname = '$CITEST_NAME'") ]]; then
        postgres_admin -c "CREATE ROLE $CITEST_NAME" ||
            fail "creating the PostgreSQL role $CITEST_NAME failed"
    fi
    postgres_admin -c "ALTER ROLE $CITEST_NAME WITH LOGIN CREATEDB PASSWORD '$CITEST_NAME'" ||
        fail "configuring the PostgreSQL role $CITEST_NAME failed"
    if [[ -z $(postgres_admin -c "SELECT 1 FROM pg_database WHERE datname = '$CITEST_NAME'") ]]; then
        postgres_admin -c "CREATE DATABASE $CITEST_NAME OWNER $CITEST_NAME" ||
            fail "creating the PostgreSQL database $CITEST_NAME failed"
    fi
}
