"""Runs the README's Python snippet against the test vector (unittest)."""
import unittest

from verify import verify_idemgate

SECRET = "whsec_test"
BODY = b'{"amount":1000}'
SCOPE = "aabe82377599cfe24a321be32fb823296555d5c4aa830b3d009e5faf378715fd"
HEADERS = {
    "idempotency-key": '"order-42"',
    "idempotency-scope": SCOPE,
    "idempotency-epoch": "1700000000000000",
    "idempotency-signature": "t=1700000000,v1=8e1ea884ae2ecdc87e84868792f99660b4abc821116df7295a93d13d6a0afa53",
}
T = 1700000000
PATH = "/payments?currency=eur"


class VerifyIdemgate(unittest.TestCase):
    def test_accepts_the_test_vector(self):
        self.assertEqual(
            verify_idemgate(HEADERS, "POST", PATH, BODY, SECRET, T),
            (SCOPE, "order-42", 1700000000000000, "612612d208fb618eb2b007d2a7f8d7a1cfb511532389298f1cc33322c3094bcc"),
        )

    def test_rejects_a_wrong_secret_and_a_modified_request(self):
        cases = [
            (HEADERS, "POST", PATH, BODY, "whsec_other"),
            (HEADERS, "POST", PATH, b'{"amount":1001}', SECRET),
            ({**HEADERS, "idempotency-key": '"order-43"'}, "POST", PATH, BODY, SECRET),
            ({**HEADERS, "idempotency-scope": "b" * 64}, "POST", PATH, BODY, SECRET),
            ({**HEADERS, "idempotency-epoch": "1700000000000001"}, "POST", PATH, BODY, SECRET),
            (HEADERS, "PUT", PATH, BODY, SECRET),
            (HEADERS, "POST", "/payments?currency=usd", BODY, SECRET),
        ]
        for headers, method, path, body, secret in cases:
            with self.assertRaisesRegex(ValueError, "bad"):
                verify_idemgate(headers, method, path, body, secret, T)

    def test_rejects_stale_future_and_malformed_headers(self):
        for now in (T + 301, T - 301):
            with self.assertRaisesRegex(ValueError, "stale"):
                verify_idemgate(HEADERS, "POST", PATH, BODY, SECRET, now)
        for name, value in [
            ("idempotency-epoch", "0"),
            ("idempotency-key", "order-42"),
            ("idempotency-scope", "ABC"),
            ("idempotency-signature", "v1=00"),
            # Forms idemgate never writes: a leading zero in the epoch or in t, uppercase hex.
            ("idempotency-epoch", "0" + HEADERS["idempotency-epoch"]),
            ("idempotency-signature", HEADERS["idempotency-signature"].replace("t=", "t=0")),
            ("idempotency-signature", HEADERS["idempotency-signature"].upper().replace("T=", "t=").replace("V1=", "v1=")),
        ]:
            with self.assertRaisesRegex(ValueError, "malformed"):
                verify_idemgate({**HEADERS, name: value}, "POST", PATH, BODY, SECRET, T)


if __name__ == "__main__":
    unittest.main()
