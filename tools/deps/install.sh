#!/usr/bin/env bash
# Installs the Debian packages listed in packages.txt that are missing. Idempotent: when
# everything is present it only asks dpkg, which takes well under a second.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mapfile -t wanted < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$here/packages.txt")
# A name without `:arch` means the machine's own architecture (or an `all` package): with
# multiarch, dpkg-query lists an instance per architecture installed.
native="$(dpkg --print-architecture)"
missing=()
for pkg in "${wanted[@]}"; do
    arch="$native"
    [[ "$pkg" == *:* ]] && arch="${pkg##*:}"
    dpkg-query -W -f='${Status} ${Architecture}\n' "$pkg" 2>/dev/null |
        grep -Eqx "install ok installed ($arch|all)" || missing+=("$pkg")
done
if [[ ${#missing[@]} -eq 0 ]]; then
    exit 0
fi
echo "deps: installing ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        SUDO=sudo
    else
        echo "deps: these Debian packages are missing: ${missing[*]}" >&2
        echo "deps: run 'sudo make deps' (or install them with apt-get) and retry" >&2
        exit 1
    fi
else
    SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
# Packages of another architecture (`name:arm64`, for make arm64) need it in dpkg's list
# before apt-get update fetches that architecture's package lists.
for arch in $(printf '%s\n' "${missing[@]}" | sed -n 's/^[^:]*:\([a-z0-9]*\)$/\1/p' | sort -u); do
    if [[ "$arch" != "$native" ]] && ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
        echo "deps: adding the $arch architecture to dpkg (multiarch)"
        $SUDO dpkg --add-architecture "$arch"
    fi
done
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
