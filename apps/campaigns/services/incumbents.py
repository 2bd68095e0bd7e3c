"""The incumbent a campaign may be judged against: the kernel a team serves today, uploaded in
the candidate format. It is checked here only as text (it parses, it defines ``ModelNew``);
like a candidate it runs nowhere but in the sandbox, beside each candidate on the GPU host."""

import ast

from django.core.exceptions import ValidationError

from apps.campaigns.constants import Baseline

MAX_INCUMBENT_CHARS = 1 << 20
FIELD = "incumbent_source"


def incumbent_check(*, source: str, baseline: str) -> None:
    """Refuse, in words, an incumbent that cannot serve: none where the baseline needs one, one
    that does not parse (with its line), or one without ``class ModelNew``."""
    if not source.strip():
        if baseline == Baseline.INCUMBENT:
            raise ValidationError(
                {FIELD: "the Incumbent baseline needs the incumbent kernel: upload it (a module "
                 "with class ModelNew, the candidate format)"}
            )  # fmt: skip
        return
    if len(source) > MAX_INCUMBENT_CHARS:
        raise ValidationError({FIELD: f"at most {MAX_INCUMBENT_CHARS >> 10} KiB of source"})
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ValidationError({FIELD: f"not Python: line {exc.lineno}: {exc.msg}"}) from exc
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
        raise ValidationError(
            {FIELD: "defines no class ModelNew (the candidate format: ModelNew takes the "
             "reference's init inputs and computes its forward)"}
        )  # fmt: skip
