#!/usr/bin/env bash
# `lookahead tokenize` ids equal Hugging Face `tokenizers` ids for every text of every shared dataset and for edge
# cases, on byte-level BPE tokenizer.json files built at test time (GPT-2, Llama-3 and Qwen2 layouts) and on the
# SmolLM2 tokenizer when it is installed; decode(encode(x)) == x. Skips (77) without the `tokenizers` package.
# labels: tokenizer;hf
# timeout: 600
set -u
BUILD=$1; SRC=$2; SHARED=$3
VENV=$(cat "$BUILD/.venv-path" 2>/dev/null || true)
PY=python3
if [ -n "$VENV" ] && [ -x "$VENV/bin/python" ]; then PY=$VENV/bin/python; fi
if ! $PY -c "import tokenizers" 2>/dev/null; then
  echo "SKIP: the tokenizers package is not installed for $PY (launch/setup.sh --test-deps installs it)"; exit 77
fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
$PY "$SRC/tests/scripts/tokenizer_hf.py" "$BUILD/lookahead" "$SHARED" \
  "${LOOKAHEAD_DEPS:-$HOME/.cache/lookahead}/models/SmolLM2-135M-Instruct" "$T"
