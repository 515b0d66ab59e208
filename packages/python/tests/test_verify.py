"""What the vectors cannot say: the README's vectors, sign(), the secret's
forms, the 64-bit bounds the Rust crate has, and the clock."""

from __future__ import annotations

from dataclasses import replace

import pytest

from idemgate_verify import Forwarded, VerifyError, sign, verify

# The README's test vectors, computed independently with Python's hmac.
SCOPE = "aabe82377599cfe24a321be32fb823296555d5c4aa830b3d009e5faf378715fd"
VECTOR = "t=1700000000,v1=8e1ea884ae2ecdc87e84868792f99660b4abc821116df7295a93d13d6a0afa53"
VECTOR_V2 = "t=1700000000,v2=97b6ee9585b362364454abe474303feee33744719d8c5cd8c28e0ee5342d8bd1"
HEADERS = {
    "idempotency-key": '"order-42"',
    "idempotency-scope": SCOPE,
    "idempotency-epoch": "1700000000000000",
    "idempotency-signature": VECTOR,
    "idempotency-signature-v2": VECTOR_V2,
}
# The same forward as reconciliation sends it late: v1 is the same.
RECONCILED_STALE_V2 = "t=1700000000,v2=a33ab68fdcf7820d9d99e1598b334049da0695db6e718e0636ac6ae2698b0e18"
RECONCILED_STALE = {
    **HEADERS,
    "idempotency-source": "reconciliation",
    "idempotency-stale": "true",
    "idempotency-signature-v2": RECONCILED_STALE_V2,
}
BODY = b'{"amount":1000}'
PATH = "/payments?currency=eur"
T = 1_700_000_000


def test_the_readme_vectors_verify_and_sign_writes_their_headers() -> None:
    forwarded = Forwarded(
        scope=SCOPE,
        key="order-42",
        epoch=1_700_000_000_000_000,
        body_sha256="612612d208fb618eb2b007d2a7f8d7a1cfb511532389298f1cc33322c3094bcc",
        signed_at=T,
    )
    assert verify("POST", PATH, HEADERS, BODY, "whsec_test", now=T) == forwarded
    assert (forwarded.source, forwarded.stale) == (None, False)
    assert verify("POST", PATH, RECONCILED_STALE, BODY, "whsec_test", now=T) == replace(
        forwarded, source="reconciliation", stale=True
    )
    assert sign("POST", PATH, BODY, "whsec_test", SCOPE, "order-42", 1_700_000_000_000_000, T) == [
        ("Idempotency-Signature", VECTOR),
        ("Idempotency-Signature-V2", VECTOR_V2),
    ]
    late = sign(
        "POST", PATH, BODY, "whsec_test", SCOPE, "order-42", 1_700_000_000_000_000, T, source="reconciliation", stale=True
    )
    assert late == [
        ("Idempotency-Source", "reconciliation"),
        ("Idempotency-Stale", "true"),
        ("Idempotency-Signature", VECTOR),
        ("Idempotency-Signature-V2", RECONCILED_STALE_V2),
    ]


def test_v2_decides_v1_must_be_there_at_v2s_t_but_its_hmac_is_not_checked() -> None:
    other = dict(sign("POST", PATH, BODY, "whsec_other", SCOPE, "order-42", 1_700_000_000_000_000, T))
    v1_of_another_secret = {**HEADERS, "idempotency-signature": other["Idempotency-Signature"]}
    assert verify("POST", PATH, v1_of_another_secret, BODY, "whsec_test", now=T).key == "order-42"
    v2_of_another_secret = {**HEADERS, "idempotency-signature-v2": other["Idempotency-Signature-V2"]}
    moved = {**HEADERS, "idempotency-signature": VECTOR.replace("t=1700000000", "t=1699999999")}
    for headers in (v2_of_another_secret, moved):
        with pytest.raises(VerifyError) as error:
            verify("POST", PATH, headers, BODY, "whsec_test", now=T)
        assert error.value.code == "bad-signature"
    without_v2 = {name: value for name, value in HEADERS.items() if name != "idempotency-signature-v2"}
    with pytest.raises(VerifyError) as error:
        verify("POST", PATH, without_v2, BODY, "whsec_test", now=T)
    assert (error.value.code, error.value.header) == ("missing-header", "Idempotency-Signature-V2")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("idempotency-source", ""),
        ("idempotency-source", "two words"),
        ("idempotency-source", "reconciliation,reconciliation"),
        ("idempotency-stale", "false"),
        ("idempotency-stale", "1"),
        ("idempotency-stale", "True"),
    ],
)
def test_source_is_one_token_and_stale_only_true(name: str, value: str) -> None:
    with pytest.raises(VerifyError) as error:
        verify("POST", PATH, {**RECONCILED_STALE, name: value}, BODY, "whsec_test", now=T)
    assert error.value.code == "malformed-header"
    assert (error.value.header or "").lower() == name


def test_spaces_and_tabs_around_source_and_stale_are_https() -> None:
    padded = {**RECONCILED_STALE, "idempotency-source": " reconciliation\t", "idempotency-stale": "\ttrue "}
    assert verify("POST", PATH, padded, BODY, "whsec_test", now=T).source == "reconciliation"


def test_the_secret_may_be_bytes() -> None:
    assert verify("POST", PATH, HEADERS, BODY, b"whsec_test", now=T).key == "order-42"


def with_epoch(epoch: int) -> dict[str, str]:
    signatures = sign("POST", PATH, BODY, "whsec_test", SCOPE, "order-42", epoch, T)
    return {**HEADERS, "idempotency-epoch": str(epoch), **{name.lower(): value for name, value in signatures}}


def test_epochs_go_up_to_2_to_the_64_minus_1_as_in_the_rust_crate() -> None:
    assert verify("POST", PATH, with_epoch(2**64 - 1), BODY, "whsec_test", now=T).epoch == 2**64 - 1
    with pytest.raises(VerifyError) as error:
        verify("POST", PATH, with_epoch(2**64), BODY, "whsec_test", now=T)
    assert (error.value.code, error.value.header) == ("malformed-header", "Idempotency-Epoch")


def test_a_t_far_beyond_any_clock_is_stale_and_past_64_bits_malformed() -> None:
    def at(t: int) -> dict[str, str]:
        return {**HEADERS, "idempotency-signature": f"t={t},v1={'0' * 64}", "idempotency-signature-v2": f"t={t},v2={'0' * 64}"}

    far = at(2**64 - 1)
    with pytest.raises(VerifyError, match="stale") as error:
        verify("POST", PATH, far, BODY, "whsec_test", now=T)
    assert error.value.code == "stale"
    beyond = at(2**64)
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
