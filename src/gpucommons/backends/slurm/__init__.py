"""The Slurm backend's building blocks: our engine admits and places, Slurm runs the tasks.

Pure: `hostlist` (node sets), `nodes` and `inventory` (scontrol → pools), `jobs` (scontrol, squeue
and sacct → job states and exit codes), `submit` (a task attempt → sbatch; the stop commands),
`accounts*` (the policy → Slurm accounts, users and QOS). I/O: `client.SlurmClient`, the only module
that runs a command.
"""

from gpucommons.backends.slurm.client import SlurmClient, SlurmError, SubmittedJob
from gpucommons.backends.slurm.hostlist import HostlistError, compress, expand
from gpucommons.backends.slurm.inventory import SlurmInventory, UnusableNode, build_inventory, node_match
from gpucommons.backends.slurm.jobs import (
    JobParseError,
    JobPhase,
    SlurmExit,
    SlurmJob,
    parse_sacct,
    parse_scontrol_jobs,
    parse_squeue,
)
from gpucommons.backends.slurm.nodes import NodeParseError, NodeState, SlurmNode, parse_nodes, parse_state
from gpucommons.backends.slurm.submit import (
    RunAs,
    RunAsVia,
    SbatchCommand,
    SlurmSubmission,
    SubmitError,
    build_sbatch,
    cancel_command,
    job_name,
    parse_job_name,
    signal_command,
)

__all__ = [
    "HostlistError",
    "JobParseError",
    "JobPhase",
    "NodeParseError",
    "NodeState",
    "RunAs",
    "RunAsVia",
    "SbatchCommand",
    "SlurmClient",
    "SlurmError",
    "SlurmExit",
    "SlurmInventory",
    "SlurmJob",
    "SlurmNode",
    "SlurmSubmission",
    "SubmitError",
    "SubmittedJob",
    "UnusableNode",
    "build_inventory",
    "build_sbatch",
    "cancel_command",
    "compress",
    "expand",
    "job_name",
    "node_match",
    "parse_job_name",
    "parse_nodes",
    "parse_sacct",
    "parse_scontrol_jobs",
    "parse_squeue",
    "parse_state",
    "signal_command",
]
