"""Layered (model/layered.py): each snapshot equals the dict it stands for, and no later change reaches it."""
import random

from services.syncer.model.layered import Layered


def test_snapshots_equal_their_dicts_and_stay_as_they_were():
    rng = random.Random(7)
    table: Layered[str, int] = Layered()
    expected: dict[str, int] = {}
    kept: list[tuple[Layered[str, int], dict[str, int]]] = []
    for step in range(3000):  # enough to fold the changed part into a new base many times
        entries: dict[str, int | None] = {f"h{rng.randrange(400)}": None if rng.random() < 0.3 else step
                                          for _ in range(rng.randrange(1, 6))}
        table = table.changed(entries)
        for key, value in entries.items():
            if value is None:
                expected.pop(key, None)
            else:
                expected[key] = value
        assert len(table) == len(expected) and table == expected and expected == table
        if step % 300 == 0:
            kept.append((table, dict(expected)))
    for snapshot, was in kept:
        assert snapshot == was and sorted(snapshot) == sorted(was) and len(snapshot) == len(was)
        assert all(snapshot.get(key) == was.get(key) and (key in snapshot) == (key in was)
                   for key in (f"h{i}" for i in range(400)))
