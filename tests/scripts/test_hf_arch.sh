#!/usr/bin/env bash
# Qwen3, Phi-3, Gemma-2, Gemma-3, Mistral-Nemo and Mistral's sliding window against Hugging Face transformers:
# small random models made by transformers at test time; logits at every position and in tree steps (test_model's
# HfTree) within 1e-4, greedy ids of every strategy equal to transformers' generate(). Skips (77) without
# transformers.
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
exec $PY "$SRC/tests/scripts/hf_arch_compare.py" "$BUILD/lookahead" "$SHARED/models/stories260K" "$BUILD/tests/test_model"
