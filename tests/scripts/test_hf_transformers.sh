#!/usr/bin/env bash
# Logits and greedy ids against Hugging Face transformers (an implementation no one here wrote), on small random
# models of several configs saved with save_pretrained. Skips (77) if transformers cannot be installed.
# labels: hf
# timeout: 900
set -u
BUILD=$1; SRC=$2; SHARED=$3
VENV=$(cat "$BUILD/.venv-path" 2>/dev/null || true)
PY=python3
if [ -n "$VENV" ] && [ -x "$VENV/bin/python" ]; then PY=$VENV/bin/python; fi
if ! $PY -c "import transformers, torch" 2>/dev/null; then
  echo "SKIP: transformers is not installed for $PY (launch/setup.sh --test-deps installs it)"; exit 77
fi
exec $PY "$SRC/tests/scripts/hf_compare.py" "$BUILD/lookahead" "$SHARED/models/stories260K"
