"""The body of launch/bench-gguf.sh: rounds of llama-bench tg and our plain decoding on the same GGUF files, the
ratio ours / llama.cpp within each round, and its median and min-max over the rounds (one table)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

PROMPT = "Once upon a time, in a small village by the sea, there lived an old fisherman who"


def run(cmd):
    """Runs cmd; returns its stdout and the peak resident memory (MiB) of the process."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        out.seek(0); err.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"failed: {' '.join(cmd)}\n{err.read().decode(errors='replace')}")
        return out.read().decode(), ru.ru_maxrss / 1024.0


def llama(bench, path, threads, n):
    out, rss = run([bench, "-m", path, "-t", str(threads), "-p", "0", "-n", str(n), "-r", "1", "-o", "json"])
    rows = [r for r in json.loads(out) if r.get("n_gen") == n]
    return rows[0]["avg_ts"], rss


def ours(binary, path, threads, n, tmp):
    stats = os.path.join(tmp, "stats.json")
    _, rss = run([binary, "generate", "--model", path, "--prompt", PROMPT, "--strategy", "ar", "--max-new-tokens",
                  str(n), "--threads", str(threads), "--stats-json", stats, "--quiet"])
    a = json.load(open(stats))["aggregate"]
    return a["steps"] / (a["seconds"] - a["prefill_s"]), rss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("files", nargs="+", help="LABEL=PATH")
    a = ap.parse_args()
    binary = os.environ.get("LOOKAHEAD_BIN", "build/lookahead")
    files = [f.split("=", 1) for f in a.files]
    res = {lab: {"llama": [], "ours": [], "ratio": [], "rss_l": [], "rss_o": []} for lab, _ in files}
    with tempfile.TemporaryDirectory(prefix="la-bench-gguf-") as tmp:
        for r in range(a.rounds):
            for lab, path in files:
                tl, rl = llama(a.llama_bench, path, a.threads, a.tokens)
                to, ro = ours(binary, path, a.threads, a.tokens, tmp)
                d = res[lab]
                d["llama"].append(tl); d["ours"].append(to); d["ratio"].append(to / tl)
                d["rss_l"].append(rl); d["rss_o"].append(ro)
                print(f"round {r + 1}: {lab}: llama.cpp {tl:.1f} tok/s, ours {to:.1f} tok/s, ratio {to / tl:.3f}",
                      file=sys.stderr, flush=True)
    print(f"threads {a.threads}, {a.tokens} decode tokens, {a.rounds} interleaved rounds")
    print("| GGUF | llama.cpp tg tok/s | ours tok/s | ours / llama.cpp, median (min-max) | peak RSS MiB llama.cpp / ours |")
    print("|---|---|---|---|---|")
    for lab, _ in files:
        d = res[lab]
        rng = lambda v, f: f"{statistics.median(v):{f}} ({min(v):{f}}-{max(v):{f}})"
        print(f"| {lab} | {rng(d['llama'], '.1f')} | {rng(d['ours'], '.1f')} | {rng(d['ratio'], '.2f')}x | "
              f"{max(d['rss_l']):.0f} / {max(d['rss_o']):.0f} |")
    print("llama.cpp: llama-bench -p 0 -n N -r 1 (N one-token decodes from an empty context, after its warm-up run).")
    print("ours: generate --strategy ar --max-new-tokens N on a short prompt, --stats-json steps / (seconds -"
          " prefill_s): one-token forwards + argmax + host work, no prefill, no warm-up.")


if __name__ == "__main__":
    main()
