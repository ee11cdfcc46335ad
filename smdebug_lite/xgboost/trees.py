"""Booster trees as columns (``trees/<column>``), one row per node, like
``Booster.trees_to_dataframe()`` without pandas.

Only the trees added by one boosting round are returned: every tree of that round, which is
``num_class * num_parallel_tree`` trees for multi-class or random-forest models (smdebug dumped
only the tree whose index equalled the iteration number, wrong for both).
"""

from __future__ import annotations

import json

import numpy as np

COLUMNS = ("Tree", "Node", "ID", "Feature", "Split", "Yes", "No", "Missing", "Gain", "Cover",
           "Category")


def _round_dumps(booster, round_index: int) -> tuple[list[str], int]:
    """(JSON dumps of the trees of `round_index`, global index of its first tree)."""
    try:
        part = booster[round_index:round_index + 1].get_dump(with_stats=True, dump_format="json")
        return part, round_index * len(part)
    except Exception:  # boosters that cannot be sliced (dart in some versions): dump everything
        dumps = booster.get_dump(with_stats=True, dump_format="json")
        rounds = max(booster.num_boosted_rounds(), 1)
        per_round = max(len(dumps) // rounds, 1)
        start = round_index * per_round
        return dumps[start:start + per_round], start


def round_tree_table(booster, round_index: int | None = None) -> dict[str, np.ndarray]:
    """Columns describing every node of the trees added in `round_index` (default: the last)."""
    if round_index is None:
        round_index = booster.num_boosted_rounds() - 1
    dumps, first = _round_dumps(booster, round_index)
    rows: dict[str, list] = {c: [] for c in COLUMNS}
    for offset, text in enumerate(dumps):
        tree = first + offset
        stack = [json.loads(text)]
        while stack:
            node = stack.pop()
            stack.extend(node.get("children", ()))
            nid = int(node["nodeid"])
            rows["Tree"].append(tree)
            rows["Node"].append(nid)
            rows["ID"].append(f"{tree}-{nid}")
            rows["Cover"].append(float(node.get("cover", np.nan)))
            if "leaf" in node:
                rows["Feature"].append("Leaf")
                rows["Split"].append(np.nan)
                for key in ("Yes", "No", "Missing", "Category"):
                    rows[key].append("nan")
                rows["Gain"].append(float(node["leaf"]))  # trees_to_dataframe's convention
                continue
            rows["Feature"].append(str(node["split"]))
            condition = node.get("split_condition")
            if isinstance(condition, list):  # categorical split: the categories going "yes"
                rows["Split"].append(np.nan)
                rows["Category"].append(",".join(str(c) for c in condition))
            else:
                rows["Split"].append(float(condition))
                rows["Category"].append("nan")
            rows["Yes"].append(f"{tree}-{node['yes']}")
            rows["No"].append(f"{tree}-{node['no']}")
            rows["Missing"].append(f"{tree}-{node.get('missing', node['no'])}")
            rows["Gain"].append(float(node.get("gain", np.nan)))
    tree_ids = np.array(rows["Tree"], dtype=np.int64)
    node_ids = np.array(rows["Node"], dtype=np.int64)
    order = np.lexsort((node_ids, tree_ids))
    table = {
        "Tree": tree_ids,
        "Node": node_ids,
        "ID": np.array(rows["ID"], dtype=np.str_),
        "Feature": np.array(rows["Feature"], dtype=np.str_),
        "Split": np.array(rows["Split"], dtype=np.float64),
        "Yes": np.array(rows["Yes"], dtype=np.str_),
        "No": np.array(rows["No"], dtype=np.str_),
        "Missing": np.array(rows["Missing"], dtype=np.str_),
        "Gain": np.array(rows["Gain"], dtype=np.float64),
        "Cover": np.array(rows["Cover"], dtype=np.float64),
        "Category": np.array(rows["Category"], dtype=np.str_),
    }
    return {k: v[order] for k, v in table.items()}


__all__ = ["COLUMNS", "round_tree_table"]
