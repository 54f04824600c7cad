#!/usr/bin/env bash
# Formats every tracked .cc/.h file with clang-format and the repo's .clang-format.
#
#   scripts/format.sh           # reformat in place
#   scripts/format.sh --check   # change nothing; list the files that differ and exit 1 if any
#
# scripts/test.sh runs --check first, so a formatting difference fails the run. CLANG_FORMAT
# picks the binary (default clang-format; the style is checked with Debian's clang-format 14).
set -euo pipefail
cd "$(dirname "$0")/.."

CLANG_FORMAT="${CLANG_FORMAT:-clang-format}"
check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  *)
    echo "usage: scripts/format.sh [--check]" >&2
    exit 2
    ;;
esac
if ! command -v "$CLANG_FORMAT" >/dev/null 2>&1; then
  echo "scripts/format.sh: $CLANG_FORMAT not found (apt-get install clang-format)" >&2
  exit 1
fi

mapfile -d '' files < <(git ls-files -z -- '*.cc' '*.h')
if [ "$check" -eq 0 ]; then
  printf '%s\0' "${files[@]}" | xargs -0 -r "$CLANG_FORMAT" -i --style=file
  exit 0
fi

differ=()
for f in "${files[@]}"; do
  [ -f "$f" ] || continue  # deleted in the work tree, not yet in the index
  if ! "$CLANG_FORMAT" --style=file "$f" | cmp -s - "$f"; then differ+=("$f"); fi
done
if [ ${#differ[@]} -gt 0 ]; then
  echo "scripts/format.sh --check: ${#differ[@]} file(s) differ from .clang-format" \
    "(run scripts/format.sh to fix):" >&2
  printf '  %s\n' "${differ[@]}" >&2
  exit 1
fi
echo "scripts/format.sh --check: ${#files[@]} files formatted"
