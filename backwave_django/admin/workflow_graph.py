"""The workflow page's graph: members laid out in columns by topological depth, for an inline SVG.

Pure layout, no database: the page reads the members and edges, this places them. A member goes in
the column of its depth (0 without parents, else one more than its deepest parent), and within a
column members are ordered by the mean row of their parents (then by topological order), which
keeps most edges short and uncrossed without a layout library. Coordinates are integers; the
template draws them and escapes every text.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..core.states import JobState
from ..core.workflows import topological_depths
from .display import STATE_TONES, short_job_id

NODE_WIDTH = 196
NODE_HEIGHT = 46
COLUMN_GAP = 56
ROW_GAP = 14
PADDING = 12
#: Characters of a wire name that fit on a node (the full name is in its tooltip).
NAME_CHARACTERS = 26
#: A state pill's width per character of its label, plus its padding (the SVG has no text metrics).
PILL_CHARACTER = 6.6
PILL_PADDING = 12


@dataclass(frozen=True, slots=True)
class Member:
    """One member as the page read it."""

    pk: int
    job_id: uuid.UUID
    wire_name: str
    state: JobState


@dataclass(frozen=True, slots=True)
class Node:
    member: Member
    url: str
    column: int
    row: int
    x: int
    y: int

    @property
    def name(self) -> str:
        name = self.member.wire_name
        return name if len(name) <= NAME_CHARACTERS else name[: NAME_CHARACTERS - 1] + "…"

    @property
    def label(self) -> str:
        return str(self.member.state.label)

    @property
    def pascal(self) -> str:
        return self.member.state.pascal

    @property
    def tone(self) -> str:
        return STATE_TONES[self.member.state]

    @property
    def short_id(self) -> str:
        """The random end of the id, as everywhere in the console: the start is the enqueue time,
        the same for members enqueued together."""
        return short_job_id(self.member.job_id)

    @property
    def pill_width(self) -> int:
        return round(len(self.label) * PILL_CHARACTER) + PILL_PADDING

    # Positions inside the node, for the template.
    @property
    def text_x(self) -> int:
        return self.x + 12

    @property
    def name_y(self) -> int:
        return self.y + 18

    @property
    def pill_y(self) -> int:
        return self.y + 25

    @property
    def pill_text_x(self) -> int:
        return self.text_x + PILL_PADDING // 2

    @property
    def pill_text_y(self) -> int:
        return self.y + 37

    @property
    def id_x(self) -> int:
        return self.text_x + self.pill_width + 8


@dataclass(frozen=True, slots=True)
class Edge:
    parent: uuid.UUID
    child: uuid.UUID
    #: An SVG path: a cubic curve from the parent's right side to the child's left side.
    path: str


@dataclass(frozen=True, slots=True)
class Graph:
    width: int
    height: int
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    columns: int
    node_width: int = NODE_WIDTH
    node_height: int = NODE_HEIGHT


def layout(
    members: Sequence[Member],
    parents: Mapping[uuid.UUID, Sequence[uuid.UUID]],
    urls: Mapping[uuid.UUID, str],
) -> Graph:
    """Place ``members`` (in topological order) and the edges from ``parents`` between them."""
    order = [member.job_id for member in members]
    by_id = {member.job_id: member for member in members}
    depth = topological_depths(order, parents)
    columns: dict[int, list[uuid.UUID]] = {}
    rank = {job_id: index for index, job_id in enumerate(order)}
    row_of: dict[uuid.UUID, int] = {}
    for column in range(max(depth.values(), default=-1) + 1):
        wanted = [job_id for job_id in order if depth[job_id] == column]

        def weight(job_id: uuid.UUID) -> tuple[float, int]:
            rows = [row_of[p] for p in parents.get(job_id, ()) if p in row_of]
            return (sum(rows) / len(rows) if rows else -1.0, rank[job_id])

        wanted.sort(key=weight)
        for row, job_id in enumerate(wanted):
            row_of[job_id] = row
        columns[column] = wanted
    nodes = {
        job_id: Node(
            member=by_id[job_id],
            url=urls[job_id],
            column=depth[job_id],
            row=row_of[job_id],
            x=PADDING + depth[job_id] * (NODE_WIDTH + COLUMN_GAP),
            y=PADDING + row_of[job_id] * (NODE_HEIGHT + ROW_GAP),
        )
        for job_id in order
    }
    edges = []
    for child in order:
        for parent in dict.fromkeys(parents.get(child, ())):
            if parent not in nodes:
                continue
            start, end = nodes[parent], nodes[child]
            x1, y1 = start.x + NODE_WIDTH, start.y + NODE_HEIGHT // 2
            x2, y2 = end.x - 2, end.y + NODE_HEIGHT // 2
            bend = max((x2 - x1) // 2, 16)
            path = f"M{x1} {y1} C{x1 + bend} {y1} {x2 - bend} {y2} {x2} {y2}"
            edges.append(Edge(parent=parent, child=child, path=path))
    width = PADDING * 2 + len(columns) * NODE_WIDTH + max(len(columns) - 1, 0) * COLUMN_GAP
    tallest = max((len(column) for column in columns.values()), default=0)
    height = PADDING * 2 + tallest * NODE_HEIGHT + max(tallest - 1, 0) * ROW_GAP
    return Graph(
        width=width,
        height=height,
        nodes=tuple(nodes[job_id] for job_id in order),
        edges=tuple(edges),
        columns=len(columns),
    )
