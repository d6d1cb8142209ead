#!/usr/bin/env bash
# SmolLM2-135M-Instruct (a real model with a tokenizer.json and a chat template) against Hugging Face transformers:
# greedy ids and logits, every strategy lossless, --chat prompt ids (tests/scripts/smollm2_compare.py).
# Skips (77) when the model is not installed (launch/setup.sh --no-model) or transformers is missing.
# labels: hf;smollm2
# timeout: 600
set -u
BUILD=$1; SRC=$2; SHARED=$3
VENV=$(cat "$BUILD/.venv-path" 2>/dev/null || true)
PY=python3
if [ -n "$VENV" ] && [ -x "$VENV/bin/python" ]; then PY=$VENV/bin/python; fi
MODEL=${LOOKAHEAD_DEPS:-$HOME/.cache/lookahead}/models/SmolLM2-135M-Instruct
if [ ! -f "$MODEL/model.safetensors" ]; then
  echo "SKIP: $MODEL is not installed (launch/setup.sh converts it)"; exit 77
fi
if ! $PY -c "import transformers, torch" 2>/dev/null; then
  echo "SKIP: transformers is not installed for $PY (launch/setup.sh installs it)"; exit 77
fi
exec $PY "$SRC/tests/scripts/smollm2_compare.py" "$BUILD/lookahead" "$MODEL"
