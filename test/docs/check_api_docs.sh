#!/usr/bin/env bash
# The API reference builds without a Doxygen warning, with a page per
# layer and pages for the main classes.
#   check_api_docs.sh SOURCE_DIR OUT_DIR
set -euo pipefail
"$1/scripts/api_docs.sh" "$2"
for page in index layer_graph layer_kernels layer_transport layer_actors layer_client \
            layer_train classactorflow_1_1session classactorflow_1_1server \
            classactorflow_1_1graph classactorflow_1_1profiler__hook \
            namespaceactorflow_1_1train; do
  if [ ! -s "$2/html/$page.html" ]; then
    echo "check_api_docs: no $page.html in $2/html" >&2
    exit 1
  fi
done
# Each layer's page links its headers' file pages.
grep -q 'session_8hpp.html' "$2/html/layer_client.html" || {
  echo "check_api_docs: layer_client.html does not link session.hpp" >&2
  exit 1
}
echo "check_api_docs: ok"
