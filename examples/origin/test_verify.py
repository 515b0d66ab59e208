"""Runs the README's Python snippet against the test vector (unittest)."""
import unittest

from verify import verify_idemgate

SECRET = "whsec_test"
BODY = b'{"amount":1000}'
HEADERS = {
    "idempotency-key": '"order-42"',
    "idempotency-epoch": "1",
    "idempotency-signature": "t=1700000000,v1=c46fbc568198cf52410b61e17ba4499119045ceefb61c910d5906e4c50549f96",
}
T = 1700000000


class VerifyIdemgate(unittest.TestCase):
    def test_accepts_the_test_vector(self):
        self.assertEqual(verify_idemgate(HEADERS, BODY, SECRET, T), ("order-42", 1))

    def test_rejects_a_wrong_secret_and_modified_body_key_or_epoch(self):
        cases = [
            (HEADERS, BODY, "whsec_other"),
            (HEADERS, b'{"amount":1001}', SECRET),
            ({**HEADERS, "idempotency-key": '"order-43"'}, BODY, SECRET),
            ({**HEADERS, "idempotency-epoch": "2"}, BODY, SECRET),
        ]
        for headers, body, secret in cases:
            with self.assertRaisesRegex(ValueError, "bad"):
                verify_idemgate(headers, body, secret, T)

    def test_rejects_stale_future_and_malformed_headers(self):
        for now in (T + 301, T - 301):
            with self.assertRaisesRegex(ValueError, "stale"):
                verify_idemgate(HEADERS, BODY, SECRET, now)
        for name, value in [("idempotency-epoch", "0"), ("idempotency-key", "order-42"), ("idempotency-signature", "v1=00")]:
            with self.assertRaisesRegex(ValueError, "malformed"):
                verify_idemgate({**HEADERS, name: value}, BODY, SECRET, T)


if __name__ == "__main__":
    unittest.main()
