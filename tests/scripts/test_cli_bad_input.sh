#!/usr/bin/env bash
# Bad input through the real binary: one clear error line, a non-zero exit, no crash.
# labels: cli
# timeout: 300
set -u
BUILD=$1; SRC=$2; SHARED=$3
BIN=$BUILD/lookahead
M=$SHARED/models/stories260K
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0; n=0
source "$SRC/tests/scripts/lib.sh"  # expect_error
cp -r "$M" "$T/m"
python3 - "$T" <<'PY'
import json, os, shutil, struct, sys
t = sys.argv[1]
def clone(name):
    d = os.path.join(t, name); shutil.copytree(os.path.join(t, "m"), d); return d
d = clone("hdrlen"); open(d + "/model.safetensors", "wb").write(struct.pack("<Q", 1 << 40) + b"{}")
d = clone("badjson"); h = b'{"a": [1,'; open(d + "/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h)
d = clone("shape"); c = json.load(open(d + "/config.json")); c["hidden_size"] = 32; c["head_dim"] = 4; json.dump(c, open(d + "/config.json", "w"))
d = clone("dtype"); h = json.dumps({"model.embed_tokens.weight": {"dtype": "I8", "shape": [512, 64], "data_offsets": [0, 32768]}}).encode()
open(d + "/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + bytes(32768))
d = clone("arch"); c = json.load(open(d + "/config.json")); c["architectures"] = ["BertModel"]; json.dump(c, open(d + "/config.json", "w"))
d = clone("notok"); os.remove(d + "/tokenizer.model")
d = clone("noweights"); os.remove(d + "/model.safetensors")
open(os.path.join(t, "bad.jsonl"), "w").write('{"id": 1, "prompt": "hi"}\n{"id": 2, "prompt": \n')
# A repeated id (records and --resume match by id): the second explicit, and an index id against an explicit one.
open(os.path.join(t, "dup.jsonl"), "w").write('{"id": "a", "prompt": "hi"}\n{"id": "b", "prompt": "yo"}\n{"id": "a", "prompt": "x"}\n')
open(os.path.join(t, "dupidx.jsonl"), "w").write('{"prompt": "hi"}\n{"id": 0, "prompt": "yo"}\n')
# GGUF files (--model FILE.gguf): written field by field (little-endian; strings are u64 length + bytes)
def gstr(x): x = x.encode(); return struct.pack("<Q", len(x)) + x
def gguf(kvs, tensors=b"", n_tensors=0):
    b = b"GGUF" + struct.pack("<IQQ", 3, n_tensors, len(kvs))
    for k, (typ, payload) in kvs: b += gstr(k) + struct.pack("<I", typ) + payload
    return b + tensors
arch = ("general.architecture", (8, gstr("llama")))
open(os.path.join(t, "notgguf.gguf"), "wb").write(b"GGML" + bytes(20))
open(os.path.join(t, "v1.gguf"), "wb").write(b"GGUF" + struct.pack("<IQQ", 1, 0, 0))
open(os.path.join(t, "trunc.gguf"), "wb").write(gguf([arch])[:-3])
open(os.path.join(t, "hugestr.gguf"), "wb").write(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1 << 62) + bytes(16))
open(os.path.join(t, "mamba.gguf"), "wb").write(gguf([("general.architecture", (8, gstr("mamba")))]))
open(os.path.join(t, "nokeys.gguf"), "wb").write(gguf([arch]))
# A vocabulary-only GGUF (no tensors, tokenizer.ggml.*; here without its token list) of an architecture we do not run.
open(os.path.join(t, "vocabonly.gguf"), "wb").write(gguf([("general.architecture", (8, gstr("mamba"))),
                                                          ("tokenizer.ggml.model", (8, gstr("gpt2")))]))
q2k = gstr("token_embd.weight") + struct.pack("<IQQIQ", 2, 256, 8, 10, 0)  # a Q2_K tensor, data past the end
b = gguf([arch], q2k, 1); open(os.path.join(t, "q2k.gguf"), "wb").write(b + bytes(-len(b) % 32))
d = clone("gemma"); json.dump({"chat_template": "{% for m in messages %}{{ '<start_of_turn>' + m['role'] + '\\n' + m['content'] + '<end_of_turn>\\n' }}{% endfor %}"}, open(d + "/tokenizer_config.json", "w"))
d = clone("chatlist"); json.dump({"chat_template": [{"name": "tool_use", "template": "x"}]}, open(d + "/tokenizer_config.json", "w"))
for name, rec in [("badmsg", {"id": 1, "messages": [{"role": "user", "content": 3}]}),
                  ("badrole", {"id": 1, "messages": [{"role": "robot", "content": "hi"}]}),
                  ("msgs", {"id": 1, "messages": [{"role": "user", "content": "hi"}]})]:
    open(os.path.join(t, name + ".jsonl"), "w").write(json.dumps(rec) + "\n")
open(os.path.join(t, "two.jsonl"), "w").write('{"id": 1, "prompt": "Once"}\n{"id": 2, "prompt": "Lily"}\n')
open(os.path.join(t, "long.jsonl"), "w").write(json.dumps({"id": "long", "prompt": "word " * 600}) + "\n")
PY
G=(generate --quiet --max-new-tokens 8)
expect_error "does not exist" "${G[@]}" --model "$T/nope" --prompt hi
expect_error "past the end of the file" "${G[@]}" --model "$T/hdrlen" --prompt hi
expect_error "broken safetensors header JSON" "${G[@]}" --model "$T/badjson" --prompt hi
expect_error "but config.json implies" "${G[@]}" --model "$T/shape" --prompt hi
expect_error "unsupported dtype I8" "${G[@]}" --model "$T/dtype" --prompt hi
expect_error "unsupported architecture 'BertModel'" "${G[@]}" --model "$T/arch" --prompt hi
expect_error "no tokenizer.model" "${G[@]}" --model "$T/notok" --prompt hi
expect_error "neither model.safetensors" "${G[@]}" --model "$T/noweights" --prompt hi
expect_error "empty prompt" "${G[@]}" --model "$T/m" --prompt ""
expect_error "exceeds the model's context" generate --quiet --model "$T/m" --prompt hi --max-new-tokens 600
expect_error "prompt \"long\"" generate --quiet --model "$T/m" --input "$T/long.jsonl" --output "$T/o.jsonl"
expect_error "bad.jsonl:2: invalid JSON" "${G[@]}" --model "$T/m" --input "$T/bad.jsonl" --output "$T/o.jsonl"
expect_error 'dup.jsonl:3: id "a" repeats line 1' "${G[@]}" --model "$T/m" --input "$T/dup.jsonl" --output "$T/o.jsonl"
expect_error "dupidx.jsonl:2: id 0 repeats line 1" "${G[@]}" --model "$T/m" --input "$T/dupidx.jsonl" --output "$T/o.jsonl" --batch 2
expect_error "--input file" "${G[@]}" --model "$T/m" --input "$T/missing.jsonl" --output "$T/o.jsonl"
expect_error "--input '$T' is a directory" "${G[@]}" --model "$T/m" --input "$T" --output "$T/o.jsonl"
expect_error "--input needs --output" "${G[@]}" --model "$T/m" --input "$T/bad.jsonl"
expect_error "only one of --prompt and --input" "${G[@]}" --model "$T/m" --prompt hi --input "$T/bad.jsonl" --output "$T/o"
expect_error "--model is required" "${G[@]}" --prompt hi
expect_error "--temperature must be >= 0" "${G[@]}" --model "$T/m" --prompt hi --temperature -1
# The kernels' ISA override: an unknown path, and a path this CPU cannot run (on a CPU without AVX-512).
LOOKAHEAD_CPU_ISA=avx1024 expect_error "LOOKAHEAD_CPU_ISA='avx1024' is not a CPU path" "${G[@]}" --model "$T/m" --prompt hi
if ! grep -qw avx512f /proc/cpuinfo; then
  LOOKAHEAD_CPU_ISA=avx512 expect_error "LOOKAHEAD_CPU_ISA=avx512, but this CPU lacks AVX-512F" "${G[@]}" --model "$T/m" --prompt hi
fi
expect_error "--top-p must be in (0, 1]" "${G[@]}" --model "$T/m" --prompt hi --top-p 0
expect_error "--top-k must be >= 0" "${G[@]}" --model "$T/m" --prompt hi --top-k -3
expect_error "--max-new-tokens must be >= 0" generate --quiet --model "$T/m" --prompt hi --max-new-tokens -5
expect_error "invalid --dtype 'fp8'" "${G[@]}" --model "$T/m" --prompt hi --dtype fp8
expect_error "invalid --device 'tpu'" "${G[@]}" --model "$T/m" --prompt hi --device tpu
expect_error "invalid --strategy 'beam'" "${G[@]}" --model "$T/m" --prompt hi --strategy beam
expect_error "--window must be in" "${G[@]}" --model "$T/m" --prompt hi --strategy lade --window 0
expect_error "invalid --adaptive 'maybe'" "${G[@]}" --model "$T/m" --prompt hi --strategy lade --adaptive maybe
expect_error "--ngram must be in" "${G[@]}" --model "$T/m" --prompt hi --strategy lade --ngram 1
expect_error "invalid --kernels" "${G[@]}" --model "$T/m" --prompt hi --kernels maybe
expect_error "invalid --cuda-graphs" "${G[@]}" --model "$T/m" --prompt hi --cuda-graphs 2
expect_error "invalid --cuda-gemm" "${G[@]}" --model "$T/m" --prompt hi --cuda-gemm fast
expect_error "invalid --kernels" bench-forward --model random:tiny-mha --kernels sometimes
expect_error "unrecognised option '--bogus'" "${G[@]}" --model "$T/m" --prompt hi --bogus 3
expect_error "the argument ('abc') for option '--max-new-tokens' is invalid" generate --model "$T/m" --prompt hi --max-new-tokens abc
expect_error "unknown random model preset" "${G[@]}" --model random:nope --prompt hi
expect_error "cannot write --output" "${G[@]}" --model "$T/m" --input "$T/long.jsonl" --output /nonexistent/dir/o.jsonl
# Files written after requests finish (--stats-json at the end, draft state after each request) fail at start: no
# prompt has run (the --output file is not even created), rather than after the job's work.
expect_error "--stats-json file '/nonexistent/dir/s.json': cannot create" "${G[@]}" --model "$T/m" --input "$T/two.jsonl" --output "$T/early.jsonl" --stats-json /nonexistent/dir/s.json
expect_error "suffix state file '$T': is a directory" "${G[@]}" --model "$T/m" --input "$T/two.jsonl" --output "$T/early.jsonl" --suffix-state "$T"
expect_error "trie state file '/nonexistent/dir/t.bin': cannot create" "${G[@]}" --model "$T/m" --input "$T/two.jsonl" --output "$T/early.jsonl" --strategy trie --trie-state /nonexistent/dir/t.bin
n=$((n+1)); if [ -e "$T/early.jsonl" ]; then echo "FAIL: an unwritable --stats-json/state path still ran prompts ($(lines "$T/early.jsonl") records)"; fails=$((fails+1)); else echo "ok: nothing ran"; fi
# GGUF files
expect_error "notgguf.gguf': offset 0: header: not a GGUF file" "${G[@]}" --model "$T/notgguf.gguf" --prompt hi
expect_error "GGUF version 1" "${G[@]}" --model "$T/v1.gguf" --prompt hi
expect_error "trunc.gguf': offset 56: metadata key 0 ('general.architecture'): string value of length 5 runs past the end" "${G[@]}" --model "$T/trunc.gguf" --prompt hi
expect_error "hugestr.gguf': offset 24: metadata key 0: key of length 4611686018427387904 runs past the end" "${G[@]}" --model "$T/hugestr.gguf" --prompt hi
expect_error "unsupported architecture 'mamba' in 'general.architecture'" "${G[@]}" --model "$T/mamba.gguf" --prompt hi
expect_error "metadata 'llama.embedding_length' is missing" "${G[@]}" --model "$T/nokeys.gguf" --prompt hi
expect_error "vocabonly.gguf' holds no weights: a vocabulary-only GGUF" "${G[@]}" --model "$T/vocabonly.gguf" --prompt hi
expect_error "vocabonly.gguf': no tokenizer (metadata 'tokenizer.ggml.tokens' is missing)" tokenize --model "$T/vocabonly.gguf" --text hi
expect_error "tensor 'token_embd.weight' (Q2_K, 672 bytes at data offset 0, file offset" "${G[@]}" --model "$T/q2k.gguf" --prompt hi
# chat templates and cached model names
expect_error "gemma/tokenizer_config.json: chat template not recognised" "${G[@]}" --model "$T/gemma" --prompt hi --chat
expect_error "prompt_ids" "${G[@]}" --model "$T/gemma" --prompt hi --chat
expect_error "without a \"default\" entry" "${G[@]}" --model "$T/chatlist" --prompt hi --chat
expect_error "has no chat template.*drop --chat" "${G[@]}" --model "$T/m" --prompt hi --chat
expect_error 'has no chat template.*records with "messages" need one (first: id 1)' "${G[@]}" --model "$T/m" --input "$T/msgs.jsonl" --output "$T/o.jsonl"
expect_error "--chat needs a chat template" "${G[@]}" --model random:tiny-gqa-bias --prompt hi --chat
expect_error "badmsg.jsonl:1: messages.0. must be an object" "${G[@]}" --model "$T/m" --input "$T/badmsg.jsonl" --output "$T/o.jsonl"
expect_error "badrole.jsonl:1: messages.0. has role 'robot'" "${G[@]}" --model "$T/m" --input "$T/badrole.jsonl" --output "$T/o.jsonl"
LOOKAHEAD_DEPS=$T/deps expect_error "--model 'No-Such-Model' not found" "${G[@]}" --model No-Such-Model --prompt hi
LOOKAHEAD_DEPS=$T/deps expect_error "$T/deps/models/No-Such-Model" "${G[@]}" --model No-Such-Model --prompt hi
LOOKAHEAD_DEPS=$T/deps expect_error "--draft-model 'Nope' not found" "${G[@]}" --model "$T/m" --prompt hi --strategy ouroboros --draft-model Nope
LOOKAHEAD_DEPS=$T/deps expect_error "--model 'Nope' not found" score --model Nope --ids 1,2
# A bare word is no option (Boost dropped it silently: `generate ... ar`, meant as --strategy ar, ran the default)
expect_error "unexpected argument 'ar'" generate --model "$M" --prompt hi --max-new-tokens 2 ar
expect_error "unexpected argument 'extra'" tokenize --model "$M" --text hi extra
# A %name% sequence in a flag or a --config line (Boost.Program_options' error messages looped on it forever, and
# SIGTERM did not stop them: found by fuzz_generate_config). BIN is wrapped in a kill timeout for these cases only.
BIN_SAVED=$BIN; printf '#!/bin/sh\nexec timeout -s KILL 20 "%s" "$@"\n' "$BIN" >"$T/bin20"; chmod +x "$T/bin20"; BIN=$T/bin20
expect_error "argument 2 holds '%value%'" generate --max-new-tokens '%value%'
expect_error "holds '%original_token%'" generate --config "$SRC/tests/fuzz/regressions/generate_config/boost_placeholder_loop.conf"
expect_error "holds '%option%'" tokenize --model "$M" --threads '%option%' --text hi
BIN=$BIN_SAVED
n=$((n+1))  # where Boost refuses nothing, a %name% sequence is just text (a prompt may hold one)
if "$BIN" generate --model "$M" --prompt 'set %path% here' --max-new-tokens 2 --quiet >/dev/null 2>"$T/err"; then
  echo "ok: a prompt holding %path% runs"; else echo "FAIL: a prompt holding %path%: $(cat "$T/err")"; fails=$((fails+1)); fi
echo "$((n-fails)) passed, $fails failed"
[ $fails -eq 0 ]
