"""What the vectors cannot say: the README's vector, sign(), the secret's
forms, the 64-bit bounds the Rust crate has, and the clock."""

from __future__ import annotations

import pytest

from idemgate_verify import Forwarded, VerifyError, sign, verify

# The README's test vector, computed independently with Python's hmac.
SCOPE = "aabe82377599cfe24a321be32fb823296555d5c4aa830b3d009e5faf378715fd"
VECTOR = "t=1700000000,v1=8e1ea884ae2ecdc87e84868792f99660b4abc821116df7295a93d13d6a0afa53"
HEADERS = {
    "idempotency-key": '"order-42"',
    "idempotency-scope": SCOPE,
    "idempotency-epoch": "1700000000000000",
    "idempotency-signature": VECTOR,
}
BODY = b'{"amount":1000}'
PATH = "/payments?currency=eur"
T = 1_700_000_000


def test_the_readme_vector_verifies_and_sign_writes_its_signature() -> None:
    assert verify("POST", PATH, HEADERS, BODY, "whsec_test", now=T) == Forwarded(
        scope=SCOPE,
        key="order-42",
        epoch=1_700_000_000_000_000,
        body_sha256="612612d208fb618eb2b007d2a7f8d7a1cfb511532389298f1cc33322c3094bcc",
        signed_at=T,
    )
    assert sign("POST", PATH, BODY, "whsec_test", SCOPE, "order-42", 1_700_000_000_000_000, T) == VECTOR


def test_the_secret_may_be_bytes() -> None:
    assert verify("POST", PATH, HEADERS, BODY, b"whsec_test", now=T).key == "order-42"


def with_epoch(epoch: int) -> dict[str, str]:
    signature = sign("POST", PATH, BODY, "whsec_test", SCOPE, "order-42", epoch, T)
    return {**HEADERS, "idempotency-epoch": str(epoch), "idempotency-signature": signature}


def test_epochs_go_up_to_2_to_the_64_minus_1_as_in_the_rust_crate() -> None:
    assert verify("POST", PATH, with_epoch(2**64 - 1), BODY, "whsec_test", now=T).epoch == 2**64 - 1
    with pytest.raises(VerifyError) as error:
        verify("POST", PATH, with_epoch(2**64), BODY, "whsec_test", now=T)
    assert (error.value.code, error.value.header) == ("malformed-header", "Idempotency-Epoch")


def test_a_t_far_beyond_any_clock_is_stale_and_past_64_bits_malformed() -> None:
    far = {**HEADERS, "idempotency-signature": f"t={2**64 - 1},v1={'0' * 64}"}
    with pytest.raises(VerifyError, match="stale") as error:
        verify("POST", PATH, far, BODY, "whsec_test", now=T)
    assert error.value.code == "stale"
    beyond = {**HEADERS, "idempotency-signature": f"t={2**64},v1={'0' * 64}"}
    with pytest.raises(VerifyError) as error:
        verify("POST", PATH, beyond, BODY, "whsec_test", now=T)
    assert error.value.code == "malformed-header"


def test_the_clock_defaults_to_the_systems() -> None:
    with pytest.raises(VerifyError) as error:
        verify("POST", PATH, HEADERS, BODY, "whsec_test")
    assert error.value.code == "stale"


def test_an_empty_secret_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="empty"):
        verify("POST", PATH, HEADERS, BODY, "", now=T)
