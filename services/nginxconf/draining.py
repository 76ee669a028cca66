"""A bound on the old nginx workers still finishing their requests after reloads.

After a reload the previous workers stop accepting and finish what they serve, for up to worker_shutdown_timeout
(240 s by default). Every reload retires one generation of them; with a long request open (a slow upload), each
generation keeps a worker for minutes, and a storm of reloads piled up 47 processes and 400 MiB in 30 s.

So the reloader counts generations: the workers each reload retired. When more than `limit` generations still
have a worker draining, the oldest ones are stopped at once (SIGTERM, nginx's fast shutdown: the connections they
still serve are closed). The newest `limit` generations keep their whole drain, so a request is cut only when
`limit + 1` reloads happened while it ran: at the default --sync-rate-limit (0.3/s), after `limit` × 3.3 s at least.
Old workers are then at most `limit` × worker_processes.

`DrainingGenerations` decides from pids alone (no I/O); reload.py reads /proc and sends the signals.
"""
from __future__ import annotations


class DrainingGenerations:
    """The workers retired by each reload of one master, oldest first."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"at least one generation of old workers must be allowed to drain, got {limit}")
        self.limit = limit
        self._master: int | None = None
        self._generations: list[set[int]] = []

    def after_reload(self, master: int, retired: set[int], draining: set[int]) -> set[int]:
        """Note that a reload of `master` retired the workers `retired`; `draining` are the master's workers still
        finishing their requests now. Returns the workers to stop: those of the generations beyond the limit.

        Draining workers of no known generation (left from before this process started, or from a reload it did
        not make) count as one generation older than every known one.
        """
        if master != self._master:  # a new master: the old one's workers are not its children
            self._master, self._generations = master, []
        self._generations.append(set(retired))
        known: set[int] = set()
        for generation in self._generations:
            generation &= draining
            known |= generation
        generations = [generation for generation in self._generations if generation]
        unknown = draining - known
        ordered = ([unknown] if unknown else []) + generations
        excess = max(0, len(ordered) - self.limit)
        stopped = set().union(*ordered[:excess])
        self._generations = [generation for generation in generations if not generation & stopped]
        return stopped
