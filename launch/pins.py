"""The pinned Python packages of launch/pins.txt ("name==version", or a range: "name~=...", "name>=..."), for the Python side of the launch scripts (plot.py)."""
import os, re

PINS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pins.txt")


def pin(name):
    """The "name==version" line of launch/pins.txt for a package; SystemExit when it has none."""
    for line in open(PINS):
        m = re.match(r"\s*(" + re.escape(name) + r"(?:==|~=|>=)[^\s#]+)", line)
        if m:
            return m.group(1)
    raise SystemExit(f"launch/pins.txt has no pin for {name}")
