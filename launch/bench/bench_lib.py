"""Helpers for the benchmark scripts: run `lookahead generate` with --stats-json and tabulate."""
import json, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import prompt_sets  # noqa: E402

BIN = os.environ.get("LOOKAHEAD_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "build", "lookahead"))


def prompts_file(dataset, n, out_dir, shared, max_chars=600):
    """Writes n prompts of a shared prompt set (launch/prompt_sets.py, base-model form: raw text) as {"id","prompt"}
    JSONL; returns its path."""
    recs = prompt_sets.load(dataset, n, shared, base=True, max_chars=max_chars)
    path = os.path.join(out_dir, f"{dataset}-{n}.jsonl")
    with open(path, "w") as f:
        for r in recs:
            f.write(json.dumps({"id": r["id"], "prompt": r["text"]}) + "\n")
    return path


def run(model, prompts, strategy, max_new, out_dir, extra=(), label=None):
    tag = f"{os.path.basename(model.rstrip('/')).replace(':', '_')}-{os.path.basename(prompts)}-{label or strategy}"
    out = os.path.join(out_dir, tag + ".jsonl")
    stats = os.path.join(out_dir, tag + ".stats.json")
    cmd = [BIN, "generate", "--model", model, "--input", prompts, "--output", out, "--overwrite",
           "--max-new-tokens", str(max_new),
           "--strategy", strategy, "--stats-json", stats, "--quiet",
           *([] if "--batch" in extra else ["--batch", "1"]),  # one request at a time: per-request speeds
           *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{r.stderr}")
    s = json.load(open(stats))
    recs = sorted((json.loads(l) for l in open(out)), key=lambda r: json.dumps(r["id"]))  # --batch: finishing order
    return s, [r["ids"] for r in recs]
