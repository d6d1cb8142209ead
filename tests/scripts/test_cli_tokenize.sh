#!/usr/bin/env bash
# `lookahead tokenize` through the real binary: the ids equal generate's prompt_ids (one code path), --decode
# reverses them, a model directory with only a tokenizer.json is used by generate; bad input (flags, JSONL,
# corrupt tokenizer.json for tokenize and for generate) gives one error line and a non-zero exit. Regression: a
# JSONL record whose "id" nests 300,000 arrays deep ended `tokenize --input` in SIGSEGV (exit 139); every reader of
# such a file (tokenize, tokenize --decode, generate --input, generate --resume's output file) now exits 1 with
# one `lookahead: error:` line.
# labels: cli;tokenizer
# timeout: 300
set -u
BUILD=$1; SRC=$2; SHARED=$3
BIN=$BUILD/lookahead
M=$SHARED/models/stories260K
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0; n=0
source "$SRC/tests/scripts/lib.sh"  # expect_error
check() {  # check "what" command...: the command must succeed
  n=$((n+1))
  if "${@:2}"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails+1)); fi
}

python3 - "$T" "$M" <<'PY'
import json, os, shutil, sys
t, m = sys.argv[1], sys.argv[2]
# A byte-level BPE tokenizer.json written out by hand: ids 0..255 are the bytes (GPT-2 table), one merge.
bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
cs, k = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + k); k += 1
table = {b: chr(c) for b, c in zip(bs, cs)}
vocab = {table[b]: b for b in range(256)}
vocab["Ġt"] = 256
tok = {"version": "1.0", "added_tokens": [{"id": 257, "content": "<|end|>", "special": True, "normalized": False}],
       "normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
       "post_processor": None, "decoder": {"type": "ByteLevel"},
       "model": {"type": "BPE", "vocab": vocab, "merges": ["Ġ t"]}}
def model_dir(name, tokenizer_text, keep_config=False):
    d = os.path.join(t, name); shutil.copytree(m, d); os.remove(os.path.join(d, "tokenizer.model"))
    if not keep_config:  # sentencepiece's config: add_bos_token with a bos_token "<s>" that this file lacks
        os.remove(os.path.join(d, "tokenizer_config.json"))
    open(os.path.join(d, "tokenizer.json"), "w").write(tokenizer_text); return d
text = json.dumps(tok)
model_dir("bpe", text)
# A SentencePiece-style tokenizer.json (Llama-2 pipeline: Prepend + Replace normalizers, byte fallback, Replace +
# ByteFallback + Fuse + Strip decoders, a template BOS), small enough for stories260K's 512 ids.
meta = "\u2581"
spv = {"<unk>": 0, "<s>": 1, "</s>": 2}
for b in range(256):
    spv["<0x%02X>" % b] = 3 + b
for piece in [meta] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["he", meta + "t", meta + "the", meta + "a"]:
    spv[piece] = len(spv)
while len(spv) < 512:  # every id of the model has a token (fillers no merge makes)
    spv["[%d]" % len(spv)] = len(spv)
rep = lambda a, b: {"type": "Replace", "pattern": {"String": a}, "content": b}
sp = {"version": "1.0", "added_tokens": [{"id": i, "content": c, "special": True, "normalized": False}
                                         for i, c in enumerate(["<unk>", "<s>", "</s>"])],
      "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": meta}, rep(" ", meta)]},
      "pre_tokenizer": None,
      "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                                  {"Sequence": {"id": "A", "type_id": 0}}],
                         "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
      "decoder": {"type": "Sequence", "decoders": [rep(meta, " "), {"type": "ByteFallback"}, {"type": "Fuse"},
                                                   {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
      "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": True, "byte_fallback": True, "vocab": spv,
                "merges": [["h", "e"], [meta, "t"], [meta + "t", "he"], [meta, "a"]]}}
model_dir("sp", json.dumps(sp))
open(os.path.join(t, "sp_prompt.jsonl"), "w").write(json.dumps({"id": 0, "prompt": "the cat \u00e9"}) + "\n")
model_dir("badbos", text, keep_config=True)
model_dir("corrupt", "{\"model\": {\"type\": \"BPE\", \"vocab\": {")
model_dir("truncated", text[: len(text) // 2])
model_dir("wordpiece", json.dumps(dict(tok, model={"type": "WordPiece", "vocab": {"a": 0}})))
model_dir("badmerge", json.dumps(dict(tok, model=dict(tok["model"], merges=["Ġ t", "q zz"]))))
model_dir("badregex", json.dumps(dict(tok, pre_tokenizer={"type": "Split", "pattern": {"Regex": "(a"},
                                                          "behavior": "Isolated", "invert": False})))
with open(os.path.join(t, "texts.jsonl"), "w") as f:
    f.write(json.dumps({"id": "a", "text": "Once upon a time"}) + "\n")
    f.write(json.dumps({"prompt": "Lily went to the park."}) + "\n\n")
    f.write(json.dumps({"id": 7, "text": ""}) + "\n")
open(os.path.join(t, "prompts.jsonl"), "w").write(json.dumps({"id": "a", "prompt": "Once upon a time"}) + "\n")
open(os.path.join(t, "bad.jsonl"), "w").write('{"id": 1, "text": "hi"}\n{"id": 2, "text": \n')
open(os.path.join(t, "notext.jsonl"), "w").write('{"id": 1, "words": "hi"}\n')
open(os.path.join(t, "badids.jsonl"), "w").write('{"id": 1, "ids": "1,2"}\n')
open(os.path.join(t, "negids.jsonl"), "w").write('{"id": 1, "ids": [5, -2]}\n')
deep = "[" * 300000 + "]" * 300000
open(os.path.join(t, "deep.jsonl"), "w").write('{"id": %s, "text": "hi"}\n' % deep)
open(os.path.join(t, "deep_ids.jsonl"), "w").write('{"id": %s, "ids": [1]}\n' % deep)
open(os.path.join(t, "deep_prompt.jsonl"), "w").write('{"id": %s, "prompt": "hi"}\n' % deep)
open(os.path.join(t, "deep_out.jsonl"), "w").write('{"id": %s, "ids": [1]}\n' % deep)
PY

# ---- what works ----
"$BIN" tokenize --model "$M" --input "$T/texts.jsonl" >"$T/tok.out" 2>"$T/err"
"$BIN" generate --quiet --model "$M" --input "$T/prompts.jsonl" --output "$T/gen.jsonl" --max-new-tokens 2 2>>"$T/err"
check "tokenize --input: one line per record, ids as generate's prompt_ids, ids default to the record index" \
  python3 - "$T" <<'PY'
import json, sys
t = sys.argv[1]
tok = [json.loads(l) for l in open(f"{t}/tok.out")]
gen = [json.loads(l) for l in open(f"{t}/gen.jsonl")]
assert [r["id"] for r in tok] == ["a", 1, 7], tok
assert tok[0]["ids"] == gen[0]["prompt_ids"] and tok[0]["ids"][0] == 1, (tok[0], gen[0]["prompt_ids"])
assert tok[2]["ids"] == [1], tok[2]  # the empty text is BOS alone
PY
IDS=$(python3 -c "import json; print(','.join(map(str, json.loads(open('$T/tok.out').readline())['ids'])))")
check "tokenize --text equals the --input line" \
  test "$("$BIN" tokenize --model "$M" --text "Once upon a time")" = "{\"id\":0,\"ids\":[$IDS]}"
check "tokenize --decode --ids gives the text back" \
  test "$("$BIN" tokenize --model "$M" --decode --ids "$IDS")" = '{"id":0,"text":"Once upon a time"}'
check "random: models use the byte tokenizer" \
  test "$("$BIN" tokenize --model random:tiny-mha --text hi)" = '{"id":0,"ids":[1,107,108]}'
check "a tokenizer.json directory: merges, special tokens inside text, no BOS" \
  test "$("$BIN" tokenize --tokenizer "$T/bpe" --text "a t<|end|>")" = '{"id":0,"ids":[97,256,257]}'
check "--decode of a tokenizer.json: special tokens as their text" \
  test "$("$BIN" tokenize --tokenizer "$T/bpe" --decode --ids 97,256,257)" = '{"id":0,"text":"a t<|end|>"}'
"$BIN" generate --model "$T/bpe" --prompt "a t" --max-new-tokens 4 >"$T/stream.out" 2>"$T/err"
check "generate streams with a tokenizer.json-only model directory" grep -q "^a t" "$T/stream.out"
# t=269 h=267 e=264 -> he=286, ▁t=287, ▁the=288; ▁a=289; c=262; é by byte fallback (0xC3 0xA9 -> 198 172).
check "a SentencePiece-style tokenizer.json: template BOS, merges, byte fallback" \
  test "$("$BIN" tokenize --tokenizer "$T/sp" --text "the cat é")" = '{"id":0,"ids":[1,288,259,262,260,279,259,198,172]}'
check "--decode of a SentencePiece-style tokenizer.json: the decoder chain (the prepended space stripped)" \
  test "$("$BIN" tokenize --tokenizer "$T/sp" --decode --ids 288,259,262,260,279,259,198,172)" = '{"id":0,"text":"the cat é"}'
# Its decoder is a chain, not bytes per id: the stream decodes windows of ids. The streamed text must equal the
# record's text, and that the decode of prompt + new ids minus the decode of the prompt.
"$BIN" generate --model "$T/sp" --prompt "the cat é" --max-new-tokens 40 >"$T/sp_stream.out" 2>"$T/err"
"$BIN" generate --quiet --model "$T/sp" --input "$T/sp_prompt.jsonl" --output "$T/sp_gen.jsonl" --max-new-tokens 40 2>>"$T/err"
python3 - "$T" >"$T/sp_decode.jsonl" <<'PY'
import json, sys
r = json.loads(open(f"{sys.argv[1]}/sp_gen.jsonl").readline())
print(json.dumps({"id": "all", "ids": r["prompt_ids"] + r["ids"]})); print(json.dumps({"id": "prompt", "ids": r["prompt_ids"]}))
PY
"$BIN" tokenize --tokenizer "$T/sp" --decode --input "$T/sp_decode.jsonl" >"$T/sp_decoded.jsonl" 2>>"$T/err"
check "generate with a SentencePiece-style tokenizer.json: stream == record text == decode(prompt + new) - decode(prompt)" \
  python3 - "$T" <<'PY'
import json, sys
t = sys.argv[1]
r = json.loads(open(f"{t}/sp_gen.jsonl").readline())
d = {x["id"]: x["text"] for x in map(json.loads, open(f"{t}/sp_decoded.jsonl"))}
stream = open(f"{t}/sp_stream.out", encoding="utf-8").read()
assert len(r["ids"]) > 10 and r["text"].strip(), r
assert d["prompt"] == "<s> the cat é", d
assert stream == "the cat é" + r["text"] + "\n", (stream, r["text"])
assert d["all"].startswith(d["prompt"]) and r["text"] == d["all"][len(d["prompt"]):], (d, r["text"])
PY

# ---- bad input: one error line, non-zero exit ----
expect_error "give --model DIR or --tokenizer DIR" tokenize --text hi
expect_error "give one of --text TEXT and --input FILE" tokenize --model "$M"
expect_error "give one of --text TEXT and --input FILE" tokenize --model "$M" --text hi --input "$T/texts.jsonl"
expect_error "--decode takes --ids or --input" tokenize --model "$M" --decode --text hi
expect_error "--ids needs --decode" tokenize --model "$M" --ids 1,2
expect_error "'x' is not an integer" tokenize --model "$M" --decode --ids 1,x
expect_error "--ids values must be >= 0" tokenize --model "$M" --decode --ids 1,-3
expect_error "token id 99999 is outside" tokenize --model "$M" --decode --ids 1,99999
expect_error "--input file '$T/missing.jsonl' does not exist" tokenize --model "$M" --input "$T/missing.jsonl"
expect_error "bad.jsonl:2: invalid JSON" tokenize --model "$M" --input "$T/bad.jsonl"
expect_error "notext.jsonl:1: expected an object with a string \"text\"" tokenize --model "$M" --input "$T/notext.jsonl"
expect_error "badids.jsonl:1: \"ids\" must be an array" tokenize --model "$M" --decode --input "$T/badids.jsonl"
expect_error "negids.jsonl:1: \"ids\" holds -2" tokenize --model "$M" --decode --input "$T/negids.jsonl"
expect_error "has no tokenizer.model or tokenizer.json" tokenize --tokenizer "$T/nope" --text hi
expect_error "tokenizer.json: invalid JSON" tokenize --tokenizer "$T/corrupt" --text hi
expect_error "tokenizer.json: invalid JSON" tokenize --tokenizer "$T/truncated" --text hi
expect_error "unsupported tokenizer model type 'WordPiece'" tokenize --tokenizer "$T/wordpiece" --text hi
expect_error "'zz', which is not in the vocabulary" tokenize --tokenizer "$T/badmerge" --text hi
expect_error "invalid regex '(a'" tokenize --tokenizer "$T/badregex" --text hi
expect_error "unrecognised option '--bogus'" tokenize --model "$M" --text hi --bogus
expect_error "bos_token '<s>' is not a token" tokenize --model "$T/badbos" --text hi
# The deeply nested id: exit code exactly 1 (not 139) and one `lookahead: error:` line, from every reader.
expect_exit1() {  # expect_exit1 "needle" args...
  expect_error "$@"
  local rc; "$BIN" "${@:2}" >/dev/null 2>"$T/err1"; rc=$?
  n=$((n+1))
  if [ $rc -eq 1 ] && grep -q "^lookahead: error: .*$1" "$T/err1"; then echo "ok: exit 1: $(echo "${*:2}" | head -c 140)"
  else echo "FAIL: lookahead ${*:2} -> rc=$rc (wanted 1 and a 'lookahead: error:' line)"; fails=$((fails+1)); fi
}
expect_exit1 "deep.jsonl:1: invalid JSON (nesting deeper than" tokenize --model "$M" --input "$T/deep.jsonl"
expect_exit1 "deep_ids.jsonl:1: invalid JSON (nesting deeper than" tokenize --model "$M" --decode --input "$T/deep_ids.jsonl"
expect_exit1 "deep_prompt.jsonl:1: invalid JSON (nesting deeper than" generate --quiet --model "$M" --input "$T/deep_prompt.jsonl" --output "$T/o.jsonl"
expect_exit1 "line 1 is not valid JSON" generate --quiet --model "$M" --input "$T/prompts.jsonl" --output "$T/deep_out.jsonl" --resume
G=(generate --quiet --max-new-tokens 4 --prompt hi)
expect_error "corrupt/tokenizer.json: invalid JSON" "${G[@]}" --model "$T/corrupt"
expect_error "truncated/tokenizer.json: invalid JSON" "${G[@]}" --model "$T/truncated"
expect_error "unsupported tokenizer model type 'WordPiece'" "${G[@]}" --model "$T/wordpiece"
expect_error "'zz', which is not in the vocabulary" "${G[@]}" --model "$T/badmerge"
expect_error "tokenizer.json: invalid JSON" "${G[@]}" --model "$M" --tokenizer "$T/corrupt"
# ---- vocabulary-only GGUFs (llama.cpp's ggml-vocab-*.gguf: tokenizer.ggml.*, no tensors; launch/setup.sh
# --test-deps copies them; tests/core/test_tokenizer_vocab.cpp checks every test string against HF's ids) ----
V=${LOOKAHEAD_DEPS:-$HOME/.cache/lookahead}/vocab
if [ -f "$V/ggml-vocab-llama-spm.gguf" ] && [ -f "$V/ggml-vocab-qwen35.gguf" ] && [ -f "$V/ggml-vocab-gemma-4.gguf" ] \
   && [ -f "$V/ggml-vocab-bert-bge.gguf" ]; then
  ids_are() {  # ids_are "what" '[ids]' args...: tokenize's one record has these ids
    n=$((n+1))
    local got; got=$("$BIN" "${@:3}" 2>&1)
    if [ "$got" = "{\"id\":0,\"ids\":$2}" ]; then echo "ok: $1"; else echo "FAIL: $1: $got (wanted ids $2)"; fails=$((fails+1)); fi
  }
  # HF's ids for "Hello world" (the .out files), after our BOS where the vocabulary adds one.
  ids_are "--tokenizer llama-spm.gguf" '[1,15043,3186]' tokenize --tokenizer "$V/ggml-vocab-llama-spm.gguf" --text "Hello world"
  ids_are "--model llama-spm.gguf (vocab only)" '[1,15043,3186]' tokenize --model "$V/ggml-vocab-llama-spm.gguf" --text "Hello world"
  ids_are "--model qwen35.gguf (vocab only)" '[9707,1879]' tokenize --model "$V/ggml-vocab-qwen35.gguf" --text "Hello world"
  got=$("$BIN" tokenize --model "$V/ggml-vocab-qwen35.gguf" --decode --ids 9707,1879 2>&1)
  n=$((n+1))
  if [ "$got" = '{"id":0,"text":"Hello world"}' ]; then echo "ok: --decode with a vocab-only GGUF"
  else echo "FAIL: --decode with a vocab-only GGUF: $got"; fails=$((fails+1)); fi
  expect_error "holds no weights: a vocabulary-only GGUF" "${G[@]}" --model "$V/ggml-vocab-llama-spm.gguf"
  expect_error "holds no weights: a vocabulary-only GGUF" "${G[@]}" --model "$V/ggml-vocab-gemma-4.gguf"
  ids_are "--model gemma-4.gguf (vocab only, tokenizer model gemma4)" '[2,9259,1902]' tokenize --model "$V/ggml-vocab-gemma-4.gguf" --text "Hello world"
  expect_error "unsupported tokenizer model 'bert'" tokenize --tokenizer "$V/ggml-vocab-bert-bge.gguf" --text hi
else
  echo "skipped: the vocabulary-only GGUF cases (no $V/ggml-vocab-*.gguf: launch/setup.sh --test-deps copies them)"
fi
echo "$((n-fails)) passed, $fails failed"
[ $fails -eq 0 ]
