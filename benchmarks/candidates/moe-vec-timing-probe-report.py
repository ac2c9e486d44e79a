"""Report on the lines moe-vec-timing-probe.py collects (results/h200/probe-*.txt were made with it).

    python3 benchmarks/candidates/moe-vec-timing-probe-report.py probe.txt [--items-per-block 94]

Per launch (a team's k-th entry stamp is launch k; the last three):
the blocks' entry, prologue end and end (ns from the launch's first entry; fastest / quartiles /
slowest), each item position's duration, and the spread of the teams' ends within a block. Then,
for the last two launches, items by how many pairs share their expert (with --items-per-block,
the launch's run of items per block, which the probe does not print), and per team the median and
the two slowest blocks of the last launch. Where the build stamps the stage waits too (`W` lines),
the waits of each item's units: all of them, and those of the slowest 1% of last items.
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass


@dataclass
class Team:
    block: int
    warp: int
    sm: int
    items: int
    stamps: list[int]  # entry, prologue end, item ends (up to six), end
    waits: dict[tuple[int, int], tuple[int, int]]  # (item, unit) -> globaltimer before, after the wait

    def item_end(self, k: int) -> int:
        return self.stamps[2 + k]


def read(path: str) -> tuple[list[int], list[list[Team]]]:
    ids: list[int] = []
    teams: list[Team] = []
    waits: dict[tuple[int, int], list[tuple[int, int, int, int]]] = defaultdict(list)
    for line in open(path):
        if line.startswith("ids "):
            ids = [int(v) for v in line[5:].strip(" []\n").split(",")]
        elif line.startswith("P "):
            f = line.split()
            teams.append(Team(int(f[1]), int(f[2]), int(f[3]), int(f[4]), [int(v) for v in f[5:]], {}))
        elif line.startswith("W "):
            b, w, k, u, start, end = (int(v) for v in line.split()[1:])
            waits[(b, w)].append((k, u, start, end))
    for t in teams:  # a team's W lines belong to its launch: the stamps after its entry, before its end
        for k, u, start, end in waits.get((t.block, t.warp), []):
            if t.stamps[0] <= start <= t.stamps[-1]:
                t.waits[(k, u)] = (start, end)
    # Every launch prints each (block, warp) once, and a block of one launch enters before the same
    # block of the next: the k-th entry of a team is launch k. (Splitting by gaps between entries
    # fails in graph replays, where programmatic launches enter while the launch before drains.)
    by_team: dict[tuple[int, int], list[Team]] = defaultdict(list)
    for t in teams:
        by_team[(t.block, t.warp)].append(t)
    counts = Counter(len(v) for v in by_team.values())
    if len(counts) > 1:  # the device's printf buffer dropped lines: the launches cannot be told apart
        print(f"warning: teams printed unequal numbers of times {dict(counts)}; the split below is unreliable")
    launches: list[list[Team]] = [[] for _ in range(max((len(v) for v in by_team.values()), default=0))]
    for v in by_team.values():
        for k, t in enumerate(sorted(v, key=lambda t: t.stamps[0])):
            launches[k].append(t)
    return ids, launches


def spread(values: list[float]) -> str:
    v = sorted(values)
    return " / ".join(f"{v[i]:.0f}" for i in (0, len(v) // 4, len(v) // 2, 3 * len(v) // 4, len(v) - 1))


def report_launch(launch: list[Team]) -> None:
    t0 = min(t.stamps[0] for t in launch)
    blocks: dict[int, list[Team]] = defaultdict(list)
    for t in launch:
        blocks[t.block].append(t)
    print("  block entry     ", spread([min(t.stamps[0] for t in b) - t0 for b in blocks.values()]))
    print("  prologue end    ", spread([max(t.stamps[1] for t in b) - t0 for b in blocks.values()]))
    print("  block end       ", spread([max(t.stamps[-1] for t in b) - t0 for b in blocks.values()]))
    for k in range(6):
        durations = [t.item_end(k) - (t.stamps[1] if k == 0 else t.item_end(k - 1)) for t in launch if t.items > k]
        if durations:
            print(f"  item {k} duration ", spread(durations), f"({len(durations)} items)")
    ends = [max(t.stamps[-1] for t in b) - min(t.stamps[-1] for t in b) for b in blocks.values()]
    print(f"  teams' ends within a block: median spread {statistics.median(ends):.0f}, largest {max(ends)}")


def report_items(ids: list[int], launch: list[Team], items_per_block: int, per_pair: int) -> None:
    shared = Counter(ids)
    by: dict[tuple[int, int], list[int]] = defaultdict(list)
    for t in launch:
        for k in range(min(t.items, 6)):
            item = t.block * items_per_block + t.warp + 32 * k
            start = t.stamps[1] if k == 0 else t.item_end(k - 1)
            by[(k, shared[ids[item // per_pair]])].append(t.item_end(k) - start)
    for (k, pairs), d in sorted(by.items()):
        median = statistics.median(d)
        print(f"  item {k}, expert of {pairs} pair(s): {len(d)} items, median {median:.0f} ns, max {max(d)}")


def report_waits(launch: list[Team]) -> None:
    by: dict[tuple[int, int], list[int]] = defaultdict(list)
    for t in launch:
        for (k, u), (start, end) in t.waits.items():
            by[(k, u)].append(end - start)
    for (k, u), d in sorted(by.items()):
        print(f"  item {k} unit {u} wait", spread(d))

    def last_item(t: Team) -> tuple[int, int]:  # (index, duration) of the team's last stamped item
        k = min(t.items, 3) - 1
        begin = t.stamps[1] if k == 0 else t.item_end(k - 1)
        return k, t.item_end(k) - begin

    teams = sorted((t for t in launch if t.items > 0), key=lambda t: last_item(t)[1])
    for t in teams[-min(8, max(1, len(teams) // 100)) :]:
        k, duration = last_item(t)
        waits = " ".join(f"{e - s}" for (kk, _), (s, e) in sorted(t.waits.items()) if kk == k)
        print(f"  slow last item: block {t.block} warp {t.warp} item {k}: {duration} ns, its waits {waits}")


def report_blocks(launch: list[Team]) -> None:
    t0 = min(t.stamps[0] for t in launch)
    blocks: dict[int, list[Team]] = defaultdict(list)
    for t in launch:
        blocks[t.block].append(t)
    order = sorted(blocks, key=lambda b: max(t.stamps[-1] for t in blocks[b]))
    for b in dict.fromkeys(order[i] for i in (len(order) // 2, -1, -2) if -len(order) <= i < len(order)):
        print(f"  block {b} (SM {blocks[b][0].sm}), us:")
        for t in sorted(blocks[b], key=lambda t: t.warp):
            ends = " ".join(f"{(t.item_end(k) - t0) / 1000:.1f}" for k in range(min(t.items, 6)))
            print(f"    warp {t.warp:2d}: prologue {(t.stamps[1] - t0) / 1000:.1f}, items end {ends}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--items-per-block", type=int, default=0)
    ap.add_argument("--items-per-pair", type=int, default=192)
    args = ap.parse_args()
    ids, launches = read(args.path)
    print(f"{len(launches)} launches of {[len(x) for x in launches]} teams")
    for i, launch in enumerate(launches[-3:]):
        print(f"launch {len(launches) - min(3, len(launches)) + i}:")
        report_launch(launch)
    if args.items_per_block and ids:
        for launch in launches[-2:]:
            print("items by the pairs their expert serves:")
            report_items(ids, launch, args.items_per_block, args.items_per_pair)
    if any(t.waits for t in launches[-1]):
        print("stage waits (ns), last launch:")
        report_waits(launches[-1])
    print("the median and the two slowest blocks of the last launch:")
    report_blocks(launches[-1])


if __name__ == "__main__":
    main()
