#!/usr/bin/env bash
# Bounded memory over a long job: N (default 1,000) TinyStories prompts through trie, LADE and Ouroboros, one
# process per strategy with its draft state warm across all requests (the trie, the n-gram pool, the phrase pool
# and the draft model's pool live for the whole process). Resident memory (VmRSS, VmHWM from /proc/self/status,
# printed by `generate --rss-every`) is reported at 0, 250, 500 and 1,000 prompts, with the state's size, and the
# growth after the warm-up (250 -> 1,000 prompts) is checked against the bound on the strategy's state computed
# from its configured capacities (the formulas are in README.md, "Bounded memory") plus SLACK_KB (default 1024)
# for the allocator's page-level noise, and the state's size (trie nodes, pool entries) against its capacity.
# Exits non-zero when either is exceeded.
# malloc is tuned for the measurement (GLIBC_TUNABLES, unless set): blocks >= 64 KiB are mmapped and the heap top
# is trimmed past 128 KiB, so freed per-step buffers go back to the OS and VmRSS follows live memory instead of
# malloc's cache of free blocks (with the default malloc VmRSS wanders by about 1 MB between marks, no trend).
#   launch/bench/soak.sh [N]          env: MAX_NEW (default 16), STRATEGIES ("trie lade ouroboros"), OUT (a folder to
#                               keep the logs; default: a temporary one), SLACK_KB
set -euo pipefail
LA_NAME=soak
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
"$ROOT/launch/setup.sh" >/dev/null
BIN=$BUILD/lookahead
N=${1:-1000}
MAX_NEW=${MAX_NEW:-16}
STRATEGIES=${STRATEGIES:-trie lade ouroboros}
M=$SHARED/models/stories260K
D=$SHARED/models/llama2xs
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT"; W=$OUT; else W=$(mktemp -d); trap 'rm -rf "$W"' EXIT; fi
head -n "$N" "$SHARED/datasets/tinystories/prompts.jsonl" > "$W/prompts.jsonl"
[ "$(wc -l < "$W/prompts.jsonl")" = "$N" ] || { echo "soak: the prompts file has fewer than $N prompts" >&2; exit 2; }
EVERY=$(( N / 4 > 0 ? N / 4 : 1 ))
export GLIBC_TUNABLES=${GLIBC_TUNABLES:-glibc.malloc.mmap_threshold=65536:glibc.malloc.trim_threshold=131072}

# Every parameter the bounds depend on is passed explicitly (the defaults of generate --help).
declare -A ARGS=(
  [trie]="--strategy trie --decoding-length 64 --branch-length 12 --trie-capacity 2048"
  [lade]="--strategy lade --window 15 --ngram 5 --guesses 15"
  [ouroboros]="--strategy ouroboros --draft-model $D --gamma 4 --extensions 3 --draft-window 4 --draft-ngram 3 --draft-guesses 4"
)
echo "soak: $N prompts x $MAX_NEW new tokens, stories260K, --threads 1; memory reported every $EVERY prompts"
for s in $STRATEGIES; do
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$BIN" generate --model "$M" --input "$W/prompts.jsonl" --output "$W/$s.jsonl" --overwrite --quiet --threads 1 \
    --max-new-tokens "$MAX_NEW" --rss-every "$EVERY" ${ARGS[$s]} 2>"$W/$s.log" ||
    { echo "soak: $s failed:" >&2; tail -n 5 "$W/$s.log" >&2; exit 1; }
  awk -v a="$t0" -v b="$(date +%s.%N)" -v s="$s" 'BEGIN {printf "soak: %s took %.0f s\n", s, b - a}'
done

python3 - "$W" "$N" "$EVERY" "$STRATEGIES" "$M/config.json" "${SLACK_KB:-1024}" <<'PY'
import json, re, sys
w, n, every, strategies, cfg = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(), sys.argv[5]
slack = int(sys.argv[6]) * 1024
V = json.load(open(cfg))["vocab_size"]
ctx = json.load(open(cfg))["max_position_embeddings"]

def p2(x):  # next power of two >= x
    c = 1
    while c < x:
        c <<= 1
    return c

def chunk(nbytes):  # glibc malloc chunk for a request of nbytes (8-byte header, 16-byte granularity, 32 minimum)
    return max(32, (nbytes + 8 + 15) // 16 * 16)

def ngram_pool(V, N, G):  # keys <= vocab; per key a vector of <= G*(N-1) int32 (capacity <= 2x) + a map node
    return V * (2 * G * (N - 1) * 4 + 64)

def trie(C, B, D):
    arena = 2 * (C + 1) * 40                 # Node is 40 bytes; the vector's capacity <= 2x the node budget
    table = p2(2 * C + 2) * 12               # open-addressing (u64 key, u32 child), slots < 4(C+1)
    scratch = C * 64 + D * 20                # retrieval heap and children (32-byte candidates), output tree
    ledger = ctx * B * 40                    # the running request's prompt branches (node -> amount)
    return arena + table + scratch + ledger

def phrase_pool(V, K, gamma):
    P, L = max(16, 2 * K), gamma + 1         # phrases per key; a phrase is at most gamma + 1 tokens
    return V * (2 * P * 24 + P * chunk(4 * L) + 64)

bounds = {
    "trie": trie(2048, 12, 64),
    "lade": ngram_pool(V, 5, 15),
    "ouroboros": phrase_pool(V, 3, 4) + ngram_pool(V, 3, 4),
}
# The state's own size limits (exact): trie nodes <= capacity, n-grams <= V*G, phrases <= V*max(16, 2K).
limits = {"trie": ("trie_nodes", 2048), "lade": ("pool_ngrams", V * 15), "ouroboros": ("pool_phrases", V * 16)}
pat = re.compile(r"memory after (\d+) prompts: VmRSS (-?\d+) kB, VmHWM (-?\d+) kB(.*)")
marks = [0, every, 2 * every, 3 * every, n]
print(f"\n{'strategy':10s} " + " ".join(f"{'RSS@' + str(m):>10s}" for m in marks) +
      f" {'HWM@' + str(n):>10s} {'growth':>10s} {'bound':>10s}  state at the end")
bad = 0
for s in strategies:
    rows = {}
    for line in open(f"{w}/{s}.log"):
        m = pat.search(line)
        if m:
            rows[int(m.group(1))] = (int(m.group(2)), int(m.group(3)), m.group(4).strip("; "))
    if not all(k in rows for k in marks):
        print(f"{s:10s} missing memory lines (got {sorted(rows)})"); bad += 1; continue
    growth = (rows[n][0] - rows[every][0]) * 1024
    key, cap = limits[s]
    state = dict(re.findall(r"(\w+) (\d+)", rows[n][2]))
    ok = growth <= bounds[s] + slack and int(state.get(key, cap + 1)) <= cap
    bad += not ok
    print(f"{s:10s} " + " ".join(f"{rows[m][0] / 1024:8.1f}MB" for m in marks) +
          f" {rows[n][1] / 1024:8.1f}MB {growth / 1024:8.0f}kB {bounds[s] / 1024:8.0f}kB  {rows[n][2]} (max {cap})"
          + ("" if ok else "   <-- over the bound"))
print(f"growth = VmRSS@{n} - VmRSS@{every} (after warm-up), must stay <= bound + {slack // 1024} kB of allocator "
      f"noise; bound = the strategy's state at its configured capacities (vocabulary {V}, context {ctx}); "
      f"MB = 2^20 bytes, kB = 2^10")
sys.exit(1 if bad else 0)
PY
