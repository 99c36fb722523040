#!/bin/sh
# Copy into DEST the files of the installed PACKAGEs and of every package they depend on,
# except the --without ones, the documentation and glibc's gconv modules (as slim-runtime.py), so
# a later stage can copy DEST onto an image that has no package manager (Dockerfile.agent's git
# stage).
#
#   package-root.sh DEST [--without P1,P2,...] PACKAGE...
set -eu
dest=${1:?usage: package-root.sh DEST [--without P1,P2,...] PACKAGE...}
shift
without=,
if [ "${1:-}" = --without ]; then
  without=",$2,"
  shift 2
fi
mkdir -p "$dest"
apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances "$@" | grep -v '^ ' | grep -v '^<' | sort -u |
  while read -r package; do
    case "$without" in *",$package,"*) continue ;; esac
    dpkg-query -W -f='${Status}\n' "$package" 2>/dev/null | grep -q ' installed$' || continue
    dpkg -L "$package"
  done |
  grep -v -e '^/usr/share/doc' -e '^/usr/share/man' -e '^/usr/share/info' \
    -e '^/usr/share/lintian' -e '^/usr/share/locale' -e '^/usr/share/bash-completion' \
    -e '/gconv/' |
  while read -r path; do
    if [ -f "$path" ] || [ -L "$path" ]; then
      cp -a --parents "$path" "$dest"
    fi
  done
# what dash's maintainer script links
for dir in bin usr/bin; do
  if [ -e "$dest/$dir/dash" ]; then ln -sf dash "$dest/$dir/sh"; fi
done
