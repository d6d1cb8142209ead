#!/usr/bin/env bash
# The chat-template fixtures the C++ unit test renders against (tests/core/data/chat_templates.json) are what
# transformers' Jinja renderer produces today. Skips (77) without transformers.
# labels: hf
# timeout: 120
set -u
BUILD=$1; SRC=$2; SHARED=$3
VENV=$(cat "$BUILD/.venv-path" 2>/dev/null || true)
PY=python3
if [ -n "$VENV" ] && [ -x "$VENV/bin/python" ]; then PY=$VENV/bin/python; fi
if ! $PY -c "import transformers" 2>/dev/null; then
  echo "SKIP: transformers is not installed for $PY"; exit 77
fi
exec $PY "$SRC/tests/scripts/chat_template_fixtures.py" --check "$SRC/tests/core/data/chat_templates.json"
