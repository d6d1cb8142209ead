"""PNG charts from the benchmark scripts' text tables (matplotlib, pinned in launch/pins.txt, installed into this interpreter's
environment on first use: run it with the torch venv's python, as the bench scripts do).

  plot.py real        TABLE PNG   launch/bench/bench-real.sh output: end-to-end tokens/s per strategy and transformers
  plot.py strategies  TABLE PNG   launch/bench/bench.sh (bench_strategies.py) output: tokens/s and S per strategy
  plot.py forward     TABLE PNG   `lookahead bench-forward` output (one or more runs): step cost against T
  plot.py acceptance  TABLE PNG   launch/bench/bench_budget_acceptance.py output: accepted tokens per step against budget
  plot.py demo        TABLE PNG   launch/demo.sh output, part 3: S and tokens/s over the batch
  plot.py layouts     CSV PNG     launch/strong-scaling.sh --layouts W: measured and modelled job tokens/s per layout
  plot.py batch       TABLE PNG   launch/bench/peers/bench_batch.py's "SET ENGINE B TOKENS/S" lines: job tokens/s against B
  plot.py scaling     CSV PNG     launch/strong-scaling.sh's CSV: tokens/s, speedup and step time against K
Imported too: peers() draws launch/bench/peers/bench_peers.py's chart, scaling() launch/scaling.py's. Every chart of
the launch/ scripts is drawn here.

A title line can be given with TITLE=...; the command that made the table belongs in the caption beside the PNG.
Charts are small (about 900 x 420 pixels, under 100 KB) so they can be committed.
"""
import collections, os, re, statistics, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pins import pin  # noqa: E402

MATPLOTLIB = pin("matplotlib")


def pyplot(style=True):
    """matplotlib.pyplot (Agg), the pinned matplotlib installed into this interpreter's environment if missing."""
    try:
        import matplotlib
    except ImportError:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", MATPLOTLIB])
        import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as p
    if style:
        p.rcParams.update({"font.size": 9, "axes.spines.top": False, "axes.spines.right": False})
    return p


def plt():
    return pyplot()


def save(fig, png):
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    print(f"PNG: {png} ({os.path.getsize(png) // 1024} KB)")


def title(default):
    return os.environ.get("TITLE", default)


def num(x):
    try:
        return float(x)
    except ValueError:
        return None


def real(lines, png):
    # set engine strategy S acc/step tok/s xAR e2e tok/step fwd plain ids   |  set transformers label xAR e2e ids
    rows = collections.OrderedDict()
    for l in lines:
        f = l.split()
        if len(f) >= 4 and f[1] == "lookahead" and num(f[3]) is not None:
            rows.setdefault(f[0], []).append((f[2], float(f[7]), float(f[3])))
        elif len(f) >= 5 and f[1] == "transformers":
            rows.setdefault(f[0], []).append(("HF " + f[2], float(f[4]), None))
    p = plt()
    sets = list(rows)
    labels = list(collections.OrderedDict.fromkeys(lbl for s in sets for lbl, _, _ in rows[s]))
    fig, ax = p.subplots(figsize=(9, 4.2))
    w = 0.8 / max(1, len(labels))
    cmap = p.get_cmap("tab10")
    for j, lbl in enumerate(labels):
        xs, ys, ss = [], [], []
        for i, s in enumerate(sets):
            for l2, v, sv in rows[s]:
                if l2 == lbl:
                    xs.append(i + (j - (len(labels) - 1) / 2) * w)
                    ys.append(v)
                    ss.append(sv)
        hatch = "//" if lbl.startswith("HF") else None
        bars = ax.bar(xs, ys, w, label=lbl, color=cmap(j % 10), hatch=hatch, edgecolor="white" if hatch else None)
        for b, sv in zip(bars, ss):
            if sv is not None and sv > 1.005:
                ax.annotate(f"S {sv:.2f}", (b.get_x() + b.get_width() / 2, b.get_height()), ha="center",
                            va="bottom", fontsize=7, rotation=90, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(sets)), sets)
    ax.set_ylim(0, ax.get_ylim()[1] * 1.15)
    ax.set_ylabel("tokens/s, end to end (prefill included)")
    ax.set_title(title("SmolLM2-135M on CPU: lookahead strategies and transformers, same prompt ids"))
    ax.legend(fontsize=7, ncol=2)
    save(fig, png)


def strategies(lines, png):
    rows = collections.OrderedDict()
    for l in lines:
        f = l.split()
        if len(f) >= 9 and num(f[3]) is not None and num(f[4]) is not None and f[-1] in ("yes", "NO"):
            rows.setdefault(f"{f[0]} {f[1]}", []).append((f[2], float(f[4]), float(f[3]), num(f[5])))
    p = plt()
    groups = list(rows)
    fig, axs = p.subplots(1, len(groups), figsize=(min(16, 3.2 * len(groups) + 1), 4.2), squeeze=False)
    for ax, g in zip(axs[0], groups):
        names = [r[0] for r in rows[g]]
        ratios = [r[3] if r[3] is not None else 1.0 for r in rows[g]]
        ax.barh(range(len(names)), ratios, color=["grey" if n == "ar" else "tab:blue" for n in names])
        ax.axvline(1.0, color="black", lw=0.8)
        for i, r in enumerate(rows[g]):
            ax.annotate(f"S {r[2]:.2f}", (ratios[i], i), va="center", fontsize=7, xytext=(3, 0),
                        textcoords="offset points")
        ax.set_yticks(range(len(names)), names)
        ax.invert_yaxis()
        ax.set_title(g, fontsize=9)
        ax.set_xlabel("x plain decoding (median of rounds)")
    fig.suptitle(title("Every strategy against plain decoding"))
    save(fig, png)


def forward(lines, png):
    model, runs, cur, cpu = None, [], None, False
    for l in lines:
        m = re.match(r"model (\S+) \[", l)
        if m:
            cpu = cpu or "cpu ms per step" in l
            model = os.path.basename(m.group(1).rstrip("/"))
            cur = {}
            runs.append(cur)
            continue
        f = l.split()
        if cur is not None and len(f) >= 4 and num(f[1]) is not None and num(f[2]) is not None:
            cur.setdefault(int(f[1]), []).append((float(f[2]), num(f[4]) if len(f) > 4 else None))
    # Several runs of the same command: the fastest per point (the least disturbed on a shared machine).
    ts = sorted({t for r in runs for t in r})
    best = {t: min(r[t][0][0] for r in runs if t in r) for t in ts}
    aten = {t: min((r[t][0][1] for r in runs if t in r and r[t][0][1]), default=None) for t in ts}
    p = plt()
    fig, ax = p.subplots(figsize=(7.5, 4.2))
    ax.plot(ts, [best[t] / best[ts[0]] for t in ts], marker="o", label="skinny GEMM (--kernels on, default)")
    if all(aten[t] for t in ts):
        ax.plot(ts, [aten[t] / best[ts[0]] for t in ts], marker="s", ls="--", label="ATen linear (--kernels off)")
    ax.plot(ts, ts, color="grey", lw=0.8, ls=":", label="cost proportional to T")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(ts, [str(t) for t in ts])
    ys = [y for y in (1, 2, 4, 8, 16, 32, 64, 128, 256) if y <= max(ts)]
    ax.set_yticks(ys, [str(y) for y in ys])
    ax.set_xlabel("step tokens T")
    ax.set_ylabel(f"{'CPU' if cpu else 'wall'} time of a step / a step of T = {ts[0]}")
    how = "CPU time of the decoding thread" if cpu else f"fastest of {len(runs)} runs"
    ax.set_title(title(f"{model}: what a step of T tokens costs ({how})"))
    ax.legend(fontsize=8)
    for t in ts:
        ax.annotate(f"{best[t]:.0f} ms", (t, best[t] / best[ts[0]]), fontsize=7, xytext=(3, -10),
                    textcoords="offset points")
    save(fig, png)


def acceptance(lines, png):
    rows = collections.OrderedDict()
    for l in lines:
        f = l.split()
        if len(f) >= 5 and num(f[2]) is not None and num(f[3]) is not None and f[-1] in ("yes", "NO"):
            rows.setdefault((f[0], f[1]), []).append((int(f[2]), float(f[3]), float(f[4])))
    p = plt()
    fig, axs = p.subplots(1, 2, figsize=(9, 4))
    for (ps, strat), pts in rows.items():
        pts.sort()
        lbl = f"{strat} ({ps})"
        axs[0].plot([x for x, _, _ in pts], [a for _, a, _ in pts], marker="o", label=lbl)
        axs[1].plot([x for x, _, _ in pts], [c for _, _, c in pts], marker="o", label=lbl)
    xs = sorted({x for pts in rows.values() for x, _, _ in pts})
    for ax in axs:
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.set_xlabel("draft budget (draft tokens per step, fixed)")
    axs[0].set_ylabel("accepted draft tokens per step")
    axs[1].set_ylabel("accepted / drafted")
    axs[0].legend(fontsize=7)
    m = re.match(r"model (\S+?);", lines[0]) if lines else None
    name = os.path.basename(m.group(1).rstrip("/")) if m else "model"
    fig.suptitle(title(f"{name}: acceptance against draft budget (fixed drafts)"))
    save(fig, png)


def demo(lines, png):
    rows = []
    on = False
    for l in lines:
        if l.startswith("== 3."):
            on = True
        f = l.split()
        if on and len(f) >= 10 and f[0].isdigit() and f[-1] in ("yes", "NO"):
            # "# task ... S tok/s x  S tok/s x  plain-tok/s lossless": numbers from the end
            rows.append((int(f[0]), float(f[-8]), float(f[-7]), float(f[-5]), float(f[-4]), float(f[-2])))
    p = plt()
    fig, ax = p.subplots(figsize=(7.5, 3.8))
    xs = [r[0] for r in rows]
    w = 0.27
    ax.bar([x - w for x in xs], [r[2] for r in rows], w, label="trie, adaptive (default)")
    ax.bar(xs, [r[4] for r in rows], w, label="trie, fixed 3-token drafts", color="tab:green")
    ax.bar([x + w for x in xs], [r[5] for r in rows], w, label="plain decoding", color="grey")
    for x, r in zip(xs, rows):
        ax.annotate(f"S {r[1]:.2f}", (x - w, r[2]), ha="center", va="bottom", fontsize=6.5, rotation=90,
                    xytext=(0, 2), textcoords="offset points")
        ax.annotate(f"S {r[3]:.2f}", (x, r[4]), ha="center", va="bottom", fontsize=6.5, rotation=90,
                    xytext=(0, 2), textcoords="offset points")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.25)
    ax.set_xticks(xs)
    ax.set_xlabel("task in the batch (related code tasks, one process)")
    ax.set_ylabel("tokens per CPU-second")
    ax.set_title(title("Drafting that pays: the trie learns from earlier answers"))
    ax.legend(fontsize=7, loc="upper left", ncol=3)
    save(fig, png)


def layouts(lines, png):
    import csv
    rows = list(csv.DictReader(lines))
    p = plt()
    fig, ax = p.subplots(figsize=(6.5, 3.6))
    xs = list(range(len(rows)))
    w = 0.38
    ax.bar([x - w / 2 for x in xs], [num(r["job_tokens_per_s"]) or 0 for r in rows], w, label="measured (real ranks here)")
    ax.bar([x + w / 2 for x in xs], [num(r.get("modelled_job_tokens_per_s", "")) or 0 for r in rows], w,
           label=f"modelled (W devices, L = {rows[0].get('link_latency_us') or 0} us)" if rows else "modelled",
           color="grey")
    for x, r in zip(xs, rows):
        ax.annotate(f"p50 {r['p50_request_s']} s", (x - w / 2, num(r["job_tokens_per_s"]) or 0), ha="center",
                    va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{r['groups']} x {r['ranks_per_group']}" for r in rows])
    ax.set_xlabel("layout: groups x ranks per group")
    ax.set_ylabel("job tokens/s")
    ax.set_title(title("A batch job on W ranks: groups (throughput) or lookahead parallelism (latency)"))
    ax.legend(fontsize=7)
    save(fig, png)


def batch(lines, png):
    series = collections.defaultdict(list)  # (set, engine) -> [(B, tokens/s)]
    for l in lines:
        f = l.split()
        if len(f) == 4 and num(f[2]) is not None and num(f[3]) is not None:
            series[(f[0], f[1])].append((int(f[2]), float(f[3])))
    sets = sorted({k[0] for k in series})
    p = plt()
    fig, axes = p.subplots(1, len(sets), figsize=(3.2 * len(sets) + 0.6, 3.6), squeeze=False)
    style = {"plain": ("tab:blue", "o", "ours, plain"), "draft": ("tab:green", "s", "ours, drafting (suffix)"),
             "llama.cpp": ("grey", "^", "llama.cpp batched")}
    for ax, s in zip(axes[0], sets):
        for eng, (color, marker, label) in style.items():
            pts = sorted(series.get((s, eng), []))
            if pts:
                ax.plot([b for b, _ in pts], [t for _, t in pts], marker=marker, color=color, label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("requests in flight (B)")
        ax.set_title(s)
    axes[0][0].set_ylabel("job tokens/s")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title("Batch jobs: job tokens/s against batch size"), fontsize=9)
    save(fig, png)


def scaling(rows, png, title):
    """launch/strong-scaling.sh (launch/scaling.py): tokens/s, speedup and step time against K, per mode; rows
    are the CSV's dicts. Returns False (and says why) when matplotlib cannot be had: the CSV holds the table."""
    try:
        plt = pyplot(style=False)
    except Exception as e:
        print(f"PNG not written: matplotlib unavailable ({e}); the CSV holds the table", file=sys.stderr)
        return False
    styles = {"modelled": ("tab:blue", "o", "-"), "measured-seq": ("tab:gray", "s", ":"),
              "measured-mpi": ("tab:red", "^", "--")}
    labels = {"modelled": "modelled: K devices (slowest replica + latency)",
              "measured-seq": "measured: simulation, K forwards in sequence on 1 device",
              "measured-mpi": "measured: real K-rank MPI job on this machine (shared cores/GPU)"}
    fig, ax = plt.subplots(1, 3, figsize=(16, 5.2))
    for m in ["modelled", "measured-seq", "measured-mpi"]:
        rs = sorted([r for r in rows if r["mode"] == m and r["tokens_per_s"] not in ("", None)],
                    key=lambda r: int(r["K"]))
        if not rs:
            continue
        c, mk, ls = styles[m]
        ks = [int(r["K"]) for r in rs]
        ax[0].plot(ks, [float(r["tokens_per_s"]) for r in rs], color=c, marker=mk, ls=ls, label=labels[m])
        sp = [(int(r["K"]), float(r["speedup"])) for r in rs if r["speedup"] not in ("", "nan")]
        if sp:
            ax[1].plot([k for k, _ in sp], [v for _, v in sp], color=c, marker=mk, ls=ls, label=labels[m])
        ax[2].plot(ks, [float(r["step_ms"]) for r in rs], color=c, marker=mk, ls=ls, label=labels[m])
    allk = sorted({int(r["K"]) for r in rows})
    ax[1].plot(allk, [1.0] * len(allk), color="black", lw=0.8, ls="-", alpha=0.5)
    for a, t, y in [(ax[0], "tokens/s", "tokens / s"), (ax[1], "speedup over K=1 (same mode)", "speedup"),
                    (ax[2], "time per step", "ms / step")]:
        a.set_xscale("log", base=2)
        a.set_xticks(allk)
        a.set_xticklabels([str(k) for k in allk])
        a.set_xlabel("K (ranks / replicas)")
        a.set_ylabel(y)
        a.set_title(t)
        a.grid(True, alpha=0.3)
    ax[2].set_yscale("log")
    from matplotlib.ticker import FormatStrFormatter
    ax[2].yaxis.set_major_formatter(FormatStrFormatter("%g"))
    lo, hi = ax[2].get_ylim()
    if hi / lo < 8:  # within a decade: label the minor ticks too
        ax[2].yaxis.set_minor_formatter(FormatStrFormatter("%g"))
    h, l = ax[0].get_legend_handles_labels()
    fig.legend(h, l, loc="lower center", ncol=3, fontsize=9, frameon=False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    fig.savefig(png, dpi=110)
    print(f"PNG: {png}")
    return True


def peers(path, res, sets, labels, dtypes, threads):
    """launch/bench/peers/bench_peers.py (CHART=PNG): median decode tokens/s per set, one bar per config
    (llama.cpp's hatched), one panel per dtype. res[(dtype, set, label)]["tps"] holds the rounds."""
    plt = pyplot(style=False)
    fig, axes = plt.subplots(1, len(dtypes), figsize=(7 * len(dtypes), 4.5), squeeze=False)
    for ax, d in zip(axes[0], dtypes):
        w = 0.8 / len(labels)
        for i, l in enumerate(labels):
            ys = [statistics.median(res[(d, s, l)]["tps"]) for s in sets]
            ax.bar([x + i * w for x in range(len(sets))], ys, w, label=l,
                   hatch="//" if l.startswith("llama") else None)
        ax.set_xticks([x + 0.4 - w / 2 for x in range(len(sets))], list(sets))
        ax.set_ylabel("decode tok/s (median)")
        ax.set_title(f"{d.upper()}, {threads} threads")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"chart: {path}")


def scaling_csv(lines, png):
    import csv
    scaling(list(csv.DictReader(lines)), png, title("LP strong scaling"))


if __name__ == "__main__":
    kind, table, png = sys.argv[1], sys.argv[2], sys.argv[3]
    text = open(table).read().splitlines()
    {"real": real, "strategies": strategies, "forward": forward, "acceptance": acceptance, "demo": demo,
     "batch": batch, "layouts": layouts, "scaling": scaling_csv}[kind](text, png)
