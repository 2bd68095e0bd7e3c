"""Everyday graphs the lowering used to refuse (issue 11, "beyond both lists"): an input that
broadcasts only once the model views it (``cos[:, None, :]``, ``mask[:, None, None, :]``), a
boolean mask in a row reduction, and ``torch.logsumexp``. Each gets candidates that compute the
reference on the interpreter at the traced sizes and at others, with every row kernel."""

from __future__ import annotations

import pytest

from tests.workers.search.child import check_chained, check_rendered, run_child
from workers.search.trace import NoTemplate, trace_problem

HEADER = "import torch\nimport torch.nn as nn\n\n"
FOOTER = "\n\ndef get_init_inputs():\n    return []\n"

ROPE = (
    HEADER
    + """batch_size = 2
tokens = 6
heads = 3
head_dim = 16


class Model(nn.Module):
    def forward(self, x, cos, sin):
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos[:, None, :] + rotated * sin.unsqueeze(1)


def get_inputs():
    return [
        torch.randn(batch_size, tokens, heads, head_dim),
        torch.randn(tokens, head_dim),
        torch.randn(tokens, head_dim),
    ]
"""
    + FOOTER
)

PADDING_MASK = (
    HEADER
    + """batch_size = 2
heads = 3
seq = 8


class Model(nn.Module):
    def forward(self, scores, padding):
        masked = scores.masked_fill(padding[:, None, None, :], float("-inf"))
        return torch.softmax(masked, dim=-1)


def get_inputs():
    padding = torch.arange(seq)[None, :] >= torch.tensor([[seq - 2], [seq // 2]])[:batch_size]
    return [torch.randn(batch_size, heads, seq, seq), padding]
"""
    + FOOTER
)

WHERE_MASK = (
    HEADER
    + """rows = 5
cols = 24


class Model(nn.Module):
    def forward(self, x, keep):
        return torch.where(keep, x, torch.zeros_like(x)).sum(dim=-1) + (x * keep).amax(dim=-1)


def get_inputs():
    return [torch.randn(rows, cols), torch.rand(rows, cols) > 0.3]
"""
    + FOOTER
)

LOGSUMEXP = (
    HEADER
    + """rows = 7
cols = 50


class Model(nn.Module):
    def forward(self, x):
        return torch.logsumexp(x, dim=-1, keepdim=True) - x.mean(dim=-1, keepdim=True)


def get_inputs():
    return [torch.randn(rows, cols)]
"""
    + FOOTER
)

ROW_VARIANTS = [
    {"strategy": "one_pass"},
    {"strategy": "looped", "block_n": 16},
]


def _row_kernels_meet_the_reference(source: str, sizes: list, folder) -> dict:
    """``source``'s row candidate with each of ROW_VARIANTS at every size in ``sizes``, on the
    interpreter: each within 1e-5 of the reference. The result, for what else a test reads."""
    result = check_rendered({"p": source}, ROW_VARIANTS, {"p": sizes}, str(folder))["p"]
    assert result["family"] == "row", result
    assert len(result["errs"]) == len(sizes) * len(ROW_VARIANTS)
    for err in result["errs"]:
        assert not isinstance(err, str) and err < 1e-5, result["errs"]
    return result


@pytest.mark.parametrize(
    "source, variants, sizes, family, says",
    [
        (
            ROPE,
            [{}, {"block": 16, "tiles": 1}],
            [{}, {"heads": 1, "head_dim": 40, "tokens": 3}],
            "elementwise",
            "cos [1, 6, 1, 16] broadcast",
        ),
        (PADDING_MASK, ROW_VARIANTS, [{}, {"seq": 20, "heads": 1}], "row", "padding [2, 1, 1, 8]"),
        (WHERE_MASK, ROW_VARIANTS, [{}, {"cols": 300}], "row", "reductions [sum, max]"),
        (LOGSUMEXP, ROW_VARIANTS, [{}, {"cols": 1000, "rows": 2}], "row", "[max, sum, mean]"),
    ],
    ids=["rope-table-viewed-per-token", "padding-mask-viewed", "bool-where", "logsumexp"],
)
def test_the_graph_gets_a_correct_kernel_at_every_size(
    source, variants, sizes, family, says, tmp_path
):
    result = check_rendered({"p": source}, variants, {"p": sizes}, str(tmp_path))["p"]
    assert result["family"] == family, result
    assert says in result["summary"], result["summary"]
    assert len(result["errs"]) == len(variants) * len(sizes)
    for err in result["errs"]:
        assert not isinstance(err, str) and err < 1e-5, result["errs"]


_INFINITE_ROWS = r"""
import json, sys, torch
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

src = sys.argv[1]
cand = P.load_module(render(trace_problem(src), DEFAULTS["row"]), "c", sys.argv[2])
x = torch.randn(4, 50)
x[0] = float("-inf")
x[1, 3] = float("inf")
x[2, :10] = float("-inf")
model = cand.ModelNew()
got = model(x)
want = torch.logsumexp(x, dim=-1, keepdim=True) - x.mean(dim=-1, keepdim=True)
same = torch.allclose(got, want, equal_nan=True, atol=1e-5)
print("RESULTS" + json.dumps({"same": same, "got": str(got.flatten().tolist())}))
"""


def test_logsumexp_of_infinite_rows_is_what_torch_gives(tmp_path):
    """A row of -inf, a row holding +inf and a row partly -inf: torch shifts by the maximum only
    where it is finite; so does the kernel (no NaN where torch has none)."""
    result = run_child(_INFINITE_ROWS, LOGSUMEXP, str(tmp_path))
    assert result["same"], result["got"]


def test_a_view_that_moves_a_broadcast_inputs_elements_is_refused_in_one_line():
    """Splitting the table's rows in two and back is a view the kernel's strides cannot follow
    in general: refused, naming the input and both shapes."""
    split = ROPE.replace("cos[:, None, :]", "cos.reshape(-1, 2, 16).reshape(6, 1, 16)")
    with pytest.raises(NoTemplate, match=r"reshapes input cos \(from \[6, 16\] to \[3, 2, 16\]\)"):
        trace_problem(split)


GROUP_NORM = (
    HEADER
    + """batch_size = 2
features = 12
groups = 3
height = 5
width = 7


class Model(nn.Module):
    def __init__(self, features, groups):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups=groups, num_channels=features)
        with torch.no_grad():  # weights that differ per channel, so a wrong one shows
            self.gn.weight.copy_(torch.linspace(0.5, 2.0, features))
            self.gn.bias.copy_(torch.linspace(-1.0, 1.0, features))

    def forward(self, x):
        return self.gn(x) * 2.0
"""
    + """

def get_inputs():
    return [torch.randn(batch_size, features, height, width) * 3.0 + 1.0]


def get_init_inputs():
    return [features, groups]
"""
)


INSTANCE_NORM = GROUP_NORM.replace(
    "nn.GroupNorm(num_groups=groups, num_channels=features)",
    "nn.InstanceNorm2d(features, affine=True)",
)


@pytest.mark.parametrize(
    "source, sizes, says",
    [
        (
            GROUP_NORM,
            [{}, {"groups": 12}, {"groups": 1, "height": 1}, {"height": 33, "width": 31}],
            "groups of 140 contiguous elements (3 groups along dimension 1)",
        ),
        (INSTANCE_NORM, [{}, {"height": 33, "width": 31}], "the last 2 dimensions (flattened)"),
    ],
    ids=["group-norm", "affine-instance-norm"],
)
def test_a_norm_reads_each_channels_weight_inside_its_rows(source, sizes, says, tmp_path):
    """GroupNorm (rows: a group's contiguous elements, several channels of H*W) and an affine
    InstanceNorm (rows: one channel's H*W): the weight and bias are read by each element's
    channel; right with every row kernel, at the traced sizes, with one channel per group, with
    one group, and with rows longer than a block."""
    variants = [
        *ROW_VARIANTS,
        {"strategy": "looped", "block_n": 32},
        {"table": {"6,140,float32": [2, 2, 128, 2, 1, 0, 0]}},  # one pass over two chunks
        {"table": {"6,140,float32": [1, 2, 256, 2, 1, 3, 1]}},  # persistent, eviction hints
    ]
    result = check_rendered({"n": source}, variants, {"n": sizes}, str(tmp_path))["n"]
    assert result["family"] == "row", result
    assert says in result["summary"], result["summary"]
    assert "weight [1, 12, 1, 1] broadcast" in result["summary"]
    assert "0 vector(s)" in result["summary"]  # the weight's own node is not read
    for err in result["errs"]:
        assert not isinstance(err, str) and err < 1e-4, result["errs"]


GROUP_QUANT = (
    HEADER
    + """rows = 6
cols = 64
group = 16


class Model(nn.Module):
    def forward(self, x):
        g = x.view(-1, group)
        scale = g.abs().amax(dim=-1, keepdim=True).clamp(min=1e-8) / 127.0
        q = torch.clamp(torch.round(g / scale), -127, 127)
        return (q * scale).view_as(x)


def get_inputs():
    return [torch.randn(rows, cols)]
"""
    + FOOTER
)


def test_group_wise_quantisation_reads_groups_of_a_fixed_size_at_every_size(tmp_path):
    """Symmetric int8 quantisation with one scale per run of 16 values (``x.view(-1, 16)``,
    then viewed back): rows are the groups, so many elements each whatever the tensor's size.
    The reference is met at the traced sizes, with more rows, and with wider rows."""
    sizes = [{}, {"rows": 11}, {"cols": 256}, {"rows": 1, "cols": 16}]
    result = _row_kernels_meet_the_reference(GROUP_QUANT, sizes, tmp_path)
    assert "groups of 16 contiguous elements (as traced, 24 of them)" in result["summary"]


DISTANCE_BIAS = (
    HEADER
    + """batch_size = 2
heads = 3
tokens = 12


class Model(nn.Module):
    def forward(self, scores):
        t = scores.shape[-1]
        pos = torch.arange(t, device=scores.device)
        distance = (pos[None, :] - pos[:, None]).abs().to(scores.dtype)
        return torch.softmax(scores - 0.25 * distance, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, heads, tokens, tokens)]
"""
    + FOOTER
)


def test_a_bias_computed_from_two_aranges_is_index_arithmetic_in_the_kernel(tmp_path):
    """A penalty by distance between query and key (``(j - i).abs()`` of two aranges, cast to
    the scores' dtype) was refused ("changes the row layout"): it is the elements' own
    coordinates, the same at every batch and head. Met at the traced sizes and others."""
    sizes = [{}, {"tokens": 37}, {"batch_size": 1, "heads": 1, "tokens": 1}]
    _row_kernels_meet_the_reference(DISTANCE_BIAS, sizes, tmp_path)


MASKED_MEAN = (
    HEADER
    + """batch_size = 3
seq = 20
hidden = 24


class Model(nn.Module):
    def forward(self, x, mask):
        m = mask.unsqueeze(-1).to(x.dtype)
        return (x * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)


def get_inputs():
    mask = torch.rand(batch_size, seq) > 0.3
    mask[0] = False  # a sequence with no token kept: 0, not NaN
    return [torch.randn(batch_size, seq, hidden), mask]
"""
    + FOOTER
)


CHANNEL_SOFTMAX_BIAS = (
    HEADER
    + """batch_size = 2
channels = 6
height = 5
width = 7


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))

    def forward(self, x):
        return torch.sigmoid((torch.softmax(x, dim=1) + self.bias) * 2.0)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]
"""
    + FOOTER
)


@pytest.mark.parametrize(
    "source, sizes, says",
    [
        (
            MASKED_MEAN,
            [{}, {"seq": 37, "hidden": 5}, {"batch_size": 1, "seq": 1}],
            "row-wise over dimension 1 of 3: reductions [sum, sum]",
        ),
        (
            CHANNEL_SOFTMAX_BIAS,
            [{}, {"height": 1, "width": 9}],
            "row-wise over dimension 1 of 4: reductions [max, sum]",
        ),
    ],
    ids=["masked-mean", "channel-softmax-then-bias"],
)
def test_an_input_that_varies_along_a_middle_reduction_is_read_along_each_row(
    source, sizes, says, tmp_path
):
    """Sentence-embedding pooling, ``(x * m).sum(1) / m.sum(1)`` with a token mask [B, S, 1],
    and a softmax over the channels followed by a bias per channel [C, 1, 1] (KernelBench level
    2's 91 after its convolution): the rows run over a middle dimension, and the input varies
    along it, the same for every element of the last. The first was refused ("reduces a
    per-row value over part of the rows"), the second took a kernel more; each row now reads
    its own elements of it, at the traced sizes and at others (a fully masked sequence: 0)."""
    result = _row_kernels_meet_the_reference(source, sizes, tmp_path)
    assert says in result["summary"], result["summary"]


TRIPLET = (
    HEADER
    + """batch_size = 37
dim = 24


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.TripletMarginLoss(margin=1.0)

    def forward(self, anchor, positive, negative):
        return self.loss(anchor, positive, negative)


def get_inputs():
    return [torch.randn(batch_size, dim) for _ in range(3)]
"""
    + FOOTER
)

ROW_SUMS_MAX = (
    HEADER
    + """rows = 9
cols = 30


class Model(nn.Module):
    def forward(self, x):
        return (x * x).sum(dim=-1).amax(dim=0, keepdim=True)


def get_inputs():
    return [torch.randn(rows, cols)]
"""
    + FOOTER
)


@pytest.mark.parametrize(
    "source, sizes, says",
    [
        (TRIPLET, [{}, {"batch_size": 1, "dim": 300}], "then the mean of a per-row value"),
        (ROW_SUMS_MAX, [{}, {"rows": 70, "cols": 3}], "then the max of a per-row value"),
        # a number applied to the fold (a loss weight; KL divergence's batchmean)
        (
            TRIPLET.replace(
                "return self.loss(anchor, positive, negative)",
                "return self.loss(anchor, positive, negative) * 2.0",
            ),
            [{}, {"batch_size": 1, "dim": 300}],
            "then the mean of a per-row value",
        ),
        (
            ROW_SUMS_MAX.replace("return (x * x)", "return -0.5 * (x * x)"),
            [{}, {"rows": 70, "cols": 3}],
            "then the max of a per-row value",
        ),
    ],
    ids=["triplet-margin-loss", "max-of-row-sums", "weighted-loss", "negated-max"],
)
def test_a_per_row_value_folded_over_every_row(source, sizes, says, tmp_path):
    """A triplet margin loss (the mean over the batch of per-row distances) and the largest row
    sum: the row kernel stores one value per row, one program folds them in a fixed order (the
    correctness gate's two runs agree bit for bit); right with every
    row kernel, with fewer rows than a tile and with more."""
    variants = [*ROW_VARIANTS, {"strategy": "one_pass", "max_rows": 4, "tile": 128}]
    result = check_rendered({"p": source}, variants, {"p": sizes}, str(tmp_path))["p"]
    assert result["family"] == "row", result
    assert says in result["summary"], result["summary"]
    for err in result["errs"]:
        assert not isinstance(err, str) and err < 1e-5, result["errs"]


def test_arithmetic_after_folding_over_rows_is_a_chain(tmp_path):
    """A number added to a loss folded over every row (refused in one kernel): a chain now."""
    scaled = TRIPLET.replace(
        "return self.loss(anchor, positive, negative)",
        "return self.loss(anchor, positive, negative) + 1.0",
    )
    check_chained(
        {"triplet-plus-one": scaled}, str(tmp_path), {"triplet-plus-one": [{}, {"batch_size": 5}]}
    )
