# Sourced by the bench scripts that start a private dockerd: installs
# Debian packages (docker.io among them) without letting their services
# start (a policy-rc.d for the install), and keeps docker's units
# disabled: the scripts start their own dockerd in a temporary directory.
#
#   install_without_services SCRIPT_NAME PACKAGE...

install_without_services() {
    local script=$1
    shift
    echo "$script: installing $*"
    export DEBIAN_FRONTEND=noninteractive
    local policy=/usr/sbin/policy-rc.d made_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod +x "$policy"
        made_policy=1
    fi
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null
    ((made_policy)) && rm -f "$policy"
    if command -v systemctl >/dev/null 2>&1; then
        systemctl disable docker.service docker.socket >/dev/null 2>&1 || true
    fi
}
