"""Helpers for the benchmark scripts: run `lookahead generate` with --stats-json and tabulate."""
import json, os, subprocess, sys, tempfile

BIN = os.environ.get("LOOKAHEAD_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "build", "lookahead"))


def prompts_file(dataset, n, out_dir, shared, max_chars=600):
    """Writes n prompts of a shared dataset as {"id","prompt"} JSONL; returns its path."""
    recs = []
    if dataset == "tinystories":
        for l in open(os.path.join(shared, "datasets/tinystories/prompts.jsonl")):
            recs.append(json.loads(l))
    elif dataset == "dolly":
        for i, l in enumerate(open(os.path.join(shared, "datasets/dolly_subset/dolly.jsonl"))):
            recs.append({"id": f"dolly-{i}", "prompt": json.loads(l)["prompt"]})
    elif dataset == "gsm8k":  # short questions only: the shared models have 256/512 positions
        for i, l in enumerate(open(os.path.join(shared, "datasets/gsm8k/test.jsonl"))):
            q = json.loads(l)["question"]
            if len(q) <= 200:
                recs.append({"id": f"gsm8k-{i}", "prompt": "Question: " + q + "\nAnswer:"})
    elif dataset == "humaneval":  # code prompts; the shorter ones fit the small models' context
        import gzip
        for l in gzip.open(os.path.join(shared, "datasets/humaneval/HumanEval.jsonl.gz"), "rt"):
            r = json.loads(l)
            if len(r["prompt"]) <= max_chars:
                recs.append({"id": r["task_id"], "prompt": r["prompt"]})
    elif dataset == "cnn_dailymail":  # news summarisation (0-shot prompt of Spec-Bench), article cut to fit
        for i, l in enumerate(open(os.path.join(shared, "datasets/cnn_dailymail/cnn_dailymail_0shot.jsonl"))):
            a = json.loads(l)["article"]
            head, sep, ask = a.rpartition("\n\nSummarize")
            body = head if sep else a
            if len(body) > max_chars:
                body = body[:max_chars].rsplit(" ", 1)[0]
            recs.append({"id": f"cnn-{i}", "prompt": body + (sep + ask if sep else "") + "\n"})
    else:
        raise SystemExit(f"unknown dataset {dataset}")
    path = os.path.join(out_dir, f"{dataset}-{n}.jsonl")
    with open(path, "w") as f:
        for r in recs[:n]:
            f.write(json.dumps({"id": r["id"], "prompt": r["prompt"]}) + "\n")
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
