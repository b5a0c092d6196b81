#!/usr/bin/env bash
# debian_sources.sh DIR: Debian 12's source packages of the libraries that Debian does not
# build for mingw-w64 (PCRE2 for the o200k pre-tokenizer, libsamplerate for DMel's
# resampling), unpacked with Debian's patches into DIR/<package>/. The build of
# `make windows` compiles them from there (tools/windows/deps/CMakeLists.txt).
#
# apt-get fetches them from the archive the machine's apt already uses, through a private
# deb-src list and state folder under DIR: the system's apt setup is not touched, and apt
# checks every file against the archive's signed Sources index. Idempotent: a package
# already unpacked is kept.
set -euo pipefail
dir="$(mkdir -p "$1" && cd "$1" && pwd)"
packages=(pcre2 libsamplerate)
missing=()
for p in "${packages[@]}"; do
    [[ -f "$dir/$p/.unpacked" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

apt_dir="$dir/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial"
# The same archive and suite as the machine's own deb lines, as deb-src.
uri="$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)"
suite="$(. /etc/os-release && echo "$VERSION_CODENAME")"
cat >"$apt_dir/sources.sources" <<SRC
Types: deb-src
URIs: ${uri:-http://deb.debian.org/debian}
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.sources" -o "Dir::Etc::SourceParts=$apt_dir/none"
          -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache::Archives=$apt_dir/archives"
          -o "APT::Sandbox::User=root" -qq)
echo "windows: fetching Debian source packages: ${missing[*]}"
apt-get "${apt_opts[@]}" update
for p in "${missing[@]}"; do
    rm -rf "${dir:?}/$p" "$dir/$p-src"
    mkdir -p "$dir/$p-src"
    # dpkg-source (dpkg-dev) unpacks the upstream tarball and applies Debian's patches.
    (cd "$dir/$p-src" && apt-get "${apt_opts[@]}" source "$p" >/dev/null)
    tree="$(find "$dir/$p-src" -mindepth 1 -maxdepth 1 -type d | head -1)"
    [[ -n "$tree" ]] || { echo "windows: apt-get source $p unpacked nothing" >&2; exit 1; }
    mv "$tree" "$dir/$p"
    rm -rf "$dir/$p-src"
    touch "$dir/$p/.unpacked"
done
