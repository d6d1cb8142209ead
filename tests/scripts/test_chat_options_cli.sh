#!/usr/bin/env bash
# `generate --chat-thinking` (Qwen3's enable_thinking) and `--chat-date` (Llama-3.1+'s date_string): prompt ids equal
# transformers' apply_chat_template with the same kwargs (tests/scripts/chat_options_compare.py). Needs SmolLM2's
# tokenizer (launch/setup.sh) and transformers; skips (77) without them.
# labels: hf
# timeout: 300
set -u
BUILD=$1; SRC=$2; SHARED=$3
VENV=$(cat "$BUILD/.venv-path" 2>/dev/null || true)
PY=python3
if [ -n "$VENV" ] && [ -x "$VENV/bin/python" ]; then PY=$VENV/bin/python; fi
if ! $PY -c "import transformers" 2>/dev/null; then
  echo "SKIP: transformers is not installed for $PY"; exit 77
fi
SMOL=${LOOKAHEAD_DEPS:-$HOME/.cache/lookahead}/models/SmolLM2-135M-Instruct
if [ ! -f "$SMOL/tokenizer.json" ]; then echo "SKIP: $SMOL not converted (launch/setup.sh)"; exit 77; fi
exec $PY "$SRC/tests/scripts/chat_options_compare.py" "$BUILD/lookahead" "$SMOL"
