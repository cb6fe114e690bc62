"""The walkthrough in the terminal: one query through every stage, as rich tables."""

from __future__ import annotations

import math
import re
import sys
import textwrap
from decimal import ROUND_HALF_UP, Decimal
from functools import partial

import numpy as np
from rich import box
from rich.cells import cell_len
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.markup import escape
from rich.text import Span, Text

from .narrative import page_stages
from .trace import Trace, hidden_keys
from .weights import AttentionWeights


# What a terminal that cannot show the walkthrough's signs (a Windows code page, ASCII) shows instead
ASCII_SIGNS = {
    "·": ".", "′": "'", "×": "x", "÷": "/", "−": "-", "–": "-", "…": "...", "√": "sqrt", "θ": "theta", "Σ": "sum",
    "∞": "inf", "ε": "eps", "␣": "_", "↵": "\\n", "⇥": "\\t", "ᴼ": "^O", "²": "^2", "₀": "_0", "█": "#", "“": '"', "”": '"',
    "\u0302": "^", "\u0303": "~", "Ġ": "G",  # the marks of q̂ (normed) and q̃ (rotated); a GPT-2 space mark
}


ALL_SPELLED = str.maketrans(ASCII_SIGNS)  # every sign spelled, as an output of none of them shows them
ROOT = re.compile(r"√([A-Za-z0-9_]+)")  # a square root of a number or a name: "÷√64" spelled "/sqrt(64)", not "/sqrt64"


def spell(text: str, spelling: dict[int, str]) -> str:
    """text with its signs spelled out as spelling says (a square root's operand in brackets)."""
    if ord("√") in spelling:
        text = ROOT.sub(r"sqrt(\1)", text)
    return text.translate(spelling)


def spelling(console: Console) -> dict[int, str]:
    """How the console spells the signs of ASCII_SIGNS its encoding lacks (ASCII, a Windows code
    page): a table for str.translate, empty where it has them all."""
    return str.maketrans({sign: spelled for sign, spelled in ASCII_SIGNS.items() if not _writes(console, sign)})


def spelled(part, spelling: dict[int, str]):
    """A table, text or string with its signs spelled out as spelling says; a table in place.
    Spelled before the table is measured and laid out: spelled after, a spelling longer than its
    sign ("…" as "...") would push the cell's border out of line."""
    if isinstance(part, Table):
        for column in part.columns:
            column.header = spelled(column.header, spelling)
            column._cells = [spelled(cell, spelling) for cell in column._cells]
        part.title, part.caption = spelled(part.title, spelling), spelled(part.caption, spelling)
        return part
    if isinstance(part, Text):
        out = Text(style=part.style, justify=part.justify, overflow=part.overflow, no_wrap=part.no_wrap, end=part.end)
        # cut where a style begins or ends, so that each piece keeps its styles whole
        for piece in part.divide(sorted({at for span in part.spans for at in (span.start, span.end)})):
            word = spell(piece.plain, spelling)
            out.append(Text(word, spans=[Span(0, len(word), span.style) for span in piece.spans]))
        return out
    return spell(part, spelling) if isinstance(part, str) else part


def add_column(table: Table, header: str, **options) -> None:
    """table.add_column; where the output cannot show the header's signs, wide enough for the
    header's longest line as they are spelled there (ASCII_SIGNS: "÷ Σ e^s" as "/ sum e^s")."""
    try:
        header.encode(getattr(sys.stdout, "encoding", None) or "utf-8")
        shown = True
    except (UnicodeEncodeError, LookupError):
        shown = False
    lines = header.split("\n")  # (measured whole, "q·k_j as a sum of products\n(64 products)" made a column of 40, past the panel)
    spelled = max(len(spell(line, ALL_SPELLED)) for line in lines)
    table.add_column(header, min_width=None if shown or spelled <= max(map(cell_len, lines)) else spelled, **options)


# Vectors wider than this (real layers: d_model in the hundreds) show their first three numbers and a count.
MAX_SHOWN = 8
# Beyond this many tokens a table of one query's keys lists the keys that matter most (TOP_KEYS of
# each head) and counts the rest, as the page does: a 512-token text would be thousands of lines.
MANY_TOKENS = 24
TOP_KEYS = 8
PANEL_EDGES = 4  # a stage's panel takes a border and a space on each side


HUGE = 1e6  # from here on a number shows its power of ten
SMALL_D_MODEL = 16  # up to this d_model, y is checked as the sum of the rows shown (as on the page)


def fmt(v: float, digits: int = 2) -> str:
    """Round half away from zero on the exact binary value, as JavaScript's toFixed does. From a
    million on, as the page does: three significant digits and the power of ten (3.00e98)."""
    if v == -np.inf:
        return "−∞"  # as the page writes a masked score
    if abs(v) >= HUGE:
        exact = Decimal(float(v))
        power = exact.adjusted()
        mantissa = exact.scaleb(-power).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
        if abs(mantissa) >= 10:  # 9.995e6 rounds up to 10.00e6
            mantissa, power = (mantissa / 10).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP), power + 1
        return f"{mantissa}e{power}"
    s = str(Decimal(float(v)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))
    return s[1:] if s.startswith("-") and not s.strip("-0.") else s


def as_shown(v: float) -> Decimal | None:
    """The number a person reads off a table: v to two decimals, exactly; None for one shown with
    its power of ten (a million or more) or a masked -inf, which a hand check does not use."""
    shown = fmt(v)
    return None if "e" in shown or "∞" in shown else Decimal(shown)


def hand_sum(terms) -> str | None:
    """A result worked out from numbers as shown (Decimals, or None for one that cannot be read
    off), rounded as a person rounds it: exactly, then half away from zero, as the page's notes do."""
    terms = list(terms)
    if any(x is None for x in terms):
        return None
    shown = str(sum(terms, Decimal(0)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))  # 0.235 is 0.24
    return shown[1:] if shown == "-0.00" else shown


def dot_by_hand(a: np.ndarray, b: np.ndarray) -> str | None:
    """a·b worked out from a's and b's numbers as shown."""
    pairs = [(as_shown(x), as_shown(y)) for x, y in zip(a, b)]
    return None if any(x is None or y is None for x, y in pairs) else hand_sum(x * y for x, y in pairs)


def worked_note(misses: list[tuple[str, str | None, str]]) -> str | None:
    """Where a hand check from the numbers shown lands off the number shown, as the page says it:
    each miss is (what, worked from the numbers shown, shown); None when every check lands."""
    off = [f"{what} comes to {hand} (shown: {shown})" for what, hand, shown in misses if hand not in (None, shown) and "e" not in shown]
    return f"Each result is worked out from the full numbers; from the rounded numbers shown, {'; '.join(off)}." if off else None


def noted(misses: list[tuple[str, str | None, str]]) -> list[Text]:
    """worked_note(misses) as a line to print under its table, if any."""
    note = worked_note(misses)
    return [Text(note, style="dim")] if note else []


def vec(a: np.ndarray, digits: int = 2, lead: int = 3, count: bool = True) -> str:
    """A vector, whole when short; else its first `lead` numbers and, with count, how many it has
    (a table's header says that once: see counted())."""
    if len(a) > MAX_SHOWN:
        return "[" + ", ".join(fmt(v, digits) for v in a[:lead]) + ", …]" + (f" ({len(a)} numbers)" if count else "")
    return "[" + ", ".join(fmt(v, digits) for v in a) + "]"


def counted(header: str, n: int, what: str = "numbers") -> str:
    """A column's header, with how many numbers its vectors have when they are long: their
    cells show the first few (vec(count=False)), the header says it once, on a line of its own."""
    return header if n <= MAX_SHOWN else f"{header}\n({n} {what})"


def fitted(build, fits) -> Table:
    """build(lead), a table whose long vectors show their first `lead` numbers, with the most
    numbers (3, 2 or 1) that keep it within the terminal, so that no vector breaks across lines."""
    for lead in (3, 2):
        table = build(lead)
        if fits(table):
            return table
    table = build(1)
    if not fits(table):  # the headers set the width: "(64 numbers)" becomes "(64)", so as not to be cut
        for column in table.columns:
            if isinstance(column.header, str):
                column.header = re.sub(r"\((\d+) numbers\)$", r"(\1)", column.header)
    return table


def factor(x: float) -> str:
    """A factor of a written product as a person writes it: a negative one in brackets, "0.50×(-1.25)"."""
    shown = fmt(x)
    return f"({shown})" if shown.startswith("-") else shown


def dot_terms(a: np.ndarray, b: np.ndarray, lead: int = 3) -> str:
    """a·b as its products, whole when short; else the first `lead` (the header counts them)."""
    terms = [f"{factor(x)}×{factor(y)}" for x, y in zip(a[:MAX_SHOWN], b[:MAX_SHOWN])]
    if len(a) > MAX_SHOWN:
        return " + ".join(terms[:lead]) + " + …"
    return " + ".join(terms)


def named(tokens: list[str], j: int) -> Text:
    """Token j as the tables name it: with its position when the text has it more than once
    ("the @4"), as the page names it, and in any text too long to list whole, whose tables list
    a few keys out of text order ("ota @17": a piece of a word is no name of its own)."""
    return Text(tokens[j] if tokens.count(tokens[j]) == 1 and len(tokens) <= MANY_TOKENS else f"{tokens[j]} @{j}")


def top_keys(n: int, ranked: list[np.ndarray], top: int = TOP_KEYS, keep: tuple[int, ...] = ()) -> list[int]:
    """Every key of a short text, in text order; of a long one, those among the `top` largest of
    each array in ranked (a head's row of scores or weights, -inf or 0 where the mask hides a key),
    and keep. Of one array they come as its title says, keep first, then the largest first; of
    several (heads side by side), in text order."""
    if n <= MANY_TOKENS:
        return list(range(n))
    largest = [[int(j) for j in np.argsort(-values, kind="stable")[:top] if values[j] > -np.inf] for values in ranked]
    if len(ranked) == 1:
        return list(keep) + [j for j in largest[0] if j not in keep]
    return sorted(set(keep).union(*largest))


def weighed_most(t: Trace, i: int, h: int) -> list[int]:
    """The rows of a table of query i's tokens under head h: every token of a short text; of a long
    one, the query and the TOP_KEYS keys it weighs most (a masked key never among them)."""
    n = t["weights"].shape[-1]
    seen = np.where(hidden_keys(n, t.config)[i], -np.inf, t["weights"][h, i])  # (n,)
    return top_keys(n, [seen], keep=(i,))


def left_out(table: Table, n: int, shown: list[int], what: str, hidden: np.ndarray | None = None, masked: str = "masked") -> None:
    """Under a table that lists some keys of a long text: how many it leaves out (a caption, not a
    row, so that the sentence does not set the width of the first column), and with hidden (n,)
    the query's hidden keys, how many of those are `masked`."""
    if len(shown) < n:
        hidden_left = 0 if hidden is None else int(hidden.sum()) - int(hidden[shown].sum())
        table.caption = Text(f"… {n - len(shown)} other {what}" + (f", {hidden_left} of them {masked}" if hidden_left else ""), style="dim")
        table.caption_justify = "left"


def final_qk(t: Trace) -> tuple[np.ndarray, np.ndarray]:
    """The q and k the scores were taken from: after the q/k norm and RoPE when the layer has them."""
    for q_name, k_name in (("q_rotated", "k_rotated"), ("q_normed", "k_normed"), ("q", "k")):
        if q_name in t.stages:
            return t[q_name], t[k_name]
    raise KeyError("q")


def _features(c) -> list[str]:
    """What the layer has beyond plain attention."""
    parts = ["causal"] if c.causal else []
    if c.sliding_window is not None:
        parts.append(f"sliding window {c.sliding_window}")
    if c.qk_norm:
        parts.append("q/k norm")
    if c.rope_theta is not None:
        parts.append(f"RoPE θ={c.rope_theta:.10g}")
    if c.scale is not None:
        parts.append(f"scale {c.scale:.6g}")
    return parts


def render(
    t: Trace,
    tokens: list[str],
    query: int,
    heads: list[int],
    stage: str | None,
    console: Console,
    weights: AttentionWeights | None = None,
) -> None:
    """Print the walkthrough. weights: the layer's, needed when it has biases (they are shown)."""
    c = t.config
    if c.bias and weights is None:
        raise ValueError("this layer has biases: pass its weights so that the walkthrough shows them")
    # the kind and features, then the widths: each list on a line of its own where one line would
    # not hold them (a Gemma 3 layer's at 80 columns), never cut in the middle
    title, features = f"Multi-head attention · {c.kind}", " · ".join(_features(c))
    if features and len(f"{title} · {features}") <= console.width:
        title, features = f"{title} · {features}", ""
    console.print(f"[bold]{title}[/]")
    if features:
        console.print(features)
    console.print(f"d_model={c.d_model}, n_heads={c.n_heads}, n_kv_heads={c.n_kv_heads}, d_head={c.d_head}, d_v={c.d_v}")
    # as the tables name it (the position says what @ means); a line of its own: never cut in two. A
    # trace given positions of its own (RoPE's) tells them from the token's place in the text
    at = f"position {query}" if t.position(query) == query else f"token {query} of the text, at position {t.position(query)}"
    console.print(f"query [bold]{escape(named(tokens, query).plain)}[/] ({at})")
    spell = spelling(console)  # (each sign the stream lacks, spelled out as it would spell it)
    fits = partial(_fits, console, console.width - PANEL_EDGES, spell)
    views = {name: partial(view, fits=fits) for name, view in _STAGE_VIEWS.items()}
    for name in ("projections", "qk_norm", "output"):
        views[name] = partial(views[name], weights=weights)
    # a terminal that cannot write every superscript (ASCII; cp1252 has ¹²³ only) gets 10^-2, not 10⁻² in pieces
    views["weights"] = partial(views["weights"], superscripts=_writes(console, "⁰¹²³⁴⁵⁶⁷⁸⁹⁻"))
    for s in page_stages(c):
        if stage is None or stage == s.id:
            body = views[s.id](t, tokens, query, heads)
            if console.width < NARROW:  # (as fits measured them)
                body = [_unruled(part) if isinstance(part, Table) else part for part in body]
            explanation = Text(s.explanation.replace("Wᴼ", "W^O").replace("bᴼ", "b^O"), style="dim")  # as the tables write them
            if spell:
                explanation, body = spelled(explanation, spell), [spelled(part, spell) for part in body]
            console.print(Panel(Group(explanation, *body), title=f"[bold]{s.title}[/]"))
    softmax_printed = stage in (None, "weights") and len(tokens) <= MAX_SHOWN  # as _weights() prints it
    by_hand = " (only the softmax by hand takes e^s of the scores as shown)" if softmax_printed else ""
    print_wrapped(
        console,
        f"Numbers show two decimals, a half rounded away from zero (−0.625 shows as −0.63); every result is worked out from the full numbers{by_hand}, so a sum or product"
        " of the shown decimals may land a little off the shown result: 0.01 or so, more when many numbers are added.",
        style="dim",
    )


def _writes(console: Console, signs: str) -> bool:
    """Whether the console's encoding has every one of signs."""
    try:
        signs.encode(console.encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def print_wrapped(console: Console, text: str, style: str | None = None) -> None:
    """Plain text wrapped to the terminal's width, no line ending in a space (rich leaves one at
    each break, which a copied line keeps); its signs spelled first where the output lacks them
    (θ as theta: wrapped before, a line grew past the width)."""
    for line in textwrap.wrap(spell(text, spelling(console)), width=console.width) or [""]:
        console.print(Text(line, style=style), soft_wrap=True)


NARROW = 80  # a terminal narrower than this draws its tables without vertical rules


def _unruled(table: Table) -> Table:
    """A table without vertical rules or outer padding: four columns narrower (its outer rules and
    padding), so that a 60-column terminal breaks no vector in two."""
    table.box, table.show_edge, table.pad_edge = box.SIMPLE_HEAD, False, False
    return table


def _fits(console: Console, width: int, spell: dict[int, str], table) -> bool:
    """Whether the table (or text) shows in width columns without squeezing a cell: its natural
    width (which rich clamps to the room it is offered, here one column more) is at most width.
    A table's min_width, which keeps its title on one line where there is room, is left out: the
    title wraps where there is not. spell: its signs spelled out first, as they will be printed."""
    if spell:
        table = spelled(table, spell)
    if isinstance(table, Table) and console.width < NARROW:
        _unruled(table)  # as it will be drawn
    keep = getattr(table, "min_width", None)
    if keep is not None:
        table.min_width = None
    try:
        return console.measure(table, options=console.options.update_width(width + 1)).maximum <= width
    finally:
        if keep is not None:
            table.min_width = keep


def _projections(t, tokens, i, heads, weights: AttentionWeights | None, fits):
    """weights: the layer's. A small layer's W^Q, W^K and W^V are shown, so that every product can be
    checked; biases are added to x W and shown in a last row. x stands beside each head's q, k and
    v when that fits the terminal; else once, in a table of its own above the heads' (every head
    projects the same x)."""
    c = t.config
    small = weights is not None and c.d_model <= MAX_SHOWN
    bias = weights if c.bias else None
    formulas = [f"{n} = x W^{n.upper()}" + (f" + b^{n.upper()}" if bias is not None else "") for n in "qkv"]
    first: dict[int, int] = {}  # K/V head -> the query head whose table shows its k and v
    for h in heads:
        first.setdefault(c.kv_group[h], h)
    n = len(tokens)
    rows = {h: weighed_most(t, i, h) for h in first.values()}  # the tokens each full table lists

    def head_table(h: int, lead: int, with_x: bool) -> Table:
        g = c.kv_group[h]
        title = (f"head {h}" + (f" (K/V head {g})" if c.n_kv_heads != c.n_heads else "")
                 + ("" if len(rows[h]) == n else f": the query and the {TOP_KEYS} keys it weighs most"))
        table = Table(title=title)
        add_column(table, "token")
        if with_x:
            add_column(table, counted("x", c.d_model))
        for col, n_numbers in zip(formulas, (c.d_head, c.d_head, c.d_v)):
            add_column(table, counted(col, n_numbers))
        shown = partial(vec, lead=lead, count=False)
        for j in rows[h]:
            cells = [shown(t["x"][j])] if with_x else []
            cells += [shown(t["q"][h, j]) if j == i else "", shown(t["k"][g, j]), shown(t["v"][g, j])]
            table.add_row(named(tokens, j), *cells, style="bold" if j == i else None)
        left_out(table, n, rows[h], "tokens")
        if bias is not None:
            table.add_row("bias", *([""] if with_x else []), shown(bias.b_Q[h]), shown(bias.b_K[g]), shown(bias.b_V[g]), style="dim")
        return table

    def x_table(lead: int) -> Table:
        listed = sorted(set().union(*rows.values()))
        title = "x, every head's input" + ("" if len(listed) == n else ": the tokens the tables below list")
        table = Table(title=title, min_width=len(title) + 4)
        add_column(table, "token")
        add_column(table, counted("x", c.d_model))
        for j in listed:
            table.add_row(named(tokens, j), vec(t["x"][j], lead=lead, count=False), style="bold" if j == i else None)
        left_out(table, n, listed, "tokens")
        return table

    with_x = all(fits(head_table(h, 3, True)) for h in rows)
    out = [] if with_x else [fitted(x_table, fits)]
    for h in heads:
        g = c.kv_group[h]
        if first[g] == h:
            out.append(head_table(h, 3, True) if with_x else fitted(lambda lead: head_table(h, lead, False), fits))
        else:  # GQA, MQA: another query head of a K/V head shown already: its q alone
            title = f"head {h} (K/V head {g}): its q; " + (f"x, k and v are head {first[g]}'s above" if with_x else f"k and v are head {first[g]}'s above, x in its own table")
            table = Table(title=title, min_width=len(title) + 2)
            add_column(table, "token")
            add_column(table, formulas[0])
            table.add_row(named(tokens, i), vec(t["q"][h, i]), style="bold")
            if bias is not None:
                table.add_row("bias", vec(bias.b_Q[h]), style="dim")
            out.append(table)
        if small:
            out.append(_weights_of(weights, h, g, shared=first[g] != h))
    return out


def _weights_of(weights: AttentionWeights, h: int, g: int, shared: bool) -> Table:
    """Row m of head i's W^Q (and of its K/V head's W^K and W^V): x times these gives q, k and v."""
    names = ("W^Q",) if shared else ("W^Q", "W^K", "W^V")
    if shared:
        title = f"head {h}'s W^Q: row m multiplies x[m]"
    elif h == g:
        title = f"head {h}'s W^Q, W^K, W^V: row m multiplies x[m]"
    else:
        title = f"head {h}'s W^Q, and W^K, W^V of its K/V head {g}: row m multiplies x[m]"
    table = Table(title=Text(title), min_width=len(title) + 4)
    for col in ("m", *names):
        add_column(table, col)
    for m in range(weights.W_Q.shape[1]):
        rows = (weights.W_Q[h, m], weights.W_K[g, m], weights.W_V[g, m])[: len(names)]
        table.add_row(str(m), *(vec(r) for r in rows))
    return table


def kv_tables(t, i, heads):
    """Each head of a stage that shows q and k, with its K/V head g, the query head whose table
    shows g's k (itself, unless one came before), and the tokens its table lists: the query alone
    when another head shows the k, else the query and the keys it weighs most."""
    first: dict[int, int] = {}  # K/V head -> the query head whose table shows its k (as _projections)
    for h in heads:
        g = t.config.kv_group[h]
        owner = first.setdefault(g, h)
        yield h, g, owner, [i] if owner != h else weighed_most(t, i, h)


def kv_title(title: str, h: int, owner: int, rows: list[int], n: int, t) -> str:
    """A kv_tables() table's title: where its k is, or which tokens it lists; whose k it is where
    query heads share K/V heads (GQA, MQA): head 4's k is K/V head 1's."""
    if owner != h:
        return f"{title}; k as head {owner}'s above"
    if t.config.n_kv_heads < t.config.n_heads:
        title += f"; k of K/V head {t.config.kv_group[h]}"
    return title + ("" if len(rows) == n else f": the query and the {TOP_KEYS} keys it weighs most")


def q_and_k(build, fits, shared: bool) -> list[Table]:
    """build(lead, part), fitted: q's and k's columns side by side in one table; where the terminal
    is too narrow for that even with one number per vector, q's and k's as two tables, so that no
    number is cut."""
    table = fitted(partial(build, part="qk"), fits)
    if shared or fits(table):
        return [table]
    return [fitted(partial(build, part=part), fits) for part in ("q", "k")]


def _qk_norm(t, tokens, i, heads, fits, weights: AttentionWeights | None = None):
    """q and k before and after the norm; for the query, rms(q) (with ε) too, for every key rms(k),
    and under the tables the learned multipliers w^q and w^k, so that q normed = q ÷ rms(q) × w^q
    (and k normed = k ÷ rms(k) × w^k) can be checked."""
    eps = t.config.qk_norm_eps
    n = len(tokens)
    out = []
    for h, g, owner, rows in kv_tables(t, i, heads):
        shared = owner != h

        def table_of(lead: int, part: str, h=h, g=g, owner=owner, shared=shared, rows=rows) -> Table:
            title = f"head {h}{'' if part == 'qk' else ', ' + part}: each row ÷ its root mean square, × the learned weights"
            title = kv_title(title, h, owner, rows, n, t) if part != "q" else title
            table = Table(title=title, min_width=len(title) + 4)
            with_q, with_k = "q" in part, "k" in part and not shared
            for col in ("token",) + (("q", "rms(q)", "q normed") if with_q else ()) + (("k", "rms(k)", "k normed") if with_k else ()):
                add_column(table, col if col in ("token", "rms(q)", "rms(k)") else counted(col, t.config.d_head))
            shown = partial(vec, lead=lead, count=False)
            rms = lambda x: fmt(float(np.sqrt(np.mean(np.square(x, dtype=np.float64)) + eps)), 3)  # noqa: E731
            for j in rows if with_k else [i]:
                q = ((shown(t["q"][h, j]), rms(t["q"][h, j]), shown(t["q_normed"][h, j])) if j == i else ("", "", "")) if with_q else ()
                k = (shown(t["k"][g, j]), rms(t["k"][g, j]), shown(t["k_normed"][g, j])) if with_k else ()
                table.add_row(named(tokens, j), *q, *k, style="bold" if j == i else None)
            if with_k:
                left_out(table, n, rows, "tokens")
            return table

        out += q_and_k(table_of, fits, shared)
    if weights is not None and weights.q_norm is not None:
        eps_shown = np.format_float_positional(float(f"{eps:.6g}"))  # as the page: 1e-6 read from a float32 file is 9.99999997e-7
        # a line each, so that no vector breaks across lines
        out.append(Text(f"learned multipliers, shared by every head:\n  w^q = {vec(weights.q_norm)}\n  w^k = {vec(weights.k_norm)}\n  ε = {eps_shown}"))
    return out


def _rope(t, tokens, i, heads, fits):
    q_before = t.stages.get("q_normed", t["q"])
    k_before = t.stages.get("k_normed", t["k"])
    before = "normed" if "q_normed" in t.stages else ""  # the rotation turns the q and k of the norm
    n = len(tokens)
    out = []
    for h, g, owner, rows in kv_tables(t, i, heads):
        shared = owner != h

        def table_of(lead: int, part: str, h=h, g=g, owner=owner, shared=shared, rows=rows) -> Table:
            turned = {"qk": "q and k turned by their position", "q": "q turned by its position", "k": "k turned by their position"}[part]
            title = f"head {h}: {turned} (θ = {t.config.rope_theta:.10g})"
            title = kv_title(title, h, owner, rows, n, t) if part != "q" else title
            table = Table(title=title, min_width=len(title) + 4)
            with_q, with_k = "q" in part, "k" in part and not shared
            columns = (f"q {before}".strip(), "q rotated") if with_q else ()
            columns += (f"k {before}".strip(), "k rotated") if with_k else ()
            for col in ("token", "position") + columns:
                add_column(table, col if col in ("token", "position") else counted(col, t.config.d_head))
            shown = partial(vec, lead=lead, count=False)
            for j in rows if with_k else [i]:
                q = ((shown(q_before[h, j]), shown(t["q_rotated"][h, j])) if j == i else ("", "")) if with_q else ()
                k = (shown(k_before[g, j]), shown(t["k_rotated"][g, j])) if with_k else ()
                table.add_row(Text(tokens[j]), str(t.position(j)), *q, *k, style="bold" if j == i else None)
            if with_k:
                left_out(table, n, rows, "tokens")
            return table

        out += [*q_and_k(table_of, fits, shared), *_turned_pairs(t, i, h, q_before, fits)]
    return out


def _turned_pairs(t, i, h, q_before, fits) -> list[Table | Text]:
    """Up to three pairs (m, m + d_head/2) of the query's q turned by hand, as the page shows them: the
    angle is position × θ^(−2m/d_head) (four significant digits); cos and sin to four decimals (at
    two, a slow pair's small turn read 0.00); a′ = a cos − b sin and b′ = a sin + b cos, beside q
    rotated as the layer computed it when the terminal has room. The formulas are in the caption,
    so that the headers stay short and no pair of numbers is cut. Then a note where a pair worked
    from the numbers shown misses q rotated as shown."""
    d = t.config.d_head
    half = d // 2
    after = t["q_rotated"][h, i]
    pairs = sorted({0, 1, half - 1} & set(range(half)))
    at = t.position(i)
    counted_pairs = {1: "one pair", 2: "two pairs", 3: "three pairs"}[len(pairs)]
    # each pair: m, its angle as shown, cos and sin, and q's two numbers before the turn
    turns = []
    for m in pairs:
        angle = at * t.config.rope_theta ** (-2 * m / d)
        shown_angle = f"{angle:.3e}".replace("e-0", "e-") if 0 < angle < 1e-3 else format(Decimal(f"{angle:.4g}"), "f")  # as the page: 0.002783, 2.866e-5
        turns.append((m, shown_angle, math.cos(angle), math.sin(angle), float(q_before[h, i, m]), float(q_before[h, i, m + half])))

    def table_of(with_layer: bool, stacked: bool = False) -> Table:
        """stacked: each pair of numbers on two lines, for a narrow terminal."""
        join = "\n" if stacked else ", "
        what = "q's pairs turned by hand" if stacked else f"{counted_pairs} of q turned by hand,"  # stacked: narrower
        table = Table(title=f"head {h}: {what} at position {at}")
        table.caption = Text(
            f"pair (m, m + {half}) of q's {d} numbers; angle = {at} × θ^(−2m/{d}) radians; "
            "a′ = a cos − b sin, b′ = a sin + b cos" + ("" if with_layer else " (the same as q rotated above)"),
            style="dim",
        )
        table.caption_justify = "left"
        for col in ("pair", "angle", "cos, sin", "a, b", "a′, b′ by hand") + (("a′, b′ in the layer",) if with_layer else ()):
            add_column(table, col, no_wrap=col == "pair" or not stacked)  # stacked: a header may take two lines, a number never
        for m, shown_angle, cos, sin, a, b in turns:
            layer = (f"{fmt(after[m])}{join}{fmt(after[m + half])}",) if with_layer else ()
            # stacked, a rule under each pair: its second line (sin, b, b′) read as a row with no pair of its own
            table.add_row(f"({m}, {m + half})", shown_angle, f"{fmt(cos, 4)}{join}{fmt(sin, 4)}", f"{fmt(a)}{join}{fmt(b)}", f"{fmt(a * cos - b * sin)}{join}{fmt(a * sin + b * cos)}", *layer, end_section=stacked and m != pairs[-1])
        return table

    misses = []  # each pair turned by hand from its numbers as shown
    for m, _, cos, sin, a, b in turns:
        cos, sin, a, b = Decimal(fmt(cos, 4)), Decimal(fmt(sin, 4)), as_shown(a), as_shown(b)
        if a is not None and b is not None:
            misses += [(f"a′ of pair ({m}, {m + half})", hand_sum([a * cos, -b * sin]), fmt(after[m])), (f"b′ of pair ({m}, {m + half})", hand_sum([a * sin, b * cos]), fmt(after[m + half]))]
    for with_layer in (True, False):  # built one at a time: the second only where the first does not fit
        table = table_of(with_layer)
        if fits(table):
            return [table, *noted(misses)]
    return [table_of(False, stacked=True), *noted(misses)]


def _scores(t, tokens, i, heads, fits):
    q_final, k_final = final_qk(t)
    c = t.config
    scaling = f"÷√{c.d_head}" if c.scale is None else f"× {c.scale:.6g}"
    hidden = hidden_keys(len(tokens), c)[i]  # (n,): keys the mask hides next
    # the scaling as a person applies it to a score shown: ÷ √d_head, or × the scale as the title writes it
    factor_shown = 1 / Decimal(c.d_head).sqrt() if c.scale is None else Decimal(f"{c.scale:.6g}")
    out = []
    for h in heads:
        g = t.config.kv_group[h]
        n = len(tokens)
        logits = t.stages.get("mask", t["scaled"])[h, i]  # -inf where the mask hides a key
        keys = top_keys(n, [logits])

        def table_of(lead: int, h=h, g=g, keys=keys) -> Table:
            shown = "" if len(keys) == n else ": the highest the query sees" if len(keys) == 1 else f": the {len(keys)} highest the query sees"
            table = Table(title=f"head {h}: q·k_j, then {scaling}{shown}")
            for col in ("key", counted("q·k_j as a sum of products", c.d_head, "products")):
                add_column(table, col)
            # numbers right-aligned, decimal points in line; a key the Mask stage hides next is said
            # after its name (a column of its own would not fit a real model's at 60 columns)
            add_column(table, "q·k_j", justify="right")
            add_column(table, "scaled s", justify="right")
            for j in keys:
                terms = dot_terms(q_final[h, i], k_final[g, j], lead)
                key = named(tokens, j) + (" (masked next)" if hidden[j] else "")
                table.add_row(key, terms, fmt(t["scores"][h, i, j]), fmt(t["scaled"][h, i, j]), style="dim" if hidden[j] else None)
            left_out(table, n, keys, "keys", hidden, "masked next")
            return table

        out.append(fitted(table_of, fits))
        misses = []  # each q·k (when every product is shown) and scaled score, worked from the numbers shown
        for j in keys:
            name, score = named(tokens, j).plain, as_shown(t["scores"][h, i, j])
            if c.d_head <= MAX_SHOWN:
                misses.append((f"q·k of “{name}”", dot_by_hand(q_final[h, i], k_final[g, j]), fmt(t["scores"][h, i, j])))
            misses.append((f"the scaled score of “{name}”", None if score is None else hand_sum([score * factor_shown]), fmt(t["scaled"][h, i, j])))
        out += noted(misses)
    return out


def _side_by_side(table_of, heads: list[int], fits) -> list[Table]:
    """table_of(some heads) for every head: all in one table when it fits the terminal, else as
    many tables of fewer heads each as it takes (a real model has up to a dozen heads)."""
    for size in range(len(heads), 1, -1):
        groups = [heads[k : k + size] for k in range(0, len(heads), size)]
        if fits(table_of(groups[0])):
            return [table_of(group) for group in groups]
    return [table_of([h]) for h in heads]


def _mask(t, tokens, i, heads, fits):
    return _side_by_side(lambda some: _mask_table(t, tokens, i, some), heads, fits)


def _mask_table(t, tokens, i, heads):
    c = t.config
    hidden = hidden_keys(len(tokens), c)[i]  # (n,) for this query
    title = "keys after the query are masked" if c.causal else "keys outside the window are masked"
    if c.causal and c.sliding_window is not None:
        title = f"keys after the query, or {c.sliding_window} or more before it, are masked"
    table = Table(title=title, min_width=len(title) + 4)  # the title on one line
    for col in ("key", "position", "visible", *(f"head {h} scaled s" for h in heads)):
        add_column(table, col, justify="left" if col in ("key", "visible") else "right")
    n = len(tokens)
    rows = list(range(n))
    if n > MANY_TOKENS:  # a long text: the first and last keys, and those where the mask begins or ends
        edges = [0, 1, i - 2, i - 1, i, i + 1, i + 2, n - 2, n - 1]
        if c.sliding_window is not None:
            edges += [i - c.sliding_window, i - c.sliding_window + 1]
        rows = sorted({j for j in edges if 0 <= j < n})
    for before, j in zip([-1, *rows], rows):
        if j > before + 1:
            table.add_row(Text("…", style="dim"))
        visible = "no (masked)" if hidden[j] else "yes"
        table.add_row(Text(tokens[j]), str(j), visible, *(fmt(t["mask"][h, i, j]) for h in heads))
    left_out(table, n, rows, "keys", hidden)
    return table


def _weights(t, tokens, i, heads, fits, superscripts: bool = True):
    tables = _side_by_side(lambda some: _weights_table(t, tokens, i, some), heads, fits)
    if len(tokens) <= MAX_SHOWN:  # short enough to check each weight by hand
        tables += [_softmax_by_hand(t, tokens, i, h, superscripts) for h in heads]
    return [part for table in tables for part in (table, *_note_below(table))]


def _note_below(table: Table) -> list[Text]:
    """A table's note (a caption given as a str: a sentence or two) as a line of its own under it,
    as wide as the terminal: rich wraps a caption to the table's width, a column a few words wide.
    A caption given as Text (left_out's count of the keys left out) stays."""
    if not isinstance(table.caption, str):
        return []
    note, table.caption = table.caption, None
    return [Text(note, style="dim")]


def _softmax_by_hand(t, tokens, i, h, superscripts: bool = True) -> Table:
    """The page's softmax table: each scaled score s, e^s (to three decimals, so that a division
    by hand lands on the weight), their sum, and the weight. A hidden key has e^-inf = 0."""
    logits = t["mask"][h, i] if "mask" in t.stages else t["scaled"][h, i]
    # each step from the one before as shown: e^s of s to two decimals, summed as the e^s shown
    e = np.array([math.exp(float(fmt(s))) if np.isfinite(s) else 0.0 for s in logits])  # (n,)
    shown, kept = _e_format(e, superscripts)
    total = sum(float(kept(x)) for x in e)
    title = f"head {h}: the softmax by hand"
    table = Table(title=title, min_width=len(title) + 4)
    for col in ("key", "scaled score s", "e^s", "÷ Σ e^s", "weight"):
        # numbers right-aligned (the divisor's cells are all alike)
        add_column(table, col, justify="left" if col in ("key", "÷ Σ e^s") else "right")
    for j in range(len(tokens)):
        table.add_row(named(tokens, j), fmt(logits[j]), shown(e[j]), f"÷ {shown(total)}", fmt(t["weights"][h, i, j]))
    # the rows where e^s ÷ Σ, from the numbers shown, rounds to another weight than the layer's (as the page names them)
    by_hand = lambda j: hand_sum([Decimal(kept(e[j])) / Decimal(kept(total))])
    # (no check where every e^s is 0 even in full: scores below -745, which the layer's own softmax
    # takes relative to the largest; only an edited lab layer makes them)
    off = [j for j in range(len(tokens)) if e[j] > 0 and by_hand(j) != fmt(t["weights"][h, i, j])] if total > 0 else []
    # the page's caption says the same: which columns come from the numbers as shown
    table.caption = "e^s is worked out from each s as shown, and Σ e^s from the e^s as shown; each weight from the full numbers."
    if off:
        given = "; ".join(f"the weight of “{named(tokens, j).plain}” comes to {by_hand(j)} (shown: {fmt(t['weights'][h, i, j])})" for j in off)
        table.caption += f" Worked from e^s ÷ Σ e^s as shown instead, {given}."
    table.caption_justify = "left"
    return table


def _e_format(e: np.ndarray, superscripts: bool = True):
    """How the softmax table writes e^s, as the page does, and the number so written: to three
    decimals; when their sum is 100,000 or more, or three decimals would write one of them 0.000 (a
    score below -7.6), every one to three significant digits times a power of ten (4.44×10⁴,
    1.35×10⁻¹, 2.76×10⁻⁶: in a column of e^s, 1.35e-1 reads as 1.35 times e to the -1)."""
    if e.sum() < 1e5 and not ((e > 0) & (e < 5e-4)).any():
        decimals = lambda x: f"{x:.3f}"
        return decimals, decimals
    return (lambda x: "0" if x == 0 else power_of_ten(x, superscripts)), (lambda x: "0" if x == 0 else f"{x:.2e}")


SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def power_of_ten(x: float, superscripts: bool = True) -> str:
    """x to three significant digits times a power of ten, as written by hand: 4.44×10⁴, 1.35×10⁻¹
    (without superscripts, 1.35×10^-1)."""
    mantissa, exponent = f"{x:.2e}".split("e")
    power = str(int(exponent))
    return f"{mantissa}×10{power.translate(SUPERSCRIPT) if superscripts else '^' + power}"


def _weights_table(t, tokens, i, heads):
    # one head's two columns are narrower than the several heads' title: kept on one line (the
    # table's min_width), it stretched them, the key column 24 wide. One head's title is short.
    many = len(heads) > 1
    title = "softmax over keys (each head's column sums to 1)" if many else "softmax over keys (sums to 1)"
    table = Table(title=title)
    add_column(table, "key")
    for h in heads:
        add_column(table, f"head {h}")  # each weight (all of one width), then its bar: a block for each 0.05
    hidden = hidden_keys(len(tokens), t.config)[i]  # (n,): none hidden unless the layer is masked
    top = TOP_KEYS if len(heads) == 1 else 3  # several heads side by side: their rows add up
    keys = top_keys(len(tokens), [np.where(hidden, -np.inf, t["weights"][h, i]) for h in heads], top=top)
    if len(keys) < len(tokens):  # (fewer than top where the mask leaves the query fewer keys)
        each = min(top, int((~hidden).sum()))  # of each head's keys
        kept = "largest weight" if each == 1 else f"{each} largest weights"
        table.title = f"{title}: each head's {kept}, in text order" if many else f"softmax: {largest(len(keys))}"
    table.min_width = len(table.title) + 4
    for j in keys:
        cells = []
        for h in heads:
            w = t["weights"][h, i, j]
            cells.append("masked" if hidden[j] else f"{fmt(w)} {'█' * int(round(w * 20))}".rstrip())  # a hidden key's 0 is not a weak key's
        table.add_row(named(tokens, j), *cells)
    left_out(table, len(tokens), keys, "keys", hidden)
    total = f"sum of all {len(tokens)}"  # of every key, not only the rows shown; no token's name (a text may hold the word "sum")
    table.add_row(total, *(fmt(t["weights"][h, i].sum()) for h in heads), style="dim")
    if len(keys) == len(tokens):  # every weight shown: say where the shown ones add up to 0.99 or 1.01
        shown_sums = {h: hand_sum(as_shown(w) for w in t["weights"][h, i]) for h in heads}
        off = [f"head {h}'s weights add up to {shown}" for h, shown in shown_sums.items() if shown != fmt(t["weights"][h, i].sum())]
        if off:
            table.caption = f"As shown, rounded to two decimals, {', '.join(off)}; in full, each column adds up to 1."
            table.caption_justify = "left"
    return table


def largest(count: int) -> str:
    """The weights a long text's table keeps: "the 5 largest weights", "the largest weight" (a causal
    layer's first query sees one key)."""
    return "the largest weight" if count == 1 else f"the {count} largest weights"


def _mixing(t, tokens, i, heads, fits):
    """z_h as its sum of weighted value rows: on one line when it fits the terminal, else one term a
    line. Every key of a short text (as the other stages list them), so that z can be worked out by
    hand; of a long one, the three with the largest weights."""
    visible = int((~hidden_keys(len(tokens), t.config)[i]).sum())  # keys the query sees
    long_text = len(tokens) > MANY_TOKENS
    out = []
    for h in heads:
        g = t.config.kv_group[h]
        keys = range(len(tokens))
        if long_text:  # the three keys with the largest weights (a hidden key has none)
            keys = sorted(j for j in np.argsort(-t["weights"][h, i], kind="stable")[:3] if t["weights"][h, i, j] > 0)
        # each value row named by its key: v(cats) = [1.00, 0.00]; a long text's by its position too
        name = (lambda j: f"{tokens[j]} @{j}") if long_text else (lambda j: str(named(tokens, j)))
        def terms(count: bool, g=g, h=h, keys=keys) -> list[str]:
            shown = [f"{fmt(t['weights'][h, i, j])}×v({name(j)}){vec(t['v'][g, j], count=count)}" for j in keys]
            if len(keys) < visible:  # (a long text's: every key the query sees is shown otherwise)
                seen = f"{visible} keys" if visible == len(tokens) else f"{visible} visible key{'' if visible == 1 else 's'} of {len(tokens)}"
                shown.append(f"… ({seen}; {largest(len(keys))} shown)")
            return shown

        start = f"head {h}: z_{h} = "
        line = Text(f"{start}{' + '.join(terms(True))}\n        = {vec(t['z'][h, i])}")
        if not fits(line):  # one term a line, the vectors' length said once
            indent = " " * (len(start) - 2)  # "+" and "=" under the "=" of z_h =
            short = terms(False)
            lines = [start + short[0], *(f"{indent}+ {term}" for term in short[1:]), f"{indent}= {vec(t['z'][h, i], count=False)}"]
            if t.config.d_v > MAX_SHOWN:
                lines.append(f"{indent}  (v and z have {t.config.d_v} numbers each)")
            line = Text("\n".join(lines))
        if len(keys) == visible < len(tokens):  # a long text's every visible key shown: the rest are masked
            line.append(f"\n(the other {len(tokens) - visible} keys are masked: their weights are 0)", style="dim")
        if len(keys) == len(tokens):  # every term shown: z's numbers shown can be worked by hand (a long v's first 3, as vec shows it)
            checked = range(t.config.d_v) if t.config.d_v <= MAX_SHOWN else range(3)
            misses = [(f"z_{h}[{e}]", dot_by_hand(t["weights"][h, i], t["v"][g, :, e]), fmt(t["z"][h, i, e])) for e in checked]
        else:
            misses = []
        out += [line, *noted(misses)]
    return out


def _concat(t, tokens, i, heads, fits):
    z = [f"z_{h} = {vec(t['z'][h, i])}" for h in range(t.config.n_heads)]
    line = Text(f"{' | '.join(z)}\nconcat = {vec(t['concat'][i])}")
    if not fits(line):  # one head a line
        line = Text("\n".join(z) + f"\nconcat = {vec(t['concat'][i])}")
    return [line]


def _output(t, tokens, i, heads, weights: AttentionWeights | None, fits):
    """Every head's row, the bias b_O when the layer has one, and their sum y: as many components
    as fit (fits(table) says whether a table does), at most MAX_SHOWN. A small layer's W^O first,
    so that each head's contribution z_h W^O_[h] can be checked."""
    c = t.config
    b_O = weights.b_O if c.bias else None
    d = c.d_model
    lengths = list(np.linalg.norm(t["contributions"][:, i], axis=-1))  # (h,), over every component
    lengths += [np.linalg.norm(v) for v in (b_O, t["output"][i]) if v is not None]  # the bias's, then y's
    for shown in range(min(d, MAX_SHOWN), 0, -1):
        table = _output_table(t, i, b_O, shown, lengths)
        if fits(table):
            break
    # y as the sum of the rows shown, each component shown in every row
    misses = [
        (f"y[{m}]", hand_sum(as_shown(v) for v in [*t["contributions"][:, i, m], *([] if b_O is None else [b_O[m]])]), fmt(t["output"][i, m])) for m in range(shown)
    ]
    if d > SMALL_D_MODEL:  # a real model's sums of a dozen rounded rows land off at every turn: said once, with how far they may
        rows = c.n_heads + (b_O is not None)
        off = [what for what, hand, y in misses if hand not in (None, y)]
        return [table, *([Text(f"Every number here is rounded: the heads' parts of {', '.join(off)}, added up, land off the y shown (a sum of {rows} numbers rounded to two decimals may land up to {rows * 0.005:.3f} off); y is worked out from the full numbers.", style="dim")] if off else [])]
    if weights is None or d > MAX_SHOWN or c.n_heads * c.d_v > 2 * MAX_SHOWN:
        return [table, *noted(misses)]
    title = "W^O: head i's rows multiply its z_i"
    w_o = Table(title=title, min_width=len(title) + 4)
    for col in ("row", *(f"y[{m}]" for m in range(d))):
        add_column(w_o, col, justify="left" if col == "row" else "right")
    for r in range(c.n_heads * c.d_v):
        w_o.add_row(f"head {r // c.d_v} · z[{r % c.d_v}]", *(fmt(v) for v in weights.W_O[r]))
    # each head's row as its block of concat (printed above W^O) times its rows of W^O, before the rows' sum
    rows = lambda h: slice(h * c.d_v, (h + 1) * c.d_v)
    misses = [
        (f"head {h}'s part of y[{m}]", dot_by_hand(t["concat"][i, rows(h)], weights.W_O[rows(h), m]), fmt(t["contributions"][h, i, m]))
        for h in range(c.n_heads) for m in range(shown)
    ] + misses
    return [Text(f"concat = {vec(t['concat'][i])}"), w_o, table, *noted(misses)]


def _output_table(t, i, b_O: np.ndarray | None, shown: int, lengths: list[float]) -> Table:
    """With components left out (a real model's, or any in a narrow terminal), a last column gives
    each row's length over all of them: how much each head adds to y, the heads it draws on most
    standing out."""
    d = t.config.d_model
    title = "each head's contribution to y"
    cut = shown < d
    if cut:
        title += f": the first {shown} of {d} ({d - shown} left out)"
    table = Table(title=title, caption=f"length: over all {d} components" if cut else None)
    add_column(table, "", no_wrap=True)
    for m in range(shown):
        add_column(table, f"y[{m}]", no_wrap=True, justify="right")
    if cut:
        add_column(table, "length", no_wrap=True, justify="right")
    length = (lambda r: [fmt(lengths[r])]) if cut else (lambda r: [])  # r: the row's place, heads first
    h = t.config.n_heads
    for head in range(h):
        table.add_row(f"head {head}", *(fmt(v) for v in t["contributions"][head, i, :shown]), *length(head))
    if b_O is not None:
        table.add_row("bias", *(fmt(v) for v in b_O[:shown]), *length(h), style="dim")
    table.add_row("output y", *(fmt(v) for v in t["output"][i, :shown]), *length(-1), style="bold")
    return table


_STAGE_VIEWS = {
    "projections": _projections,
    "qk_norm": _qk_norm,
    "rope": _rope,
    "scores": _scores,
    "mask": _mask,
    "weights": _weights,
    "mixing": _mixing,
    "concat": _concat,
    "output": _output,
}
