#!/usr/bin/env bash
# Generates the API reference from the public headers with Doxygen
# (docs/api/Doxyfile; a page per layer from docs/api/*.md):
#   scripts/api_docs.sh [OUT_DIR]     (default build/api; open
#                                      OUT_DIR/html/index.html)
# Installs Debian's doxygen if it is missing. Doxygen's warnings (broken
# references, bad commands) go to OUT_DIR/warnings.log; any makes the
# script fail.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/api}
command -v doxygen > /dev/null || scripts/install_packages.sh doxygen
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out/html"
{
  cat docs/api/Doxyfile
  echo "OUTPUT_DIRECTORY = $out"
  echo "WARN_LOGFILE = $out/warnings.log"
} | doxygen -
if [ -s "$out/warnings.log" ]; then
  cat "$out/warnings.log" >&2
  echo "api_docs: $(wc -l < "$out/warnings.log") doxygen warnings" >&2
  exit 1
fi
echo "api_docs: $out/html/index.html"
