"""The discrete-event simulator: replay a trace under a policy with the live scheduler's engine.

jobs = read_trace(open("trace.csv"))
result = run_simulation(policy, jobs, SimConfig(engine="commons"))
text = dumps(result.report)          # docs/design.md, contract 3's R.json
"""

from gpucommons.sim.bound import BoundOutcome, utilization_bound
from gpucommons.sim.errors import CapacityExceeded, SimulationError
from gpucommons.sim.jobs import SimJob, with_default_checkpoint_interval
from gpucommons.sim.report import build_report, dumps, finish_time_fairness
from gpucommons.sim.resolve import Resolution, ResolvedJob, UnknownNamesError, resolve
from gpucommons.sim.runner import SimResult, run_simulation
from gpucommons.sim.simulator import RunOutcome, SimConfig, simulate
from gpucommons.sim.trace import TraceError, TraceProblem, read_trace

__all__ = [
    "BoundOutcome",
    "CapacityExceeded",
    "Resolution",
    "ResolvedJob",
    "RunOutcome",
    "SimConfig",
    "SimJob",
    "SimResult",
    "SimulationError",
    "TraceError",
    "TraceProblem",
    "UnknownNamesError",
    "build_report",
    "dumps",
    "finish_time_fairness",
    "read_trace",
    "resolve",
    "run_simulation",
    "simulate",
    "utilization_bound",
    "with_default_checkpoint_interval",
]
