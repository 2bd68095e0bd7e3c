"""Django-free pieces of the runtime: signatures, scope matching and narrowing, comparison."""

import pytest
import torch
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from workers.runtime import scope as S
from workers.runtime.client import compare
from workers.runtime.signing import SignatureError, public_key_b64, sign, verify

SCOPE = {
    "dtypes": ["bfloat16", "float32"],
    "constants": {"batch_size": [5, 8], "dim": [40, 96]},
    "inputs": [[[5, 8], [40, 96]]],
}


def test_signature_verifies_and_any_change_is_refused():
    key = Ed25519PrivateKey.generate()
    public = public_key_b64(key.public_key())
    body = {"source": "def f(): pass", "scope": SCOPE, "x": 1.5}
    signature = sign(key, body)
    verify(public, body, signature)
    with pytest.raises(SignatureError, match="tampered"):
        verify(public, {**body, "source": "def f(): pasS"}, signature)
    flipped = signature[:10] + ("A" if signature[10] != "A" else "B") + signature[11:]
    with pytest.raises(SignatureError):
        verify(public, body, flipped)
    with pytest.raises(SignatureError, match="unsigned"):
        verify(public, body, None)
    other = public_key_b64(Ed25519PrivateKey.generate().public_key())
    with pytest.raises(SignatureError):
        verify(other, body, signature)


def test_scope_matches_dtype_and_every_dimension():
    assert S.matches(SCOPE, "float32", [(8, 96)])
    assert S.matches(SCOPE, "bfloat16", [(5, 40)])
    assert not S.matches(SCOPE, "float16", [(8, 96)])
    assert not S.matches(SCOPE, "float32", [(9, 96)])
    assert not S.matches(SCOPE, "float32", [(8, 96, 1)])
    assert not S.matches(SCOPE, "float32", [(8, 96), (1,)])


def test_narrowing_only_narrows():
    narrowed = S.narrow(SCOPE, dtypes=["float32"], constants={"dim": [40, 64]})
    assert narrowed["dtypes"] == ["float32"] and narrowed["constants"]["dim"] == [40, 64]
    with pytest.raises(S.ScopeError, match="narrow only"):
        S.narrow(SCOPE, dtypes=["float16"])
    with pytest.raises(S.ScopeError, match="narrow only"):
        S.narrow(SCOPE, constants={"dim": [32, 96]})
    assert S.within({**SCOPE, "inputs": [[[5, 6], [40, 50]]]}, SCOPE)
    assert not S.within({**SCOPE, "inputs": [[[5, 9], [40, 50]]]}, SCOPE)


def test_compare_uses_the_contract_tolerance():
    ref = torch.rand(4, 8)
    assert compare(ref + 5e-5, ref, {"float32": {"atol": 1e-4, "rtol": 1e-4}}) is None
    bad = compare(ref + 1e-3, ref, {"float32": {"atol": 1e-4, "rtol": 1e-4}})
    assert bad and "32 of 32" in bad["reason"] and bad["max_abs_err"] == pytest.approx(1e-3, 1e-2)
    assert compare(ref + 1e-6, ref, "exact") is not None
    nan = ref.clone()
    nan[0, 0] = float("nan")
    assert compare(nan, ref, None)["nan"] is True
    assert "shape" in compare(ref[:2], ref, None)["reason"]


def test_compare_forgives_one_ulp_between_two_rounded_outputs_but_not_two():
    # Shadow compares two bf16 results: both are rounded, so 1 ulp apart is rounding (the case
    # the H200 shadow run hit), while 2 ulps past the contract's bound is a mismatch.
    tol = {"bfloat16": {"atol": 1e-2, "rtol": 1e-2}}
    ref = torch.full((4,), 2.0, dtype=torch.bfloat16)
    one_ulp = torch.nextafter(ref, torch.full_like(ref, 4.0))
    assert float(one_ulp[0]) - 2.0 == 2**-6
    assert compare(one_ulp, ref, tol) is None
    three_ulps = ref + 3 * 2**-6
    assert compare(three_ulps, ref, tol) is not None


def test_interpret_client_refuses_a_process_that_imported_triton_compiled(tmp_path):
    # A subprocess: this test process runs with TRITON_INTERPRET=1 from the start.
    import subprocess
    import sys

    code = (
        "import os; os.environ.pop('TRITON_INTERPRET', None); import triton.language\n"
        "from workers.runtime.client import DispatchClient\n"
        "try:\n"
        f"    DispatchClient('http://127.0.0.1:9', 't', cache_dir={str(tmp_path)!r}, "
        "background=False)\n"
        "except RuntimeError as exc:\n"
        "    print('refused:', exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "refused: platform 'interpret' needs TRITON_INTERPRET=1" in out.stdout, out.stderr


def test_clients_do_not_all_sample_the_same_calls(tmp_path):
    # A fixed default seed made every client (and every replay of 20 calls) draw the same
    # numbers: with seed 0 none of the first 20 is under the 0.25 shadow rate, so the demo's
    # shadow stage never got a sample. Unseeded clients draw independently.
    from workers.runtime.client import DispatchClient

    def draws(folder):
        client = DispatchClient(
            "http://127.0.0.1:9", "t", cache_dir=str(tmp_path / folder), background=False
        )
        return [client.rng.random() for _ in range(5)]

    assert draws("a") != draws("b")
    seeded = DispatchClient(
        "http://127.0.0.1:9", "t", cache_dir=str(tmp_path / "c"), background=False, seed=7
    )
    assert seeded.rng.random() == __import__("random").Random(7).random()
