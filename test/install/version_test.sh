#!/usr/bin/env bash
# hora::version() (libhora) and HORA_VERSION_STRING (<hora/version.h>) equal the version
# `horarun --version` prints. Usage: version_test.sh HORARUN VERSION_PRINT
set -euo pipefail
launcher=$(timeout 30 "$1" --version | awk 'NR==1{print $2}')
read -r lib header < <(timeout 30 "$2")
echo "horarun --version: $launcher; hora::version(): $lib; HORA_VERSION_STRING: $header"
[ -n "$launcher" ] && [ "$lib" = "$launcher" ] && [ "$header" = "$launcher" ] ||
  { echo "version_test: the versions differ" >&2; exit 1; }
