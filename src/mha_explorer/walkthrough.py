"""The walkthrough in the terminal: one query through every stage, as rich tables."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

import numpy as np
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .narrative import page_stages
from .trace import Trace


def fmt(v: float, digits: int = 2) -> str:
    """Round half away from zero on the exact binary value, as JavaScript's toFixed does."""
    if v == -np.inf:
        return "-inf"
    s = str(Decimal(float(v)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))
    return s[1:] if s.startswith("-") and not s.strip("-0.") else s


def vec(a: np.ndarray, digits: int = 2) -> str:
    return "[" + ", ".join(fmt(v, digits) for v in a) + "]"


def dot_terms(a: np.ndarray, b: np.ndarray) -> str:
    return " + ".join(f"{fmt(x)}×{fmt(y)}" for x, y in zip(a, b))


def render(t: Trace, tokens: list[str], query: int, heads: list[int], stage: str | None, console: Console) -> None:
    c = t.config
    console.print(
        f"[bold]Multi-head attention[/] · {c.kind} · d_model={c.d_model}, n_heads={c.n_heads}, "
        f"n_kv_heads={c.n_kv_heads}, d_head={c.d_head}, d_v={c.d_v}"
        + (", causal" if c.causal else "")
        + f" · query [bold]{tokens[query]}[/] (position {query})"
    )
    for s in page_stages(c):
        if stage is None or stage == s.id:
            body = _STAGE_VIEWS[s.id](t, tokens, query, heads)
            console.print(Panel(Group(Text(s.explanation, style="dim"), *body), title=f"[bold]{s.title}[/]"))


def _projections(t, tokens, i, heads):
    out = []
    for h in heads:
        g = t.config.kv_group[h]
        table = Table(title=f"head {h}" + (f" (K/V head {g})" if t.config.n_kv_heads != t.config.n_heads else ""))
        for col in ("token", "x", "q = x W^Q", "k = x W^K", "v = x W^V"):
            table.add_column(col)
        for j, tok in enumerate(tokens):
            q = vec(t["q"][h, j]) if j == i else ""
            style = "bold" if j == i else None
            table.add_row(Text(tok), vec(t["x"][j]), q, vec(t["k"][g, j]), vec(t["v"][g, j]), style=style)
        out.append(table)
    return out


def _scores(t, tokens, i, heads):
    out = []
    for h in heads:
        g = t.config.kv_group[h]
        table = Table(title=f"head {h}: q·k_j, then ÷√{t.config.d_head}")
        for col in ("key", "q·k_j as a sum of products", "score", "scaled"):
            table.add_column(col)
        for j, tok in enumerate(tokens):
            terms = dot_terms(t["q"][h, i], t["k"][g, j])
            table.add_row(Text(tok), terms, fmt(t["scores"][h, i, j]), fmt(t["scaled"][h, i, j]))
        out.append(table)
    return out


def _mask(t, tokens, i, heads):
    table = Table(title="keys after the query are masked")
    for col in ("key", "position", "visible", *(f"head {h} masked score" for h in heads)):
        table.add_column(col)
    for j, tok in enumerate(tokens):
        visible = "yes" if j <= i else "no (masked)"
        table.add_row(Text(tok), str(j), visible, *(fmt(t["mask"][h, i, j]) for h in heads))
    return [table]


def _weights(t, tokens, i, heads):
    table = Table(title="softmax over keys (each head's column sums to 1)")
    table.add_column("key")
    for h in heads:
        table.add_column(f"head {h}")
        table.add_column("")
    for j, tok in enumerate(tokens):
        cells = []
        for h in heads:
            w = t["weights"][h, i, j]
            cells += [fmt(w), "█" * int(round(w * 20))]
        table.add_row(Text(tok), *cells)
    table.add_row("sum", *sum(([fmt(t["weights"][h, i].sum()), ""] for h in heads), []), style="dim")
    return [table]


def _mixing(t, tokens, i, heads):
    out = []
    for h in heads:
        g = t.config.kv_group[h]
        terms = " + ".join(f"{fmt(t['weights'][h, i, j])}×{vec(t['v'][g, j])}" for j in range(len(tokens)))
        out.append(Text(f"head {h}: z_{h} = {terms}\n        = {vec(t['z'][h, i])}"))
    return out


def _concat(t, tokens, i, heads):
    z = " | ".join(f"z_{h} = {vec(t['z'][h, i])}" for h in range(t.config.n_heads))
    return [Text(f"{z}\nconcat = {vec(t['concat'][i])}")]


def _output(t, tokens, i, heads):
    table = Table(title="each head's contribution to each output component")
    table.add_column("")
    for m in range(t.config.d_model):
        table.add_column(f"y[{m}]")
    for h in range(t.config.n_heads):
        table.add_row(f"head {h}", *(fmt(v) for v in t["contributions"][h, i]))
    table.add_row("output y", *(fmt(v) for v in t["output"][i]), style="bold")
    return [table]


_STAGE_VIEWS = {
    "projections": _projections,
    "scores": _scores,
    "mask": _mask,
    "weights": _weights,
    "mixing": _mixing,
    "concat": _concat,
    "output": _output,
}
