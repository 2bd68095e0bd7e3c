"""Raw values made readable: long decimals, scopes, GPU targets, compiled-kernel labels."""

from apps.campaigns.text import gpu_target, numbers_readable, scope_text, specialisation_labels


def test_long_decimals_are_cut_to_three_significant_digits():
    text = "n1 is 7.520x (95% CI [7.481234567890123, 7.559876543210987]); p 0.000123456789"
    assert numbers_readable(text) == "n1 is 7.520x (95% CI [7.48, 7.56]); p 0.000123"
    assert numbers_readable("case b4096_d1024 v1.2.3 took 12.5 s") == (
        "case b4096_d1024 v1.2.3 took 12.5 s"
    )
    assert numbers_readable("1234.56789 ms") == "1235 ms"


def test_a_scope_reads_as_words():
    scope = {
        "dtypes": ["bfloat16", "float32"],
        "constants": {"batch_size": [5, 8], "dim": [40, 40]},
        "inputs": [[[5, 8], [40, 96]], None],
    }
    assert scope_text(scope) == (
        "bfloat16, float32 · batch_size 5–8 · dim 40 · input 1: 5–8 × 40–96 · input 2: any shape"
    )


def test_gpu_target_names_the_architecture():
    assert gpu_target(["cuda", 90, 64]) == "sm_90"
    assert gpu_target(None) == "—"


def test_every_specialisation_gets_a_distinct_label():
    same = {"kernel": "_ke_row_one_pass", "constexprs": {"BLOCK": 1024}, "options": {}}
    other = {**same, "constexprs": {"BLOCK": 2048}}
    alone = {"kernel": "other_kernel", "constexprs": {"BLOCK": 64}}
    labels = specialisation_labels([same, same, other, alone])
    assert labels == [
        "_ke_row_one_pass [BLOCK=1024] #1 of 2",
        "_ke_row_one_pass [BLOCK=1024] #2 of 2",
        "_ke_row_one_pass [BLOCK=2048]",
        "other_kernel",
    ]
