#!/usr/bin/env bash
# Checkpoint formats: the same weights as one file, as shards with model.safetensors.index.json, and stored as
# F16/BF16 give the same greedy ids (sharded: identical; half-precision storage: loads and decodes, logits close).
# labels: cli
# timeout: 300
set -u
BUILD=$1; SRC=$2; SHARED=$3
BIN=$BUILD/lookahead
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
python3 - "$SHARED/models/stories260K" "$T" <<'PY'
import json, os, shutil, struct, sys
src, t = sys.argv[1], sys.argv[2]
raw = open(os.path.join(src, "model.safetensors"), "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n]); body = raw[8 + n:]
names = [k for k in hdr if k != "__metadata__"]
def write(path, tensors):  # tensors: name -> (dtype, shape, bytes)
    h, off, parts = {}, 0, []
    for k, (dt, shape, b) in tensors.items():
        h[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}; off += len(b); parts.append(b)
    hs = json.dumps(h).encode(); hs += b" " * ((8 - len(hs) % 8) % 8)
    open(path, "wb").write(struct.pack("<Q", len(hs)) + hs + b"".join(parts))
def tensor(k):
    a, b = hdr[k]["data_offsets"]; return body[a:b]
for d in ["sharded", "f16", "bf16"]:
    os.makedirs(os.path.join(t, d))
    for f in os.listdir(src):
        if f != "model.safetensors":
            shutil.copy(os.path.join(src, f), os.path.join(t, d, f))
half = len(names) // 2
shards = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
wm = {}
for f, ks in shards.items():
    write(os.path.join(t, "sharded", f), {k: ("F32", hdr[k]["shape"], tensor(k)) for k in ks})
    wm.update({k: f for k in ks})
json.dump({"metadata": {}, "weight_map": wm}, open(os.path.join(t, "sharded", "model.safetensors.index.json"), "w"))
def f16(b):
    v = struct.unpack(f"<{len(b)//4}f", b); return struct.pack(f"<{len(v)}e", *v)
def bf16(b):
    out = bytearray()
    for i in range(0, len(b), 4):
        u = struct.unpack("<I", b[i:i + 4])[0]; u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16; out += struct.pack("<H", u)
    return bytes(out)
write(os.path.join(t, "f16", "model.safetensors"), {k: ("F16", hdr[k]["shape"], f16(tensor(k))) for k in names})
write(os.path.join(t, "bf16", "model.safetensors"), {k: ("BF16", hdr[k]["shape"], bf16(tensor(k))) for k in names})
PY
fails=0; n=0
check() { n=$((n+1)); if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails+1)); fi; }
ids() { "$BIN" generate --model "$1" --prompt "Once upon a time" --max-new-tokens 40 --output /dev/null -q 2>&1 >/dev/null;
        "$BIN" score --model "$1" --ids 1,403,407,261,378 | python3 -c "import json,sys; print(json.load(sys.stdin)['argmax'])"; }
ref=$(ids "$SHARED/models/stories260K")
check "sharded checkpoint gives the same argmax ($ref)" "[ \"\$(ids $T/sharded)\" = '$ref' ]"
for d in f16 bf16; do
  check "$d-stored checkpoint loads and decodes" "$BIN generate --model $T/$d --prompt 'Once upon a time' --max-new-tokens 20 -q > /dev/null"
  check "$d-stored logits close to fp32" "python3 - <<PY
import json, subprocess
a = json.loads(subprocess.run(['$BIN', 'score', '--model', '$SHARED/models/stories260K', '--ids', '1,403,407,261'], capture_output=True, text=True).stdout)['logits']
b = json.loads(subprocess.run(['$BIN', 'score', '--model', '$T/$d', '--ids', '1,403,407,261'], capture_output=True, text=True).stdout)['logits']
d = max(abs(x - y) for x, y in zip(a, b)); print('  max |logit diff| =', d); raise SystemExit(0 if d < 0.5 else 1)
PY"
done
mv "$T/sharded/model-00002-of-00002.safetensors" "$T/gone"
check "a missing shard is a clear error" "$BIN generate --model $T/sharded --prompt hi -q 2>&1 | grep -q \"shard 'model-00002-of-00002.safetensors' is missing\""
echo "$((n-fails)) passed, $fails failed"
[ $fails -eq 0 ]
