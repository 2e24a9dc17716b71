"""Replays of quota vectors, cached: a vector replayed once on a window is never replayed again.

The shell decides how replays run (`commons advise` uses a pool of processes, tests run them in
line); this module only keeps the answers. `serial_replays` is the in-process replayer, and what
each worker process of the pool calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from gpucommons.domain import Policy
from gpucommons.planning.quota_search import Request
from gpucommons.planning.quota_space import QuotaSpace, apply_vector
from gpucommons.planning.replay_score import ReplayScore, Window, score_replay

#: Runs replays (perhaps several at once) and returns their scores in the order asked.
Replayer = Callable[[Sequence[Request]], list[ReplayScore]]


class ReplayContext:
    """What every replay of one advice run shares: the policy, the space, the windows, the engine."""

    def __init__(self, policy: Policy, space: QuotaSpace, windows: Mapping[str, Window], engine: str) -> None:
        self.policy = policy
        self.space = space
        self.windows = dict(windows)
        self.engine = engine

    def replay(self, request: Request) -> ReplayScore:
        vector, window = request
        return score_replay(apply_vector(self.policy, self.space, vector), self.windows[window], self.engine)


def serial_replays(context: ReplayContext) -> Replayer:
    return lambda requests: [context.replay(r) for r in requests]


class CachedReplays:
    """Memoises a `Replayer` by (vector, window); counts the replays really made."""

    def __init__(self, replayer: Replayer) -> None:
        self._replayer = replayer
        self._cache: dict[Request, ReplayScore] = {}
        self.replays = 0

    def __call__(self, requests: Sequence[Request]) -> list[ReplayScore]:
        missing = [r for r in dict.fromkeys(requests) if r not in self._cache]
        if missing:
            for request, score in zip(missing, self._replayer(missing), strict=True):
                self._cache[request] = score
            self.replays += len(missing)
        return [self._cache[r] for r in requests]

    def known(self, request: Request) -> bool:
        return request in self._cache
