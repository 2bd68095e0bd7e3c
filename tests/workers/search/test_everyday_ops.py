"""Everyday operators a user brings that are small graphs of pointwise ops and reductions
(issue 11, "generality"): a reduction over adjacent middle dimensions or over dimensions apart,
F.normalize over the channels or the last dimension, std, log-sigmoid, cosine similarity, a
product. Each gets a candidate that
computes the reference on the interpreter at the traced sizes and at others."""

from __future__ import annotations

import pytest

from tests.workers.search.child import check_chained, check_rendered
from workers.search.trace import NoTemplate, trace_problem


def _problem(forward: str, inputs: str, sizes: str) -> str:
    return (
        f"import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n{sizes}\n\n\n"
        f"class Model(nn.Module):\n    def forward(self, x, y):\n        return {forward}\n\n\n"
        f"def get_inputs():\n    return [{inputs}]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )


NCHW = "b = 2\nc = 12\nh = 5\nw = 7"
ROWS = "b = 6\nc = 40"
X4 = "torch.randn(b, c, h, w), torch.randn(b, c, h, w)"
X2 = "torch.randn(b, c), torch.randn(b, c)"

CASES = {
    "sum-leading-two": (_problem("(x * y).sum(dim=(0, 1))", X4, NCHW), "dimensions 0..1 of 4"),
    "mean-middle-two": (
        _problem("x - x.mean(dim=(1, 2), keepdim=True)", X4, NCHW),
        "dimensions 1..2 of 4",
    ),
    "normalize-channels": (_problem("F.normalize(x, dim=1) + y", X4, NCHW), "dimension 1 of 4"),
    "normalize-last": (_problem("F.normalize(x, p=2.0, dim=-1) * y", X2, ROWS), "last dimension"),
    "std": (_problem("x.std(dim=-1, keepdim=True) + y", X2, ROWS), "reductions [mean, sum]"),
    # standardising a row by its own statistics in one call (both outputs used)
    "std-mean": (
        _problem(
            "(lambda s, m: (x - m) / (s + 1e-5) + y)(*torch.std_mean(x, dim=-1, keepdim=True))",
            X2,
            ROWS,
        ),
        "reductions [mean, sum]",
    ),
    "log-sigmoid": (_problem("F.logsigmoid(x * 10.0) + y", X2, ROWS), "elementwise"),
    "prod-middle": (
        _problem("(1.0 + 0.01 * x).prod(dim=1, keepdim=True) * y", X4, NCHW),
        "reductions [prod]",
    ),
    "prod-whole": (_problem("(1.0 + 0.001 * x * y).prod()", X2, ROWS), "the whole tensor"),
    "weight-per-row": (
        _problem(
            "torch.softmax(x * y[:, None], dim=-1)", "torch.randn(b, c), torch.randn(b)", ROWS
        ),
        "y [6, 1] broadcast",
    ),
    "flatten-mean": (
        _problem("x.flatten(1).mean(-1) + y.view(y.shape[0], -1).sum(1)", X4, NCHW),
        "the last 3 dimensions (flattened)",
    ),
    "flattened-softmax": (
        _problem("x.view(x.shape[0], -1).softmax(-1).view_as(x) * y", X4, NCHW),
        "the last 3 dimensions (flattened): reductions [max, sum]",
    ),
    "bce-with-logits": (
        _problem("F.binary_cross_entropy_with_logits(x, torch.sigmoid(y))", X4, NCHW),
        "the whole tensor: reductions [mean]",
    ),
    "bce-weighted": (
        _problem(
            "F.binary_cross_entropy_with_logits(x * 4.0, torch.sigmoid(y), weight=y.abs(), "
            "pos_weight=y * y + 0.5, reduction='sum')",
            X2,
            ROWS,
        ),
        "the whole tensor: reductions [sum]",
    ),
    "bce-on-probabilities": (
        _problem(
            "F.binary_cross_entropy(torch.sigmoid(x * 30.0), torch.sigmoid(y), reduction='none')",
            X2,
            ROWS,
        ),
        "elementwise",
    ),
    "cosine-similarity": (
        _problem("F.cosine_similarity(x, y, dim=-1)", X2, ROWS),
        "reductions [sum, sum, sum]",
    ),
    # tensors made in the forward from a size and one value (were "ones.default, which no
    # template expresses")
    "ones-made-in-forward": (
        _problem("(x + torch.ones(x.shape[-1], device=x.device)).softmax(-1) * y", X2, ROWS),
        "reductions [max, sum]",
    ),
    "zeros-and-full-made-in-forward": (
        _problem(
            "x * torch.full((x.shape[-1],), 0.5, device=x.device) "
            "+ torch.zeros(x.shape, device=x.device) + y",
            X2,
            ROWS,
        ),
        "elementwise",
    ),
    # a number made a tensor in the forward: a constant attribute (was "value _tensor_constant0
    # is not expressible", KernelBench level 2's ``torch.min(x, torch.tensor(c))``)
    "tensor-of-a-number": (
        _problem("torch.min(x, torch.tensor(0.5)) * y + torch.tensor(2)", X2, ROWS),
        "elementwise",
    ),
    # An argmax's index used further: a one-hot of it (top-1 routing), a fraction of the row
    "top1-gate": (
        _problem("F.one_hot(x.argmax(-1), x.shape[-1]).to(x.dtype) * y.softmax(-1)", X2, ROWS),
        "reductions [argmax, max, sum]",
    ),
    "argmin-position": (
        _problem("x.argmin(-1, keepdim=True).float() / x.shape[-1] + y", X2, ROWS),
        "reductions [argmin]",
    ),
    # a norm over several trailing dimensions (the Frobenius norm of each matrix; was "reduces
    # over dims [2, 3] ... beside other reductions")
    "frobenius-normalised": (
        _problem("x / torch.linalg.matrix_norm(x, keepdim=True) + y", X4, NCHW),
        "the last 2 dimensions (flattened)",
    ),
    "vector-norm-apart": (
        _problem("torch.linalg.vector_norm(x * y, ord=3, dim=(0, 2))", X4, NCHW),
        "dimensions [0, 2] of 4 (gathered)",
    ),
    # was "soft_margin_loss.default, which no template expresses"
    "soft-margin-loss": (
        _problem("F.soft_margin_loss(x, torch.sign(y))", X2, ROWS),
        "the whole tensor: reductions [mean]",
    ),
}


def test_each_graph_gets_a_correct_candidate(tmp_path):
    problems = {name: source for name, (source, _) in CASES.items()}
    sizes = {name: [{}, {"c": 3, "h": 1, "w": 300, "b": 3}] for name in problems}
    variants = [{}, {"strategy": "looped", "block_n": 16}]
    results = check_rendered(problems, variants, sizes, str(tmp_path))
    for name, (_, says) in CASES.items():
        result = results[name]
        assert says in result["summary"], (name, result["summary"])
        for err in result["errs"]:
            assert not isinstance(err, str) and err < 1e-4, (name, result["errs"])


GATHERED = {
    "sum-apart": (_problem("(x * y).sum(dim=(0, 2))", X4, NCHW), "dimensions [0, 2] of 4"),
    "batch-statistics": (
        _problem(
            "(x - x.mean(dim=(0, 2, 3), keepdim=True)) * torch.rsqrt(x.var(dim=(0, 2, 3), "
            "keepdim=True, unbiased=False) + 1e-5) * self.w.view(1, -1, 1, 1) + y",
            X4,
            NCHW,
        ).replace(
            "class Model(nn.Module):\n",
            "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.w = nn.Parameter(torch.linspace(0.5, 2.0, c))\n\n",
        ),
        "dimensions [0, 2, 3] of 4 (gathered)",
    ),
    "max-apart-keepdim": (
        _problem("x.amax(dim=(1, 3), keepdim=True) - y.amin(dim=(1, 3), keepdim=True)", X4, NCHW),
        "dimensions [1, 3] of 4",
    ),
}


def test_reductions_over_dimensions_apart_gather_each_rows_elements(tmp_path):
    """Statistics over dims (0, 2, 3) of NCHW (a batch norm's), a sum over (0, 2), a max over
    (1, 3): each row is a coordinate of the kept dimensions and gathers its elements by their
    coordinates; right with every row kernel and at other sizes."""
    problems = {name: source for name, (source, _) in GATHERED.items()}
    sizes = {name: [{}, {"h": 1, "w": 40, "b": 3}] for name in problems}  # c: the weight's
    key = "12,70,float32"  # batch-statistics: 12 channels, 2 * 5 * 7 elements each
    variants = [
        {},
        {"strategy": "looped", "block_n": 16},
        {"table": {key: [2, 2, 64, 2, 1, 0, 0]}},  # one pass over two chunks
        {"table": {key: [1, 2, 128, 2, 1, 3, 1]}},  # persistent
    ]
    results = check_rendered(problems, variants, sizes, str(tmp_path))
    for name, (_, says) in GATHERED.items():
        result = results[name]
        assert says in result["summary"], (name, result["summary"])
        for err in result["errs"]:
            assert not isinstance(err, str) and err < 1e-4, (name, result["errs"])


BATCH_NORM = """import torch
import torch.nn as nn

b = 2
c = 12
h = 5
w = 7


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)
        with torch.no_grad():  # statistics and weights that differ per channel
            self.bn.running_mean.copy_(torch.linspace(-1.0, 1.0, c))
            self.bn.running_var.copy_(torch.linspace(0.5, 2.0, c))
            self.bn.weight.copy_(torch.linspace(0.5, 1.5, c))
            self.bn.bias.copy_(torch.linspace(-0.5, 0.5, c))
        self.bn.eval()

    def forward(self, x):
        return torch.relu(self.bn(x))


def get_inputs():
    return [torch.randn(b, c, h, w)]


def get_init_inputs():
    return [c]
"""


# Reductions over different dimensions of different inputs: a chain whose cuts are not in the
# graph's order (the mask's count is cut after the masked sum it divides; a 0-d total too).
POOLED = {
    "masked-mean": _problem(
        "(x * y[..., None]).sum(1) / y.sum(1, keepdim=True).clamp(min=1)",
        "torch.randn(b, c, h), (torch.rand(b, c) > 0.3).float()",
        "b = 3\nc = 10\nh = 16",
    ),
    "weighted-mean-over-rows": _problem(
        "(x * y[:, None]).sum(0) / y.sum()",
        "torch.randn(b, c), torch.rand(b)",
        "b = 12\nc = 20",
    ),
}


def test_means_pooled_by_a_mask_or_weights_are_chains(tmp_path):
    check_chained(POOLED, str(tmp_path), dict.fromkeys(POOLED, [{}, {"b": 5, "c": 7}]))


def test_batch_norm_in_eval_mode_reads_its_running_statistics_per_channel(tmp_path):
    """An inference BatchNorm (+ ReLU): elementwise with its statistics and weights broadcast
    per channel (its integer batch counter, never read, is no obstacle)."""
    sizes = {"bn": [{}, {"c": 3, "h": 1, "w": 300}]}
    result = check_rendered({"bn": BATCH_NORM}, [{}], sizes, str(tmp_path))["bn"]
    assert result["family"] == "elementwise", result
    assert "self.bn.running_var [1, 12, 1, 1] broadcast" in result["summary"]
    for err in result["errs"]:
        assert not isinstance(err, str) and err < 1e-5, result["errs"]


def test_batch_norm_left_in_training_mode_is_traced_as_the_gates_run_it():
    """Without ``self.bn.eval()`` the module is still run in eval mode by the gates (unless the
    workload trains, see test_train_mode.py), and the trace runs it so too."""
    training = BATCH_NORM.replace("        self.bn.eval()\n", "")
    assert trace_problem(training).family == "elementwise"


OUTER = """import torch
import torch.nn as nn

b = 4
t = 8
d = 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.linspace(0.5, 2.0, t))

    def forward(self, x, y):
        return torch.tanh(x[:, None, :] + y[None, :, :]) * self.w.view(1, -1, 1)


def get_inputs():
    return [torch.randn(b, d), torch.randn(t, d)]


def get_init_inputs():
    return []
"""


def test_an_outer_broadcast_writes_rows_wider_than_every_input(tmp_path):
    """x[:, None, :] + y[None, :, :]: the output is wider than any input; every input is read
    through its strides, the output's shape the broadcast of their views."""
    sizes = {"o": [{}, {"b": 1, "d": 33}]}
    result = check_rendered({"o": OUTER}, [{}, {"block": 16}], sizes, str(tmp_path))["o"]
    assert result["family"] == "elementwise", result
    assert "rows [4, 8, 16] wider than every input" in result["summary"]
    for err in result["errs"]:
        assert not isinstance(err, str) and err < 1e-5, result["errs"]


PAIR_SIZES = "b = 3\np = 9\nr = 7\nm = 24"
PAIR_INPUTS = "torch.randn(b, p, m), torch.randn(b, r, m)"


def _pairs(forward: str, inputs: str = PAIR_INPUTS) -> str:
    return _problem(forward, inputs, PAIR_SIZES)


PAIRS = {
    # every pair's squared distance, written out by broadcasting
    "broadcast": _pairs("(x[:, :, None, :] - y[:, None, :, :]).pow(2).sum(-1)"),
    # attention-like scores of every pair, normalised over the features
    "softmax": _pairs("torch.softmax(x.unsqueeze(2) * y.unsqueeze(1), dim=-1)"),
    # torch.cdist: ATen's product of [-2x, |x|^2, 1] operands (p = 2, rows over 25) or its
    # p-norm kernel (other p)
    "cdist": _pairs("torch.cdist(x, y)"),
    "cdist-p1": _pairs("torch.cdist(x, y, p=1.0)"),
    # whole numbers, so that some pairs' elements are equal
    "cdist-p0": _pairs(
        "torch.cdist(x, y, p=0.0)",
        "torch.randint(0, 3, (b, p, m)).float(), torch.randint(0, 3, (b, r, m)).float()",
    ),
    "cdist-inf": _pairs("torch.cdist(x, y, p=float('inf'))"),
    "cdist-p3": _pairs("torch.cdist(x, y, p=3.0)"),
    # pointwise ops on the inputs before they broadcast: computed where they are read
    "cdist-of-ops": _pairs("torch.cdist(x.exp(), y.sigmoid() * 3.0, p=1.0)"),
    "scaled-pairs": _pairs("((x * 0.5)[:, :, None, :] - y.float()[:, None]).abs().amax(-1)"),
}


def test_a_reduction_over_rows_wider_than_every_input_is_one_row_kernel(tmp_path):
    """A reduction over an outer broadcast (every pair of rows: distances, scores) was written
    whole by one kernel, then reduced by another; ``torch.cdist`` was refused. The row kernel
    now takes its rows' shape from the inputs' broadcast and reads each through its strides:
    one kernel, nothing written but the result, at the traced sizes and at others."""
    sizes = {name: [{}, {"b": 1, "p": 30, "r": 2, "m": 41}] for name in PAIRS}
    variants = [{}, {"strategy": "looped", "block_n": 16}]
    results = check_rendered(PAIRS, variants, sizes, str(tmp_path))
    for name, result in results.items():
        assert result["family"] == "row", (name, result["summary"])
        assert "kernels:" not in result["summary"], (name, result["summary"])
        assert "x [3, 9, 1, 24] broadcast" in result["summary"], (name, result["summary"])
        for err in result["errs"]:
            assert not isinstance(err, str) and err < 1e-4, (name, result["errs"])


def _square(forward: str) -> str:
    return _problem(forward, "torch.randn(b, n, n), torch.randn(b, n)", "b = 3\nn = 12")


# Identity matrices and diagonals (each was "eye / diag_embed / diagonal .default, which no
# template expresses"): comparisons of an element's row and column, as tril and triu are.
DIAGONALS = {
    "plus-diag-embed": _square("x + torch.diag_embed(y)"),
    "minus-eye": _square("x - 0.5 * torch.eye(x.shape[-1], device=x.device)"),
    "diagonal-scaled": _square("torch.diagonal(x, dim1=1, dim2=2) * y"),
    "trace": _square("x.diagonal(dim1=-2, dim2=-1).sum(-1) + y[:, 0]"),
    "gram-minus-eye": _square("x @ x.mT - torch.eye(x.shape[-1], device=x.device)"),
}


def test_identity_matrices_and_diagonals_are_coordinates(tmp_path):
    """``torch.eye``, ``torch.diag_embed`` and ``x.diagonal()`` over the last two dimensions
    are claimed (after a product, as a kernel of their own: a product's epilogue reads no
    coordinates) and computed right at two sizes; a diagonal over other dimensions is still
    refused in one line."""
    sizes = {name: [{}, {"b": 1, "n": 37}] for name in DIAGONALS}
    results = check_rendered(DIAGONALS, [{}, {"block_n": 16, "block": 64}], sizes, str(tmp_path))
    assert results["gram-minus-eye"]["family"] == "matmul+elementwise"
    for name, result in results.items():
        assert "a band of each matrix" in result["summary"], (name, result["summary"])
        for err in result["errs"]:
            assert not isinstance(err, str) and err < 1e-4, (name, result["errs"])
    with pytest.raises(NoTemplate, match="diagonal.default"):
        trace_problem(_square("torch.diagonal(x, dim1=0, dim2=1)"))


def test_a_linspace_of_numbers_is_each_elements_index_scaled(tmp_path):
    """``torch.linspace`` of numbers made in the forward (a ramp, histogram edges) was "linspace
    .default, which no template expresses"; it is each element's index, scaled from both ends
    as ATen computes it. Its length is the trace's: a width that changes with the input's is
    refused when the sizes change (a constant the templates cannot compute at run time)."""
    ramp = _problem(
        "x * torch.linspace(0.5, 1.5, 16, device=x.device) + y",
        "torch.randn(b, 16), torch.randn(b, 16)",
        "b = 6",
    )
    result = check_rendered({"ramp": ramp}, [{}], {"ramp": [{}, {"b": 5}]}, str(tmp_path))["ramp"]
    assert "each column's index" in result["summary"], result["summary"]
    for err in result["errs"]:
        assert not isinstance(err, str) and err < 1e-5, result["errs"]


def test_a_reduction_over_an_outer_broadcast_along_a_middle_dimension_is_a_chain(tmp_path):
    """Rows wider than every input, reduced along another than the last dimension: one
    kernel does not hold it; the broadcast is written first, then reduced (test_chain.py)."""
    summed = OUTER.replace(" * self.w.view(1, -1, 1)", ".sum(dim=1)")
    check_chained({"outer-sum": summed}, str(tmp_path))


def _smoothed(reduction: str, ignore: str = "") -> str:
    return (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
        "tokens = 37\nclasses = 50\n\n\n"
        "class Model(nn.Module):\n    def forward(self, x, t):\n"
        f"        return F.cross_entropy(x, t, label_smoothing=0.1, reduction={reduction!r}"
        f"{ignore})\n\n\n"
        "def get_inputs():\n"
        "    return [torch.randn(tokens, classes) * 3.0, torch.randint(0, classes, (tokens,))]"
        "\n\n\ndef get_init_inputs():\n    return []\n"
    )


def test_cross_entropy_with_label_smoothing_is_the_cross_entropy_kernel_with_its_term(tmp_path):
    """``F.cross_entropy(..., label_smoothing=e)``, every training recipe's loss, was refused
    ("nll_loss with extra ops"). Its extra ops are the mean over classes of -log p, scaled by
    e / C and added to (1 - e) times the loss: the cross-entropy kernel adds the row's sum of
    logits. Right for each reduction, with ignored rows, at other sizes, online and in two
    passes over the classes."""
    problems = {
        "mean": _smoothed("mean"),
        "sum": _smoothed("sum"),
        "none": _smoothed("none"),
        # target 0 ignored: about 1 row in 50 carries no loss and is not counted in the mean
        "mean-ignore": _smoothed("mean", ", ignore_index=0"),
    }
    sizes = {name: [{}, {"tokens": 5, "classes": 3000}] for name in problems}
    variants = [{"strategy": "online", "block_v": 64}, {"strategy": "two_pass", "block_v": 1024}]
    results = check_rendered(problems, variants, sizes, str(tmp_path))
    for name, result in results.items():
        assert result["family"] == "cross_entropy", (name, result)
        assert "label_smoothing=0.1" in result["summary"], result["summary"]
        for err in result["errs"]:
            assert not isinstance(err, str) and err < 1e-4, (name, result["errs"])
    with pytest.raises(NoTemplate, match="extra ops"):
        trace_problem(_smoothed("mean").replace("reduction='mean')", "reduction='mean') * 2.0"))


@pytest.mark.parametrize(
    "forward, reason",
    [
        ("torch.sort(x, dim=-1).values + y", "the values' order decides its output"),
        ("torch.topk(x, 3, dim=-1).values.sum(-1) + y.sum(-1)", "sorting or selection"),
        ("x.median(-1).values + y.sum(-1)", "sorting or selection"),
        ("x[x > 0].sum() + y.sum()", "its output's shape depends on the values"),
        # F.gaussian_nll_loss raises if any variance is negative: a value read on the host
        ("F.gaussian_nll_loss(x, y, x.abs() + 0.1)", "reads a tensor's value on the host"),
    ],
)
def test_sorting_and_data_shaped_outputs_are_refused_saying_why(forward, reason):
    """What truly is not a graph of pointwise ops, reductions and views (issue 11: "no template
    fits" said in one line, with the reason)."""
    with pytest.raises(NoTemplate, match=reason):
        trace_problem(_problem(forward, X2, ROWS))
