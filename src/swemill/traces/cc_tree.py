"""The ``parentUuid`` tree of a Claude Code session: main chain, rewind branches, sidechains.

Rules, in the order they apply:

- A node's parent is ``parentUuid``; when that is null and ``logicalParentUuid`` is set
  (compaction resets the parent), the logical parent is used, so the chain runs through.
- In the main group a parent that is not in the file (a quarantined line, a resumed session,
  a line an exporter lost) falls back to the node written just before: it is *reattached*
  and counted, so a lost line never splits a conversation. A file with no parent links at all (older
  logs, test data) is read as one linear conversation in file order. Otherwise a null parent
  is a root: a rewind to the very first prompt starts a second root, i.e. a branch.
- Sidechain nodes (``isSidechain``) form their own group; there a null or foreign parent
  starts a new sidechain, and each sidechain is the path to its latest leaf.
- The main chain is the path to the latest message (``user``/``assistant``, file order).
  Every other leaf is a rewind branch if its path holds an assistant turn the main chain
  lacks; otherwise it is a dead end (an interrupted tool call, a stray progress record) and
  is counted, not kept. Records hanging below the last message are neither.
"""

from __future__ import annotations

from dataclasses import dataclass

from swemill.traces.cc_messages import Node

__all__ = ["Tree", "build_tree", "Branch"]


@dataclass(slots=True)
class Branch:
    path: list[Node]
    shared: int
    """How many nodes at the start of ``path`` the branch shares with the main chain."""


@dataclass(slots=True)
class Tree:
    main: list[Node]
    branches: list[Branch]
    sidechains: list[list[Node]]
    dead_leaves: int
    dangling: int


def _parents(nodes: list[Node], main: bool) -> tuple[dict[str, str | None], int]:
    known = {n.uuid for n in nodes}
    # A log with no parent links at all is one linear conversation in file order.
    linear = main and not any(n.parent or n.logical_parent for n in nodes)
    parents: dict[str, str | None] = {}
    dangling = 0
    prev: str | None = None
    for n in nodes:
        parent = n.parent or n.logical_parent
        if parent is not None and (parent not in known or parent == n.uuid):
            dangling += 1
            parent = prev if main else None
        elif parent is None and linear:
            parent = prev
        parents[n.uuid] = parent
        prev = n.uuid
    return parents, dangling


def _leaves(nodes: list[Node], parents: dict[str, str | None]) -> list[Node]:
    has_child = {p for p in parents.values() if p is not None}
    return [n for n in nodes if n.uuid not in has_child]


def _path(leaf: Node, parents: dict[str, str | None], by_uuid: dict[str, Node]) -> list[Node]:
    out: list[Node] = []
    seen: set[str] = set()
    cur: str | None = leaf.uuid
    while cur is not None and cur not in seen:  # a malformed log can loop; stop at a repeat
        seen.add(cur)
        out.append(by_uuid[cur])
        cur = parents.get(cur)
    out.reverse()
    return out


def _climb(leaf: Node, parents: dict[str, str | None], by_uuid: dict[str, Node],
           stop: dict[str, int]) -> tuple[list[Node], int]:
    """From ``leaf`` up to the first node in ``stop`` (uuid -> index on a known path).

    Returns the nodes climbed (leaf last) and how many nodes of the known path precede them
    (0 when the climb reached a root or a loop instead). The path root -> leaf is then
    ``known[:shared] + climbed``: each leaf costs its own branch, not the whole session."""
    climbed: list[Node] = []
    seen: set[str] = set()
    cur: str | None = leaf.uuid
    while cur is not None and cur not in stop and cur not in seen:
        seen.add(cur)
        climbed.append(by_uuid[cur])
        cur = parents.get(cur)
    climbed.reverse()
    return climbed, (stop[cur] + 1 if cur is not None and cur in stop else 0)


def _has_new_turn(path: list[Node], shared: int, main_ids: set[str]) -> bool:
    return any(n.kind == "assistant" and n.uuid not in main_ids for n in path[shared:])


def _shared_prefix(a: list[Node], b: list[Node]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x is not y:
            break
        n += 1
    return n


def _conversational(n: Node) -> bool:
    return n.kind in ("user", "assistant")


def _main_group(nodes: list[Node]) -> tuple[list[Node], list[Branch], int, int]:
    talk = [n for n in nodes if _conversational(n)]
    if not talk:
        return [], [], 0, 0
    parents, dangling = _parents(nodes, main=True)
    by_uuid = {n.uuid: n for n in nodes}
    # The main chain ends at the latest message; records after it (hook or timing notes,
    # a late progress line on an older node) add nothing and must not pick the chain.
    latest = max(talk, key=lambda n: n.order)
    main = _path(latest, parents, by_uuid)
    on_main = {n.uuid: i for i, n in enumerate(main)}
    branches, dead = [], 0
    for leaf in sorted(_leaves(nodes, parents), key=lambda n: n.order):
        climbed, shared = _climb(leaf, parents, by_uuid, on_main)
        if shared == len(main):
            continue  # a tail below the last message, not a branch
        if _has_new_turn(climbed, 0, set()):  # climbed nodes are never on the main chain
            branches.append(Branch(main[:shared] + climbed, shared))
        else:
            dead += 1
    return main, branches, dead, dangling


def _sidechains(nodes: list[Node]) -> tuple[list[list[Node]], int]:
    """Per sidechain root, the path to its latest message; other ends count as dead."""
    parents, _ = _parents(nodes, main=False)
    by_uuid = {n.uuid: n for n in nodes}
    roots = _roots(nodes, parents)
    latest: dict[str, Node] = {}
    for node in sorted((n for n in nodes if _conversational(n)), key=lambda n: n.order):
        latest[roots[node.uuid]] = node
    best_by_root = {root: _path(node, parents, by_uuid) for root, node in latest.items()}
    index_by_root = {root: _index(path) for root, path in best_by_root.items()}
    dead = 0
    for leaf in _leaves(nodes, parents):
        root = roots[leaf.uuid]
        best = best_by_root.get(root)
        if best is None:
            continue
        climbed, shared = _climb(leaf, parents, by_uuid, index_by_root[root])
        if shared < len(best):
            dead += _has_new_turn(climbed, 0, set())
    ordered = sorted(best_by_root.values(), key=lambda p: p[0].order)
    return ordered, dead


def _index(path: list[Node]) -> dict[str, int]:
    return {n.uuid: i for i, n in enumerate(path)}


def _roots(nodes: list[Node], parents: dict[str, str | None]) -> dict[str, str]:
    """Each node's root (the first node of its path), each chain walked once."""
    root: dict[str, str] = {}
    for node in nodes:
        chain: list[str] = []
        seen: set[str] = set()
        cur: str | None = node.uuid
        while cur is not None and cur not in root and cur not in seen:
            seen.add(cur)
            chain.append(cur)
            cur = parents.get(cur)
        # a loop: its last node stands in for the root, as _path's stop at a repeat does
        top = root[cur] if cur is not None and cur in root else chain[-1]
        for uuid in chain:
            root[uuid] = top
    return root


def build_tree(nodes: list[Node], all_sidechain: bool = False) -> Tree:
    """Split a file's nodes into the main chain, its branches and the inline sidechains.

    ``all_sidechain``: the file is a sub-agent's own log, so its sidechain flags describe
    the file as a whole and its nodes are read as one main group.
    """
    if all_sidechain:
        main_nodes, side_nodes = nodes, []
    else:
        main_nodes = [n for n in nodes if not n.sidechain]
        side_nodes = [n for n in nodes if n.sidechain]
    main, branches, dead, dangling = _main_group(main_nodes)
    sidechains, side_dead = _sidechains(side_nodes) if side_nodes else ([], 0)
    return Tree(main, branches, sidechains, dead + side_dead, dangling)
