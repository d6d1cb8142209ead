"""The tables of launch/strong-scaling.sh (its charts: launch/plot.py scaling and layouts).

  scaling.py run WORK KS CORES CSV PNG TITLE LATENCY_US GPUS DEVICE   table + CSV + PNG of the runs; exit 1 unless lossless
  scaling.py plot CSV PNG                                              table + PNG of an earlier CSV
  scaling.py layouts REF CSV W CORES L_US "GxK OUT T0 T1"...           --layouts: table + CSV; exit 1 unless lossless
  scaling.py latency STATS.json[,STATS.json...]                        collective latency (us per step) of real jobs
  scaling.py need MODEL DTYPE                                          bytes one replica needs: "device host"
"""
import csv, json, math, os, re, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot  # noqa: E402


def draw(rows, png, title):
    return plot.scaling(rows, png, title)


def table(rows):
    cols = [("K", "K"), ("mode", "mode"), ("step_ms", "step ms"), ("S", "S"), ("tokens_per_s", "tokens/s"),
            ("speedup", "speedup"), ("plan", "plan tok"), ("tokens_per_rank", "tok/rank"), ("note", "note")]
    def fmt(k, v):
        if v in ("", None):
            return "-"
        if k in ("step_ms", "tokens_per_s"):
            v = float(v); return f"{v:.1f}" if v >= 10 else f"{v:.3f}"
        if k in ("S", "speedup", "tokens_per_rank", "plan"):
            return f"{float(v):.2f}"
        return str(v)
    cells = [[h for _, h in cols]] + [[fmt(k, r[k]) for k, _ in cols] for r in rows]
    w = [max(len(c[i]) for c in cells) for i in range(len(cols))]
    for j, c in enumerate(cells):
        print("  ".join(c[i].ljust(w[i]) if i in (1, 8) else c[i].rjust(w[i]) for i in range(len(cols))).rstrip())
        if j == 0:
            print("  ".join("-" * x for x in w))

def cmd_plot(csvp, png):
    """The table and the chart of a CSV written earlier."""
    rows = list(csv.DictReader(open(csvp)))
    table(rows)
    draw(rows, png, os.path.basename(csvp))
    return 0



def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return None

def ids(p):
    try:
        return [json.loads(l)["ids"] for l in open(p) if l.strip()]
    except Exception:
        return None

def adaptive_note(st):  # adaptive drafting: the most chosen draft budget and the plain-step share
    a = st.get("adaptive")
    if not a or not a.get("steps"):
        return ""
    b, n = max(a["budget_hist"].items(), key=lambda kv: kv[1])
    return f"; adaptive: budget {b} in {100 * n / a['steps']:.0f}% of steps, plain {100 * a['plain_fraction']:.0f}%"


def cmd_run(work, ks, cores, csvp, png, title, lat, gpus, device):
    """The table, CSV and chart of the runs in WORK, and whether every run's ids equal the first's."""
    ks, cores, lat, gpus = [int(k) for k in ks.split(",")], int(cores), float(lat), int(gpus)
    rows, ref, lossless, checked = [], None, True, []
    base = {}
    for k in ks:
        sim = load(f"{work}/sim-{k}.json")
        if sim and "simulation" in sim:
            s, agg = sim["simulation"], sim["aggregate"]
            S = agg["compression"]
            for m, ms, tps in [("modelled", s["modelled_step_ms"], s["modelled_tokens_per_s"]),
                               ("measured-seq", s["measured_step_ms"], s["measured_tokens_per_s"])]:
                note = (f"max fwd {s['max_forward_ms_mean']:.1f} ms + L {s['collective_latency_us']:.0f} us"
                        if m == "modelled" and k > 1 else ("K fwds in sequence" if m == "measured-seq" and k > 1 else ""))
                if s.get("disagreements", 0):
                    note += f" DISAGREEMENTS {s['disagreements']}"
                rows.append(dict(K=k, mode=m, step_ms=ms, S=S, tokens_per_s=tps, tokens_per_rank=s["mean_tokens_per_rank"],
                                 plan=agg["step_tokens_per_step"], note=note + adaptive_note(sim)))
        real = load(f"{work}/real-{k}.json")
        if real:
            agg = real["aggregate"]
            d = real.get("dist")
            tpr = d["step_tokens"] / d["steps"] / k if d and d.get("steps") and "step_tokens" in d else \
                (agg["step_tokens_per_step"] if k == 1 else "")
            if k == 1:
                note = "1 process"
            else:
                note = f"MPI {k} ranks"
                if device == "cpu":
                    note += f", {cores} cores" + (" oversubscribed" if k > cores else " shared")
                else:
                    note += f", share {gpus} GPU" if gpus < k else ""
                if d:
                    note += f", step - max fwd {(d['run_s'] - d['max_forward_s']) / max(d['steps'], 1) * 1e3:.2f} ms"
            rows.append(dict(K=k, mode="measured-mpi", step_ms=agg["seconds"] / max(agg["steps"], 1) * 1e3,
                             S=agg["compression"], tokens_per_s=agg["tokens_per_s"], tokens_per_rank=tpr,
                             plan=agg["step_tokens_per_step"], note=note + adaptive_note(real)))
        else:
            for what in ("skip", "failed"):
                if os.path.exists(f"{work}/real-{k}.{what}"):
                    rows.append(dict(K=k, mode="measured-mpi", step_ms="", S="", tokens_per_s="", tokens_per_rank="", plan="",
                                     note=("skipped: " if what == "skip" else "failed: ") +
                                     open(f"{work}/real-{k}.{what}").read().strip()))
        for name in (f"sim-{k}", f"real-{k}"):
            if not os.path.exists(f"{work}/{name}.json"):  # no stats: the run did not finish
                continue
            o = ids(f"{work}/{name}.jsonl")
            if o is None:
                continue
            if ref is None:
                ref = (name, o)
            same = o == ref[1]
            lossless = lossless and same
            checked.append(f"{name}{'' if same else ' DIFFERS'}")
    for r in rows:
        b = [x for x in rows if x["mode"] == r["mode"] and x["K"] == min(ks) and x["tokens_per_s"] not in ("", 0)]
        r["speedup"] = r["tokens_per_s"] / b[0]["tokens_per_s"] if b and r["tokens_per_s"] != "" else ""
    order = {"modelled": 0, "measured-seq": 1, "measured-mpi": 2}
    rows.sort(key=lambda r: (r["K"], order[r["mode"]]))
    with open(csvp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["K", "mode", "step_ms", "S", "tokens_per_s", "speedup", "plan", "tokens_per_rank",
                                          "note"])
        w.writeheader()
        for r in rows:
            w.writerow(r)
    print(title)
    table(rows)
    print(f"lossless: {'yes' if lossless and ref else 'no'} (every run's output ids vs {ref[0] if ref else '-'}: "
          f"{', '.join(checked)})")
    print(f"CSV: {csvp}")
    draw(rows, png, title)
    return 0 if lossless and ref else 1


def cmd_layouts(ref_path, csv_path, world, cores, latency_us, *specs):
    """--layouts: one row per layout run (\"GxK OUT T0 T1\"), checked against the one-process reference.
    latency_us: the link latency the runs' modelled figures assumed (measured by strong-scaling.sh)."""
    world, cores, latency_us = int(world), int(cores), float(latency_us)
    # The modelled job tokens/s of every layout, from rank 0's start-up line of each run (src/cli/layout_model.cpp:
    # the calibrated forward with the collective latency assumed there; every layout at the batch chosen, groups of
    # K > 1 with plain steps).
    modelled = {}
    def read_modelled(log):
        for line in open(log, errors="replace"):
            if "modelled job tokens/s by layout" in line:
                for m in re.finditer(r"(\d+x\d+): (\d+(?:\.\d+)?)", line.split(": ", 1)[1]):
                    modelled.setdefault(m.group(1), float(m.group(2)))
    load = lambda p: [json.loads(l) for l in open(p) if l.strip()]
    ref = {json.dumps(r["id"]): r["ids"] for r in load(ref_path)}
    def pct(xs, q):
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else float("nan")
    out = []
    print(f"layout sweep on {world} real rank(s) ({cores} core(s) here{'; oversubscribed' if world > cores else ''}); "
          f"modelled with link latency L = {latency_us:g} us per step:")
    print(f"{'layout':>7} {'job tok/s':>10} {'modelled':>9} {'job s':>8} {'p50 req s':>10} {'p95 req s':>10} {'S':>6}  lossless")
    for spec in specs:
        name, path, t0, t1 = spec.split()
        read_modelled(path + ".log")
        recs = load(path)
        st = json.load(open(path + ".stats"))["aggregate"]
        toks = sum(r["new_tokens"] for r in recs)
        steps = sum(r["steps"] for r in recs)
        job_s = st["seconds"]
        lat = [r["seconds"] for r in recs]
        same = {json.dumps(r["id"]): r["ids"] for r in recs} == ref
        row = {"layout": name, "groups": name.split("x")[0], "ranks_per_group": name.split("x")[1],
               "job_tokens_per_s": round(toks / job_s, 2) if job_s > 0 else "", "job_seconds": round(job_s, 3),
               "p50_request_s": round(pct(lat, 0.5), 3), "p95_request_s": round(pct(lat, 0.95), 3),
               "S": round(toks / steps, 3) if steps else "", "wall_with_startup_s": round(float(t1) - float(t0), 2),
               "modelled_job_tokens_per_s": modelled.get(name, ""), "link_latency_us": latency_us,
               "lossless": "yes" if same else "NO"}
        out.append(row)
        print(f"{name:>7} {row['job_tokens_per_s']:>10} {row['modelled_job_tokens_per_s']:>9} {row['job_seconds']:>8} {row['p50_request_s']:>10} "
              f"{row['p95_request_s']:>10} {row['S']:>6}  {row['lossless']}")
    if out:
        with open(csv_path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(out[0]))
            w.writeheader()
            w.writerows(out)
        print(f"CSV: {csv_path}")
    return 0 if all(r["lossless"] == "yes" for r in out) else 1


def cmd_latency(files):
    """The collective latency (us per step): the smallest over these --stats-json files of multi-rank jobs."""
    best = None
    for f in files.split(","):
        try:
            d = json.load(open(f))["dist"]
            v = (d["broadcast_s"] + d["forward_rank0_s"] + d["gather_wait_s"] - d["max_forward_s"]) / d["steps"] * 1e6
        except Exception as e:
            sys.exit(f"--latency-from {f}: not a --stats-json of a multi-rank job ({e!r})")
        best = v if best is None else min(best, v)
    print(f"{best:.1f}")
    return 0


def cmd_need(m, dt):
    """Bytes one replica needs on the device and on the host (weights + KV cache), \"0 0\" when unknown."""
    presets = {"stories260k": (64, 172, 5, 8, 4, 512, 512, True), "llama2xs": (64, 192, 5, 8, 4, 512, 256, True),
               "tinyllama-1.1b": (2048, 5632, 22, 32, 4, 32000, 2048, False),
               "llama-2-7b": (4096, 11008, 32, 32, 32, 32000, 4096, False),
               "smollm2-360m": (960, 2560, 32, 15, 5, 49152, 8192, True),
               "llama-3.2-1b": (2048, 8192, 16, 32, 8, 128256, 131072, True),
               "qwen2-0.5b": (896, 4864, 24, 14, 2, 151936, 32768, True)}
    rnd = m.startswith("random:")
    try:
        if rnd:
            h, i, l, nh, kv, v, mp, tied = presets[m[7:].split(":")[0].lower()]
            hd = h // nh
        else:
            c = json.load(open(os.path.join(m, "config.json")))
            h, i, l, nh = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["num_attention_heads"]
            kv, v, mp = c.get("num_key_value_heads", nh), c["vocab_size"], c.get("max_position_embeddings", 2048)
            tied, hd = c.get("tie_word_embeddings", False), c.get("head_dim") or h // nh
    except Exception:
        print("0 0"); return 0
    p = v * h * (1 if tied else 2) + l * (h * nh * hd * 2 + 2 * h * kv * hd + 3 * h * i + 2 * h) + h
    fused = l * (h * nh * hd + 2 * h * kv * hd + 2 * h * i)  # the loader keeps fused qkv and gate/up copies too
    b = {"fp32": 4, "fp16": 2, "bf16": 2}[dt]
    dev = (p + fused) * b + (mp + 256) * kv * hd * 2 * l * b
    host = p * 4 if rnd else 0  # random weights are drawn in fp32 on the host first
    print(int(dev), int(host))
    return 0


if __name__ == "__main__":
    cmds = {"run": cmd_run, "plot": cmd_plot, "layouts": cmd_layouts, "latency": cmd_latency, "need": cmd_need}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        sys.exit(f"usage: scaling.py {{{'|'.join(cmds)}}} ARGS... (see the docstring)")
    sys.exit(cmds[sys.argv[1]](*sys.argv[2:]))
