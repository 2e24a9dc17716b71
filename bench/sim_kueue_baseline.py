"""Benchmark: Kueue's scheduler benchmark (15,000 tasks) in the simulator, beside Kueue's figures.

python bench/sim_kueue_baseline.py      # same as `commons bench kueue-baseline`
"""

from __future__ import annotations

import sys

from gpucommons.cli.main import app

if __name__ == "__main__":
    app(args=["bench", "kueue-baseline", *sys.argv[1:]])
